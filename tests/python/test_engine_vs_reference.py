"""The C++ engine (CPU backend) against the independent NumPy reference in tests/reference/:
teacher-forced logits per step, then whole decodes (greedy, seeded sampling, every strategy,
block lengths, prompt shapes, stop rules), through the `jetengine` CLI and forward_probe."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from jet_test_utils import BUILD, REPO, make_tiny_model, run_cli

sys.path.insert(0, str(REPO / "tests" / "reference"))
from generate_np import generate as reference_generate  # noqa: E402
from model_np import ReferenceModel, block_logits  # noqa: E402

ARCHS = ["sdar", "sdar_moe", "llada", "fast_dllm_v2", "dream", "llada2_moe"]


@pytest.fixture(scope="module", params=ARCHS)
def model(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    make_tiny_model(request.param, out, seed=7)
    return out, ReferenceModel.from_dir(str(out))


def probe_logits(model_dir, requests):
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    done = subprocess.run([str(BUILD / "tests" / "forward_probe"), "--model", str(model_dir)], input=lines,
                          capture_output=True, text=True, check=True)
    return [np.array(json.loads(line)["logits"]) for line in done.stdout.splitlines()]


def test_block_logits_match_reference(model):
    model_dir, ref = model
    rng = np.random.default_rng(0)
    vocab = ref.vocab_rows
    requests = []
    for B, committed_len, num_prefill in [(4, 8, 8), (4, 13 // 4 * 4 + 4, 12), (8, 16, 8), (1, 5, 5), (4, 0, 0)]:
        committed = rng.integers(0, vocab, committed_len).tolist()
        block = rng.integers(0, vocab, B).tolist()
        requests.append(dict(committed=committed, num_prefill=num_prefill, block=block, block_length=B))
    for req, got in zip(requests, probe_logits(model_dir, requests)):
        want = block_logits(ref, req["committed"], req["block"], req["num_prefill"], req["block_length"])
        rel = np.abs(got - want).max() / np.abs(want).max()
        assert rel <= 1e-4, f"{req['block_length']=} {len(req['committed'])=}: relative error {rel:.2e}"


def engine_generate(model_dir, prompts, params, engine_args=(), expect_ok=True):
    path = model_dir / "prompts.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    args = ["generate", "--model", str(model_dir), "--prompts", str(path), "--json", *engine_args]
    flag = {"temperature": "--temperature", "top_k": "--top-k", "top_p": "--top-p", "max_tokens": "--max-tokens",
            "denoising_steps": "--denoising-steps", "remasking_strategy": "--strategy",
            "dynamic_threshold": "--dynamic-threshold", "dynamic_factor": "--dynamic-factor",
            "eb_threshold": "--eb-threshold", "seed": "--seed", "repetition_penalty": "--repetition-penalty",
            "block_length": "--block-length", "diversity_enforce_barrier": "--diversity-enforce-barrier",
            "epsilon_greedy": "--epsilon-greedy", "sub_block_length": "--sub-block-length",
            "editing_threshold": "--editing-threshold", "max_post_steps": "--max-post-steps"}
    for key, value in params.items():
        if key == "ignore_eos":
            args += ["--ignore-eos"] if value else []
        elif key == "stop_token_ids":
            args += ["--stop-token-ids", ",".join(map(str, value))]
        else:
            args += [flag[key], str(value)]
    done = run_cli(args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def compare(model, prompts, params, max_model_len=4096, engine_args=()):
    model_dir, ref = model
    max_model_len = min(max_model_len, ref.config.max_positions)  # the engine clamps the same way
    # The default block length is a policy (LLaDA checkpoints name none); the tests pin it.
    params = dict(params, block_length=params.get("block_length", 4))
    got = engine_generate(model_dir, prompts, params, engine_args)
    want = reference_generate(ref, prompts, params, max_model_len)
    assert len(got) == len(want) == len(prompts)
    for i, (g, w) in enumerate(zip(got, want)):
        for key in ["token_ids", "completion_ids", "trajectory", "finish_reason", "num_forwards", "prompt_len"]:
            assert g[key] == w[key], f"prompt {i} ({len(prompts[i])} tokens) {key}: engine {g[key]} != reference {w[key]}"
        np.testing.assert_allclose(g["logprobs"], w["logprobs"], atol=2e-4, rtol=1e-3)
        np.testing.assert_allclose(g["entropies"], w["entropies"], atol=2e-4, rtol=1e-3)
    return got


def prompts_of(lengths, vocab, seed=1):
    rng = np.random.default_rng(seed)
    # Keep clear of special ids at the top of the small vocabulary.
    return [rng.integers(3, min(vocab, 200), n).tolist() for n in lengths]


@pytest.mark.parametrize("B", [1, 4, 8])
def test_greedy_decode_matches_reference(model, B):
    _, ref = model
    # Lengths that are and are not multiples of B, shorter than B (pure diffusion), equal to B.
    lengths = sorted({1, 3, B, B + 1, 2 * B + 3, 17})
    params = dict(temperature=0, max_tokens=13, block_length=B, denoising_steps=min(B, 4), ignore_eos=True)
    compare(model, prompts_of(lengths, ref.vocab_rows), params)


# Block lengths independent of the KV-cache page size: blocks inside a page (64 in 256, or
# across pages of 24), blocks of one page or of four (1024), blocks that start inside a page and
# end in another (96, 300 with pages of 256). Each case has a prompt shorter than the block (pure
# diffusion: no prefill, the prompt attended inside the first block) and one longer (a prefill,
# then its tail in the first block), but the one at S = B = 1024, whose prompt leaves 24 masks so
# that its 24 one-token steps stay quick; max_tokens reaches into a second block. S = B is the
# longest schedule, one token a step.
LONG_BLOCKS = [  # B, page size, prompt lengths, denoising steps, max_tokens
    (64, 256, [40, 150], 64, 60),
    (64, 24, [40, 150], 8, 100),
    (96, 256, [50, 200], 24, 200),
    (256, 256, [100, 300], 8, 300),
    (300, 256, [100, 350], 6, 320),
    (1024, 256, [1000], 1024, 20),
    (1024, 256, [100, 1030], 4, 930),
]


# Seeded sampling, not greedy: a tiny random model gives a block's masked positions nearly the same
# distribution, and with hundreds of them the most confident few are often apart by less than fp32
# rounding, which then picks differently from float64. Sampled tokens make the confidences differ.
# SDAR-MoE has SDAR's attention, so the block-causal and the bidirectional family cover it.
@pytest.mark.parametrize("strategy", ["low_confidence_static", "low_confidence_dynamic"])
@pytest.mark.parametrize("B, page, lengths, steps, max_tokens", LONG_BLOCKS)
def test_long_blocks_match_reference(model, B, page, lengths, steps, max_tokens, strategy):
    _, ref = model
    if ref.config.num_experts:
        pytest.skip("the block and page handling is SDAR's")
    params = dict(temperature=1.0, seed=5, max_tokens=max_tokens, block_length=B, denoising_steps=steps,
                  ignore_eos=True, remasking_strategy=strategy, dynamic_threshold=0.9)
    compare(model, prompts_of(lengths, ref.vocab_rows), params, engine_args=["--kv-page-size", str(page)])


# A step's sequences split into forwards of at most max_num_batched_tokens tokens, and a step's
# logits computed and sampled that many rows at a time: 1 gives every entry (a block, with its
# saved block for SDAR) and every logits row its own; 9 two blocks of 4 a forward; 20 blocks of
# 64 alone, their logits in chunks of 20 rows. Prompts longer than the limit are prefilled alone.
@pytest.mark.parametrize("B, max_batched", [(4, 1), (4, 9), (64, 20)])
def test_forwards_split_by_max_num_batched_tokens_match_reference(model, B, max_batched):
    _, ref = model
    params = dict(temperature=1.0, seed=3, max_tokens=3 * B // 2, ignore_eos=True, block_length=B,
                  denoising_steps=4)
    compare(model, prompts_of([3, 6, 9, 12, 5, 70], ref.vocab_rows, seed=8), params,
            engine_args=["--max-num-batched-tokens", str(max_batched)])


# Sub-blocks (docs/decoding.md §2): Fast-dLLM v2's 8 in 32 with its threshold, and smaller ones,
# over prompts that end inside the first sub-block, past it, and on a block boundary.
@pytest.mark.parametrize("B, b, steps, strategy", [
    (32, 8, 8, "low_confidence_dynamic"), (8, 4, 4, "low_confidence_static"), (8, 2, 1, "entropy_static"),
    (8, 1, 1, "low_confidence_static")])
def test_sub_blocks_match_reference(model, B, b, steps, strategy):
    _, ref = model
    params = dict(temperature=1.0, seed=4, max_tokens=2 * B, ignore_eos=True, block_length=B, denoising_steps=steps,
                  sub_block_length=b, remasking_strategy=strategy, dynamic_threshold=0.9)
    compare(model, prompts_of([3, B // 2 + 1, B, 2 * B + 5], ref.vocab_rows, seed=6), params)


# Token editing (docs/decoding.md §4), LLaDA2.1's T2T: threshold 0 edits wherever the sample moves
# (greedy, and seeded sampling, where it moves at nearly every step, so blocks run their post steps
# out), LLaDA2.1's joint threshold (low_confidence_dynamic, S = B) with a threshold the tiny
# models reach now and then; post steps bounded at 0, 3 and 16; prompts ending inside the first
# block, on a block boundary and past it (B > P: the prompt is in the block and never edited).
@pytest.mark.parametrize("threshold, max_post, temperature, strategy, B, steps", [
    (0.0, 16, 0, "low_confidence_static", 4, 4), (0.0, 3, 0.9, "low_confidence_static", 4, 2),
    (0.15, 16, 0, "low_confidence_dynamic", 8, 8), (0.0, 0, 0, "low_confidence_static", 4, 4)])
def test_token_editing_matches_reference(model, threshold, max_post, temperature, strategy, B, steps):
    model_dir, ref = model
    params = dict(temperature=temperature, seed=8, max_tokens=2 * B + 3, ignore_eos=True, block_length=B,
                  denoising_steps=steps, remasking_strategy=strategy, dynamic_threshold=0.2,
                  editing_threshold=threshold, max_post_steps=max_post)
    prompts = prompts_of([3, B, B + 5], ref.vocab_rows, seed=2)
    if ref.config.shifted_logits:
        path = model_dir / "prompts.jsonl"
        path.write_text("".join(json.dumps(p) + "\n" for p in prompts))
        done = run_cli(["generate", "--model", str(model_dir), "--prompts", str(path), "--editing-threshold", "0.5"])
        assert done.returncode != 0 and "token editing needs a model without shifted logits" in done.stderr
        return
    got = compare(model, prompts, params)
    plain = engine_generate(model_dir, prompts, {k: v for k, v in params.items() if k != "editing_threshold"})
    if threshold == 0.0 and max_post > 0:  # the edits did happen
        assert [g["completion_ids"] for g in got] != [p["completion_ids"] for p in plain]


@pytest.mark.parametrize("steps", [1, 2, 4])
def test_step_counts_match_reference(model, steps):
    _, ref = model
    params = dict(temperature=0, max_tokens=12, denoising_steps=steps, ignore_eos=True)
    compare(model, prompts_of([5, 8], ref.vocab_rows), params)


STRATEGIES = ["sequential", "anti_sequential", "random", "dilated", "low_confidence_static", "margin_static",
              "entropy_static", "low_confidence_dynamic", "dynamic_factor", "dynamic_pmax", "entropy_bounded"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_matches_reference(model, strategy):
    _, ref = model
    params = dict(temperature=0, max_tokens=16, remasking_strategy=strategy, ignore_eos=True, seed=11,
                  dynamic_threshold=0.02, eb_threshold=4.0, dynamic_factor=3.0)
    compare(model, prompts_of([6, 9], ref.vocab_rows, seed=3), params)


def test_seeded_sampling_matches_reference(model):
    _, ref = model
    params = dict(temperature=0.8, top_k=20, top_p=0.9, max_tokens=12, seed=1234, ignore_eos=True,
                  repetition_penalty=1.3)
    compare(model, prompts_of([4, 7, 10], ref.vocab_rows, seed=5), params)


@pytest.mark.parametrize("barrier, epsilon", [(6, 0.0), (-1, 0.5), (0, 0.3)])
def test_exploration_modifiers_match_reference(model, barrier, epsilon):
    _, ref = model
    # Prompts of 3 and 9 tokens begin with a block that holds their tail; one of 12 begins at P.
    # Barrier 6 makes two or three blocks sequential, barrier 0 the first alone.
    params = dict(temperature=0.9, max_tokens=20, seed=21, ignore_eos=True, remasking_strategy="margin_static",
                  diversity_enforce_barrier=barrier, epsilon_greedy=epsilon)
    compare(model, prompts_of([3, 9, 12], ref.vocab_rows, seed=4), params)


# JetLM's -bN checkpoints (SDAR-4B-Chat-b64, SDAR-30B-A3B-Chat-b32) carry the block-4 model's
# config.json, without block_size: with no --block-length the engine takes N from the name, says
# so at start-up, and decodes as the reference does at B = N. TraDo (block 4) has no such part.
@pytest.mark.parametrize("name, B", [("SDAR-tiny-Chat-b8", 8), ("TraDo-tiny-Instruct", 4)])
def test_block_length_from_the_checkpoint_name(model, tmp_path, name, B):
    model_dir, ref = model
    if ref.config.family not in ("sdar", "sdar_moe"):
        pytest.skip("only SDAR publishes -bN checkpoints whose config has no block_size")
    named = tmp_path / name
    shutil.copytree(model_dir, named)
    config = json.loads((named / "config.json").read_text())
    del config["block_size"]
    (named / "config.json").write_text(json.dumps(config))
    prompts = prompts_of([3, 10, 17], ref.vocab_rows)
    params = dict(temperature=0, max_tokens=2 * B + 3, denoising_steps=min(B, 4), ignore_eos=True)
    got = engine_generate(named, prompts, params)
    want = reference_generate(ref, prompts, dict(params, block_length=B), 4096)
    for g, w in zip(got, want):
        assert g["completion_ids"] == w["completion_ids"] and g["num_forwards"] == w["num_forwards"]
    done = run_cli(["inspect", "--model", named])
    source = f"the model's name, {name}" if B != 4 else "the family's default: config.json has no block_size"
    assert f"block size:      {B} (from {source})" in done.stdout, done.stdout


def test_stop_tokens_and_max_tokens(model):
    model_dir, ref = model
    prompts = prompts_of([6, 9, 11], ref.vocab_rows, seed=9)
    free = engine_generate(model_dir, prompts, dict(temperature=0, max_tokens=24, ignore_eos=True, block_length=4))
    # Stop at a token the free-running decode produces in the middle of a block.
    stop = free[0]["completion_ids"][5]
    got = compare(model, prompts, dict(temperature=0, max_tokens=24, ignore_eos=True, stop_token_ids=[stop]))
    first = got[0]["completion_ids"]
    assert first[-1] == stop and stop not in first[:-1] and got[0]["finish_reason"] == "stop"
    for n in [1, 3, 4, 7]:
        out = engine_generate(model_dir, prompts, dict(temperature=0, max_tokens=n, ignore_eos=True))
        assert all(len(o["completion_ids"]) == n and o["finish_reason"] == "length" for o in out)
        assert all(len(o["trajectory"]) == len(o["logprobs"]) == len(o["entropies"]) == n for o in out)


def test_max_model_len_ends_with_length(model):
    model_dir, ref = model
    prompts = prompts_of([10], ref.vocab_rows)
    got = compare(model, prompts, dict(temperature=0, max_tokens=64, ignore_eos=True), max_model_len=24,
                  engine_args=["--max-model-len", "24"])
    assert got[0]["finish_reason"] == "length" and len(got[0]["token_ids"]) <= 24


# Efficient-DLM (NVIDIA): SDAR's network under its base model's model_type "qwen3", known by its
# architectures entry alone; no shift, block 32 and mask 151662 when config.json names none
# (a Qwen3-vocabulary tiny model holds that id). A plain Qwen3 config stays refused.
def test_efficient_dlm_decodes_as_the_reference(tmp_path):
    model_dir = tmp_path / "Efficient-DLM-tiny"
    make_tiny_model("sdar", model_dir, 7, "--vocab", "qwen3")
    config = json.loads((model_dir / "config.json").read_text())
    for key in ("block_size", "mask_token_id", "auto_map"):
        config.pop(key)
    (model_dir / "config.json").write_text(json.dumps(dict(config, model_type="qwen3", architectures=["EfficientDLM"])))
    done = run_cli(["inspect", "--model", model_dir])
    assert "model_type:      qwen3 (EfficientDLM, block-causal attention, qk-norm)" in done.stdout, done.stdout
    assert "block size:      32 (from the family's default: config.json has no block_size)" in done.stdout
    assert "mask token:      151662" in done.stdout
    ref = ReferenceModel.from_dir(str(model_dir))
    assert (ref.config.family, ref.config.mask_token_id, ref.config.block_size) == ("efficient_dlm", 151662, 32)
    prompts = prompts_of([5, 32, 40], ref.vocab_rows, seed=3)
    compare((model_dir, ref), prompts, dict(temperature=0, max_tokens=40, ignore_eos=True, block_length=32,
                                            denoising_steps=8, remasking_strategy="low_confidence_dynamic"))
    (model_dir / "config.json").write_text(json.dumps(dict(config, model_type="qwen3",
                                                           architectures=["Qwen3ForCausalLM"])))
    done = run_cli(["inspect", "--model", model_dir])
    assert done.returncode != 0 and "unsupported model_type 'qwen3'" in done.stderr, done.stderr
