"""Decode-loop invariants (docs/decoding.md §1-§5) on tiny random models, and the CLI."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import generate_np
import sampling_np
from conftest import SHIFTED_ARCHS
from model_np import block_logits, head_logits, segment_ids, shifted_block_logits

GREEDY = dict(temperature=0.0, ignore_eos=True, block_length=4, denoising_steps=4)
PROMPT = [3, 8, 13, 21, 34]  # P = 5, B = 4: one prefill block, tail of 1 in the first block


def decode(model, prompt=PROMPT, max_model_len=256, **params):
    return generate_np.decode_one(model, prompt, {**GREEDY, **params}, max_model_len)


def test_sequential_trajectory_counts_global_steps_across_blocks(tiny_models):
    out = decode(tiny_models["sdar"], remasking_strategy="sequential", max_tokens=11)
    # First block: 3 masks, one per step, then it stops early; next blocks: 4 steps each.
    assert out["trajectory"] == list(range(1, 12))
    assert out["num_forwards"] == 1 + 11  # prefill + denoise steps (saves ride in denoise forwards)
    assert out["prompt_len"] == 5 and out["token_ids"][:5] == PROMPT
    assert out["token_ids"][5:] == out["completion_ids"]
    assert out["finish_reason"] == "length"
    assert len(out["logprobs"]) == len(out["entropies"]) == 11


EIGHT_TOKEN_PROMPT = [3, 8, 13, 21, 34, 5, 6, 7]  # two full prefill blocks, no tail


@pytest.mark.parametrize("arch", ["sdar", "sdar_moe", "llada", "fast_dllm_v2", "dream", "llada2_moe"])
@pytest.mark.parametrize("strategy, steps", [
    ("low_confidence_static", 2), ("margin_static", 4), ("random", 3), ("entropy_bounded", 4),
    ("low_confidence_dynamic", 4), ("dynamic_factor", 4), ("dynamic_pmax", 4)])
def test_forward_count_and_trajectory_range(tiny_models, arch, strategy, steps):
    # 12 tokens = 3 whole blocks, nothing trimmed. P = 8 is a multiple of B: with shifted logits
    # the prefill covers [0, 4) and every block (the first too) starts with a head step, a global
    # step and a forward of its own, before its S denoise steps.
    shifted = arch in SHIFTED_ARCHS
    out = decode(tiny_models[arch], prompt=EIGHT_TOKEN_PROMPT, max_tokens=12,
                 remasking_strategy=strategy, denoising_steps=steps)
    steps_taken = max(out["trajectory"])
    assert sorted(set(out["trajectory"])) == list(range(1, steps_taken + 1))  # >= 1 per step
    assert out["num_forwards"] == 1 + steps_taken  # a prefill either way ([0, 8) or [0, 4))
    for block in range(3):
        block_steps = out["trajectory"][4 * block:4 * block + 4]
        # at most S denoise steps per block, after its head step
        assert max(block_steps) - min(block_steps) < steps + shifted
        if shifted:  # the head step commits the block's first position, alone, first
            assert block_steps[0] < min(block_steps[1:])
    if strategy == "low_confidence_static":
        # schedule [2, 2]: all four masks; with a head step, its one, then [2, 1] of three
        per_block = [1, 2, 1] if shifted else [2, 2]
        assert [out["trajectory"].count(t) for t in range(1, steps_taken + 1)] == per_block * 3


def test_exploration_modifiers_at_their_extremes(tiny_models):
    model = tiny_models["sdar"]
    sampled = dict(temperature=1.0, seed=9, max_tokens=16, remasking_strategy="entropy_static")

    def run(**params):
        return decode(model, **{**sampled, **params})

    assert run(diversity_enforce_barrier=10**6) == run(remasking_strategy="sequential")
    assert run(epsilon_greedy=1.0) == run(remasking_strategy="random")
    assert run(epsilon_greedy=1.0, diversity_enforce_barrier=10**6) == run(remasking_strategy="sequential")
    # Barrier 4 (P = 5): the blocks at 4 and 8 are sequential (4 - 5 and 8 - 5 <= 4), the rest
    # entropy_static; so is the first block alone with barrier 0.
    seq, own = run(remasking_strategy="sequential"), run()
    barrier = run(diversity_enforce_barrier=4)
    assert barrier["trajectory"][:7] == seq["trajectory"][:7] == list(range(1, 8))
    assert barrier["completion_ids"][:7] == seq["completion_ids"][:7]
    assert run(diversity_enforce_barrier=0)["trajectory"][:3] == [1, 2, 3]
    assert barrier != own and barrier != seq


# Thresholds that every confidence / entropy passes, and ones that none does.
LOOSE = {"entropy_bounded": {"eb_threshold": 1e9},
         "low_confidence_dynamic": {"dynamic_threshold": 0.0},
         "dynamic_factor": {"dynamic_factor": 1e9}, "dynamic_pmax": {"dynamic_threshold": 0.0}}
TIGHT = {"entropy_bounded": {"eb_threshold": -1.0},
         "low_confidence_dynamic": {"dynamic_threshold": 1.0},
         "dynamic_factor": {"dynamic_factor": 0.0}, "dynamic_pmax": {"dynamic_threshold": 2.0}}


@pytest.mark.parametrize("arch", ["sdar_moe", "dream", "llada2_moe"])
@pytest.mark.parametrize("strategy", sorted(LOOSE))
def test_dynamic_strategies_at_their_extremes(tiny_models, strategy, arch):
    model = tiny_models[arch]
    loose = decode(model, prompt=EIGHT_TOKEN_PROMPT, max_tokens=12,
                   remasking_strategy=strategy, **LOOSE[strategy])
    if arch in SHIFTED_ARCHS:
        # Each block: its head step, then the three masks left in one denoise forward.
        assert loose["trajectory"] == [1, 2, 2, 2, 3, 4, 4, 4, 5, 6, 6, 6]
        assert loose["num_forwards"] == 1 + 6
    else:
        # The whole block in its first step: one denoise forward per block.
        assert loose["trajectory"] == [1] * 4 + [2] * 4 + [3] * 4
        assert loose["num_forwards"] == 1 + 3
    tight = decode(model, prompt=EIGHT_TOKEN_PROMPT, max_tokens=12,
                   remasking_strategy=strategy, **TIGHT[strategy])
    # One position per step (the schedule's n = 1, or "at least 1", or a head step): four steps
    # per block.
    assert sorted(tight["trajectory"]) == list(range(1, 13))
    assert tight["num_forwards"] == 1 + 12


# Dream's trajectories and counts are LLaDA's here: with P mod B != 0 the first block has no head
# step, and the second block's head step (B = 4) takes the place of its first sequential step.
@pytest.mark.parametrize("arch", ["llada", "dream"])
@pytest.mark.parametrize("B, prompt_len, trajectory, num_forwards", [
    (4, 2, [1, 2, 3, 4, 5, 6], 2 + 4),  # pure diffusion: the block's 2 masks, then a block of 4
    (1024, 2, [1] * 6, 4),              # pure diffusion: the block's 1022 masks, 256 a step
    (1024, 1026, [1] * 6, 1 + 4),       # a prefill forward, then the tail's block as above
])
def test_prefill_forward_only_when_the_prompt_holds_a_block(tiny_models, arch, B, prompt_len,
                                                            trajectory, num_forwards):
    prompt = [3 + i % 100 for i in range(prompt_len)]
    out = decode(tiny_models[arch], prompt=prompt, max_model_len=4096, max_tokens=6,
                 remasking_strategy="sequential", block_length=B, denoising_steps=4)
    assert out["trajectory"] == trajectory
    assert out["num_forwards"] == num_forwards  # the prefill, if any, and the denoise steps
    assert out["token_ids"][:prompt_len] == prompt and len(out["completion_ids"]) == 6


@pytest.mark.parametrize("arch", SHIFTED_ARCHS)
@pytest.mark.parametrize("prompt_len, B, max_tokens, trajectory, num_forwards", [
    # P = 5: the first block starts with the prompt's tail (no head step; its masks read rows
    # inside the block), the second with a head step (4), then anti_sequential's 11, 10, 9.
    (5, 4, 7, [3, 2, 1, 4, 7, 6, 5], 1 + 7),
    # P = 8: the prefill covers [0, 4); the first block's head step writes [4, 8) and samples 8.
    (8, 4, 8, [1, 4, 3, 2, 5, 8, 7, 6], 1 + 8),
    # P = 4 = B: the prefill would be empty, so there is no prefill forward at all.
    (4, 4, 8, [1, 4, 3, 2, 5, 8, 7, 6], 0 + 8),
    # B = 1: every block is its head step alone; P = 5 prefills [0, 4), P = 1 nothing.
    (5, 1, 6, [1, 2, 3, 4, 5, 6], 1 + 6),
    (1, 1, 6, [1, 2, 3, 4, 5, 6], 0 + 6),
])
def test_head_step_commits_the_first_position_whatever_the_strategy(tiny_models, arch, prompt_len,
                                                                    B, max_tokens, trajectory,
                                                                    num_forwards):
    prompt = [3 + i for i in range(prompt_len)]
    out = decode(tiny_models[arch], prompt=prompt, max_tokens=max_tokens, block_length=B,
                 denoising_steps=B, remasking_strategy="anti_sequential")
    assert out["trajectory"] == trajectory
    assert out["num_forwards"] == num_forwards
    seq = generate_np._Sequence(prompt, B, shifted_logits=True)
    assert seq.first_block_start == prompt_len // B * B
    assert seq.num_prefill == seq.first_block_start - (B if prompt_len % B == 0 else 0)
    assert seq.committed == prompt[:seq.first_block_start]


def test_unshifted_families_keep_their_prefill_and_have_no_head_step(tiny_models):
    out = decode(tiny_models["sdar"], prompt=EIGHT_TOKEN_PROMPT, max_tokens=8,
                 remasking_strategy="anti_sequential")
    assert out["trajectory"] == [4, 3, 2, 1, 8, 7, 6, 5] and out["num_forwards"] == 1 + 8
    assert generate_np._Sequence(EIGHT_TOKEN_PROMPT, 4).num_prefill == 8


def _replay_sequential(model, prompt, B, max_tokens, **sampling):
    """Teacher-forced replay of a shifted family's decode with S = B and sequential remasking
    (one position per step, lowest first), from the forward's rows alone: the head step samples
    q0 from the last row of a forward of the committed sequence, a masked p > q0 from row p - 1
    of the block's forward. Returns (completion, forwards)."""
    family, mask, P = model.config.family, model.config.mask_token_id, len(prompt)
    start = P // B * B
    num_prefill = start - B if P % B == 0 else start
    committed, completion, step = prompt[:start], [], 0
    block = prompt[start:] + [mask] * (B - P + start)
    masked = [j >= P - start for j in range(B)]
    forwards = int(num_prefill > 0)
    while len(completion) < max_tokens:
        penalised = set(prompt) | set(completion)
        q0 = len(committed)

        def draw(row, j):
            return sampling_np.sample_position(
                row, mask_token_id=mask, penalty_token_ids=penalised, seed=sampling["seed"],
                temperature=sampling["temperature"], top_k=0, top_p=1.0,
                repetition_penalty=sampling["repetition_penalty"], position=q0 + j, step=step).token

        for j in range(B):
            if not masked[j]:
                continue
            if j == 0:  # head step
                segments = segment_ids(family, q0, num_prefill, B)
                row = model.forward(committed, segments)[-1]
            else:
                row = block_logits(model, committed, block, num_prefill, B)[j - 1]
            block[j], masked[j] = draw(row, j), False
            step, forwards = step + 1, forwards + 1
        completion += [t for i, t in enumerate(block) if q0 + i >= P]
        committed, block, masked = committed + block, [mask] * B, [True] * B
    return completion, forwards


@pytest.mark.parametrize("arch", SHIFTED_ARCHS)
@pytest.mark.parametrize("prompt_len, max_tokens", [(5, 11), (8, 8), (13, 7), (2, 6)])
@pytest.mark.parametrize("sampling", [dict(temperature=0.0, repetition_penalty=1.0, seed=0),
                                      dict(temperature=1.0, repetition_penalty=2.0, seed=11)])
def test_shifted_decode_samples_each_position_from_the_row_before_it(tiny_models, arch, prompt_len,
                                                                     max_tokens, sampling):
    model = tiny_models[arch]
    prompt = [3 + 5 * i % 97 for i in range(prompt_len)]
    out = decode(model, prompt=prompt, max_tokens=max_tokens, remasking_strategy="sequential",
                 **sampling)
    completion, forwards = _replay_sequential(model, prompt, 4, max_tokens, **sampling)
    assert out["completion_ids"] == completion
    assert out["num_forwards"] == forwards
    assert out["trajectory"] == list(range(1, max_tokens + 1))


def test_shifted_rows_differ_from_unshifted_ones(tiny_models):
    """The shift must matter on these models, or the replay above proves nothing: decoding the
    Fast-dLLM v2 model with unshifted rows (as SDAR would) gives another completion."""
    model = tiny_models["fast_dllm_v2"]
    committed, block = EIGHT_TOKEN_PROMPT, [40, 41, 42, 43]
    shifted = shifted_block_logits(model, committed, block, 4, 4)
    np.testing.assert_allclose(shifted[0], head_logits(model, committed, 4, 4),
                               rtol=1e-12, atol=1e-12)
    assert [int(np.argmax(r)) for r in shifted] != \
        [int(np.argmax(r)) for r in block_logits(model, committed, block, 4, 4)]


@pytest.mark.parametrize("max_tokens", [1, 3, 5, 8, 10])
def test_max_tokens_is_exact_and_a_prefix_of_a_longer_run(tiny_models, max_tokens):
    longer = decode(tiny_models["sdar"], max_tokens=16)
    out = decode(tiny_models["sdar"], max_tokens=max_tokens)
    assert len(out["completion_ids"]) == max_tokens
    assert out["finish_reason"] == "length"
    for key in ("completion_ids", "trajectory", "logprobs", "entropies"):
        assert out[key] == longer[key][:max_tokens]


def _stop_candidate(completion):
    """A token whose first occurrence is not at the start, so a cut is visible."""
    for index, token in enumerate(completion):
        if index > 0 and token not in completion[:index]:
            return token, index
    pytest.fail("the tiny model repeats one token; no stop candidate")


@pytest.mark.parametrize("arch", ["sdar", "llada", "fast_dllm_v2", "dream", "llada2_moe"])
def test_stop_token_cuts_right_after_its_first_occurrence(tiny_models, arch):
    full = decode(tiny_models[arch], max_tokens=24, temperature=1.0, seed=3)
    token, index = _stop_candidate(full["completion_ids"])
    out = decode(tiny_models[arch], max_tokens=24, temperature=1.0, seed=3, stop_token_ids=[token])
    assert out["completion_ids"] == full["completion_ids"][:index + 1]
    assert out["trajectory"] == full["trajectory"][:index + 1]
    assert out["finish_reason"] == "stop"
    # Cut before the stop token by max_tokens: the finish reason is "length".
    cut = decode(tiny_models[arch], max_tokens=index, temperature=1.0, seed=3,
                 stop_token_ids=[token])
    assert cut["completion_ids"] == full["completion_ids"][:index]
    assert cut["finish_reason"] == "length"
    # Exactly max_tokens with the stop token last: it survives, "stop".
    exact = decode(tiny_models[arch], max_tokens=index + 1, temperature=1.0, seed=3,
                   stop_token_ids=[token])
    assert exact["finish_reason"] == "stop"


def test_eos_from_generation_config_stops_unless_ignored(tiny_model_dirs, tmp_path):
    model_dir = tmp_path / "eos"
    shutil.copytree(tiny_model_dirs["sdar"], model_dir)
    params = dict(GREEDY, max_tokens=24, temperature=1.0, seed=5)
    full = generate_np.generate(str(model_dir), [PROMPT], params, 256)[0]
    token, index = _stop_candidate(full["completion_ids"])
    (model_dir / "generation_config.json").write_text(json.dumps({"eos_token_id": [token]}))
    stopped = generate_np.generate(str(model_dir), [PROMPT], {**params, "ignore_eos": False},
                                   256)[0]
    assert stopped["completion_ids"] == full["completion_ids"][:index + 1]
    assert stopped["finish_reason"] == "stop"
    ignored = generate_np.generate(str(model_dir), [PROMPT], params, 256)[0]
    assert ignored == full


def test_max_model_len_ends_when_no_further_block_fits(tiny_models):
    out = decode(tiny_models["sdar"], prompt=[3, 8, 13], max_tokens=100, max_model_len=14)
    # Blocks [0, 4), [4, 8), [8, 12) fit; a fourth would end at 16 > 14.
    assert len(out["token_ids"]) == 12 and len(out["completion_ids"]) == 9
    assert out["finish_reason"] == "length"
    with pytest.raises(ValueError, match="max_model_len 7"):
        decode(tiny_models["sdar"], prompt=[3, 8, 13, 21, 34], max_model_len=7)


@pytest.mark.parametrize("arch", ["sdar_moe", "llada2_moe"])
@pytest.mark.parametrize("penalty", [1.0, 3.0])
def test_greedy_sequential_tokens_are_the_argmax_of_the_block_logits(tiny_models, penalty, arch):
    """Teacher-forced replay of the first two blocks, one position per step, left to right;
    the penalty set is the prompt plus earlier blocks' completion, not the current block."""
    model = tiny_models[arch]
    out = decode(model, max_tokens=7, remasking_strategy="sequential", repetition_penalty=penalty)
    mask = model.config.mask_token_id
    committed, block, replayed = PROMPT[:4], [PROMPT[4], mask, mask, mask], []
    for first_masked in (1, 0):
        penalised = set(PROMPT) | set(replayed)
        for j in range(first_masked, 4):
            row = block_logits(model, committed, block, 4, 4)[j]
            block[j] = sampling_np.greedy_token(
                sampling_np.penalised_logits(row, mask, penalised, penalty))
        replayed += block[first_masked:]
        committed, block = committed + block, [mask] * 4
    assert out["completion_ids"] == replayed
    if penalty != 1.0:  # the penalty must matter here, or this case proves nothing
        assert decode(model, max_tokens=7, remasking_strategy="sequential")["completion_ids"] \
            != replayed


def test_seeded_sampling_is_reproducible_and_seed_dependent(tiny_models):
    params = dict(max_tokens=12, temperature=1.5, top_k=8, top_p=0.9,
                  remasking_strategy="random")
    first = decode(tiny_models["llada"], seed=1, **params)
    assert decode(tiny_models["llada"], seed=1, **params) == first
    others = [decode(tiny_models["llada"], seed=s, **params)["completion_ids"] for s in (2, 3, 4)]
    assert any(other != first["completion_ids"] for other in others)


def test_invalid_parameters_are_rejected(tiny_models):
    model = tiny_models["sdar"]
    for bad, message in ((dict(denoising_steps=5), "denoising_steps"),
                         (dict(top_p=0.0), "top_p"), (dict(max_tokens=0), "max_tokens"),
                         (dict(remasking_strategy="best"), "remasking_strategy"),
                         (dict(temprature=1.0), "unknown sampling parameters: temprature")):
        with pytest.raises(ValueError, match=message):
            decode(model, **bad)
    with pytest.raises(ValueError, match=f"mask_token_id {model.vocab_rows} is outside"):
        generate_np.decode_one(model, PROMPT, GREEDY, 64, mask_token_id=model.vocab_rows)


def test_cli_prints_one_json_object_per_prompt(tiny_model_dirs, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps(PROMPT) + "\n" + json.dumps({"token_ids": [9, 10]}) + "\n")
    params = [dict(GREEDY, max_tokens=6), dict(GREEDY, max_tokens=3, seed=2, temperature=1.0)]
    script = Path(generate_np.__file__)
    result = subprocess.run(
        [sys.executable, str(script), "--model", tiny_model_dirs["llada"], "--prompts",
         str(prompts), "--params", json.dumps(params), "--max-model-len", "64"],
        capture_output=True, text=True, check=True)
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    expected = generate_np.generate(tiny_model_dirs["llada"], [PROMPT, [9, 10]], params, 64)
    assert lines == json.loads(json.dumps(expected))
    failed = subprocess.run([sys.executable, str(script), "--model", str(tmp_path), "--prompts",
                             str(prompts)], capture_output=True, text=True)
    assert failed.returncode == 1 and "config.json" in failed.stderr


@pytest.mark.parametrize("arch", ["sdar", "llada", "fast_dllm_v2", "dream", "llada2_moe"])
def test_sub_blocks_commit_left_to_right_with_their_own_steps(tiny_models, arch):
    # B = 8 in sub-blocks of 2 (docs/decoding.md §2): every position of a sub-block is committed
    # before any of the next one, each sub-block within its own S = 2 steps; without sub-blocks
    # the same decode orders positions by confidence across the whole block.
    model = tiny_models[arch]
    params = dict(temperature=1.0, seed=3, block_length=8, denoising_steps=2, max_tokens=16)
    prompt = list(range(3, 11))  # P = 8: both blocks are completion only
    out = decode(model, prompt=prompt, sub_block_length=2, **params)
    head = 1 if model.config.shifted_logits else 0
    for block in range(2):
        trajectory = out["trajectory"][8 * block:8 * block + 8]
        windows = [trajectory[i:i + 2] for i in range(0, 8, 2)]
        if head:  # the head step commits position 0 alone, before its sub-block's steps
            assert trajectory[0] < min(trajectory[1:])
            windows[0] = windows[0][1:]
        for earlier, later in zip(windows, windows[1:]):
            assert max(earlier) < min(later)
        for window in windows:
            assert max(window) - min(window) < 2
    whole = decode(model, prompt=prompt, **params)
    assert whole["num_forwards"] < out["num_forwards"]  # S steps per block, not per sub-block
    with pytest.raises(ValueError, match="sub_block_length"):
        decode(model, prompt=prompt, sub_block_length=3, **params)
    with pytest.raises(ValueError):
        decode(model, prompt=prompt, sub_block_length=2, **dict(params, denoising_steps=4))


@pytest.mark.parametrize("arch", ["sdar", "llada", "llada2_moe"])
def test_token_editing_rules(tiny_models, arch):
    # docs/decoding.md §4, token editing. At threshold 1 nothing is ever edited (c > 1 is
    # impossible): the tokens are those of the plain decode, and each block takes exactly one post
    # step more, the one that finds nothing to change. At threshold 0 an edit happens wherever the
    # argmax moves: the tokens differ, and no block takes more than max_post_steps post steps.
    model = tiny_models[arch]
    params = dict(block_length=4, denoising_steps=4, max_tokens=12)
    plain = decode(model, **params)
    num_blocks = 4  # P = 5 leaves 3 completion positions in the first block: 12 tokens end in the 4th
    never = decode(model, editing_threshold=1.0, **params)
    assert never["completion_ids"] == plain["completion_ids"]
    assert never["num_forwards"] == plain["num_forwards"] + num_blocks
    assert decode(model, editing_threshold=1.0, max_post_steps=0, **params) == plain
    eager = decode(model, editing_threshold=0.0, max_post_steps=3, **params)
    assert eager["completion_ids"] != plain["completion_ids"]
    assert plain["num_forwards"] < eager["num_forwards"] <= plain["num_forwards"] + 3 * num_blocks
    # An edited position's trajectory is the step of its last edit: later than any commit of the
    # plain decode's block, and post steps carry the global step on.
    assert max(eager["trajectory"]) > max(plain["trajectory"])
    # The prompt tail in the first block is never edited.
    assert eager["token_ids"][:len(PROMPT)] == PROMPT


def test_token_editing_is_refused_where_it_has_no_meaning(tiny_models):
    for arch, bad, message in (("fast_dllm_v2", {}, "editing_threshold"),
                               ("sdar", dict(sub_block_length=2), "editing_threshold"),
                               ("sdar", dict(editing_threshold=1.5), "editing_threshold"),
                               ("sdar", dict(max_post_steps=-1), "max_post_steps")):
        with pytest.raises(ValueError, match=message):
            decode(tiny_models[arch], **dict(dict(editing_threshold=0.5), **bad))
