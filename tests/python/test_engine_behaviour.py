"""Engine behaviour through the CLI that needs no reference: KV-cache pressure and preemption,
streaming, batch-independence of seeded sampling, prefix caching, and bad input."""

import json

import numpy as np
import pytest

from jet_test_utils import make_tiny_model, run_cli


@pytest.fixture(scope="module")
def sdar(tmp_path_factory):
    return make_tiny_model("sdar", tmp_path_factory.mktemp("sdar"), seed=3)


def write_prompts(path, prompts):
    path.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    return path


def generate(model_dir, prompts, *flags, stderr=None):
    path = write_prompts(model_dir / "prompts.jsonl", prompts)
    done = run_cli(["generate", "--model", model_dir, "--prompts", path, "--json", *flags])
    assert done.returncode == 0, done.stderr
    if stderr is not None:
        stderr.append(done.stderr)
    return [json.loads(line) for line in done.stdout.splitlines()]


def assert_same_outputs(a, b):
    """Same tokens, steps and finish; probabilities equal up to fp32 noise (BLAS blocking
    depends on the batch shape, so the last bits of a logit may differ between batchings)."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for key in ["token_ids", "completion_ids", "trajectory", "finish_reason", "num_forwards", "text"]:
            assert x[key] == y[key], key
        np.testing.assert_allclose(x["logprobs"], y["logprobs"], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(x["entropies"], y["entropies"], rtol=1e-4, atol=1e-5)


def random_prompts(n, seed=0, low=4, high=14):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, 200, int(rng.integers(low, high))).tolist() for _ in range(n)]


# Blocks inside pages, blocks that start inside a page and end in the next, blocks of several pages.
@pytest.mark.parametrize("block, page", [(4, 8), (8, 6), (16, 4)])
def test_kv_pressure_preempts_without_losing_requests(sdar, block, page):
    prompts = random_prompts(40)
    flags = ["--temperature", "0", "--max-tokens", "16", "--ignore-eos", "--block-length", str(block),
             "--kv-page-size", str(page)]
    roomy = generate(sdar, prompts, *flags)
    # Each sequence needs at most 32 tokens (a prompt of 13 and 16 completion tokens, in whole
    # blocks): 4, 6 or 8 pages. 12 pages hold 3, 2 or 1 sequences at full length, so 40 requests
    # must preempt and requeue.
    log = []
    tight = generate(sdar, prompts, *flags, "--kv-pages", "12", "--no-prefix-caching", stderr=log)
    assert "preemptions" in log[0]  # the small cache really forced restarts
    assert_same_outputs(roomy, tight)


def test_request_larger_than_cache_is_rejected(sdar):
    path = write_prompts(sdar / "big.jsonl", random_prompts(2))
    done = run_cli(["generate", "--model", sdar, "--prompts", path, "--max-tokens", "64", "--kv-page-size", "8",
                    "--kv-pages", "2"])
    assert done.returncode == 1 and "more than the whole KV cache holds" in done.stderr


def test_streaming_equals_batch(sdar):
    prompts = random_prompts(25, seed=1)
    flags = ["--temperature", "0", "--max-tokens", "12", "--ignore-eos"]
    assert_same_outputs(generate(sdar, prompts, *flags), generate(sdar, prompts, *flags, "--max-active", "4"))


def test_seeded_sampling_is_independent_of_the_batch(sdar):
    prompts = random_prompts(9, seed=2)
    flags = ["--temperature", "1.0", "--top-p", "0.95", "--max-tokens", "12", "--seed", "77", "--ignore-eos"]
    alone = generate(sdar, prompts[:1], *flags)[0]
    mixed = generate(sdar, prompts, *flags)[0]
    assert_same_outputs([alone], [mixed])


# Pages that are multiples of the block, pages that end inside blocks (a cached page is reused
# only up to a block boundary: its K/V depends on the rest of its block), pages shorter than a block.
# Four slots: later prompts start after earlier ones have published their prefix pages.
@pytest.mark.parametrize("block, page", [(4, 8), (4, 6), (8, 6), (8, 4)])
def test_prefix_caching_does_not_change_outputs(sdar, block, page):
    rng = np.random.default_rng(4)
    shared = rng.integers(3, 200, 20).tolist()
    prompts = [shared + rng.integers(3, 200, int(n)).tolist() for n in rng.integers(1, 9, 12)]
    flags = ["--temperature", "0", "--max-tokens", "8", "--ignore-eos", "--block-length", str(block),
             "--kv-page-size", str(page), "--max-num-seqs", "4"]
    assert_same_outputs(generate(sdar, prompts, *flags), generate(sdar, prompts, *flags, "--no-prefix-caching"))


@pytest.mark.parametrize("flags, message", [
    (["--temperature", "-1"], "temperature must be in [0, 1e+06]"),
    (["--temperature", "1e39"], "temperature must be in [0, 1e+06]"),
    (["--repetition-penalty", "1e-40"], "repetition_penalty must be in [1e-06, 1e+06]"),
    (["--top-p", "0"], "top_p must be in (0, 1]"),
    (["--top-p", "1.5"], "top_p must be in (0, 1]"),
    (["--denoising-steps", "0"], "denoising_steps must be in [1, block_length"),
    (["--denoising-steps", "5"], "denoising_steps must be in [1, block_length"),
    (["--strategy", "fastest"], "low_confidence_dynamic"),
    (["--kv-page-size", "0"], "kvcache_page_size must be >= 1, got 0"),
    (["--block-length", "100", "--max-model-len", "64"], "block_length 100 exceeds max_model_len 64"),
    (["--mask-token-id", "999999"], "mask_token_id 999999 is outside the vocabulary"),
    (["--max-model-len", "11"], "past max_model_len"),
    (["--max-model-len", "9"], "more than max_model_len 9"),
    (["--max-tokens", "0"], "max_tokens must be >= 1"),
    (["--stop-token-ids", "5x"], "flag --stop-token-ids expects comma-separated integers, got '5x'"),
    (["--max-tokens", "4294967301"], "flag --max-tokens expects an integer in [-2^31, 2^31), got 4294967301"),
    (["--seed", "-3"], "flag --seed expects a non-negative integer, got -3"),
    (["--kv-cache-mb", "-1"], "flag --kv-cache-mb expects a size in MiB, got -1"),
    (["--epsilon-greedy", "2"], "epsilon_greedy must be in [0, 1], got 2"),
    (["--diversity-enforce-barrier", "-5"], "diversity_enforce_barrier must be >= 0 (or -1: off), got -5"),
])
def test_bad_input_is_a_clear_error(sdar, flags, message):
    path = write_prompts(sdar / "one.jsonl", random_prompts(1, low=10, high=11))
    done = run_cli(["generate", "--model", sdar, "--prompts", path, *flags])
    assert done.returncode == 1, done.stdout
    assert message in done.stderr, done.stderr


def test_empty_inputs_are_clear_errors(sdar):
    empty = sdar / "empty.jsonl"
    empty.write_text("")
    done = run_cli(["generate", "--model", sdar, "--prompts", empty])
    assert done.returncode == 1 and "prompt list is empty" in done.stderr
    done = run_cli(["generate", "--model", sdar, "--prompt", ""])
    assert done.returncode == 1 and "prompt 0: the prompt is empty" in done.stderr
    path = write_prompts(sdar / "ids.jsonl", [[1, 2, 10 ** 7]])
    done = run_cli(["generate", "--model", sdar, "--prompts", path])
    assert done.returncode == 1 and "outside the vocabulary" in done.stderr
    path = write_prompts(sdar / "wide.jsonl", [[5, 6], [1, 2 ** 32]])  # no id wraps to a small one
    done = run_cli(["generate", "--model", sdar, "--prompts", path])
    assert done.returncode == 1 and "wide.jsonl:2: element 1 of the id array is 4294967296" in done.stderr


def test_temperatures_too_small_for_fp32_sample_greedily(sdar):
    prompts = random_prompts(3, seed=4)
    greedy = generate(sdar, prompts, "--temperature", "0", "--max-tokens", "8")
    assert generate(sdar, prompts, "--temperature", "1e-40", "--max-tokens", "8") == greedy
    assert all(all(lp <= 0 for lp in out["logprobs"]) for out in greedy)


def test_block_length_different_from_training_warns(sdar):
    path = write_prompts(sdar / "one.jsonl", random_prompts(1))
    done = run_cli(["generate", "--model", sdar, "--prompts", path, "--block-length", "8", "--max-tokens", "4"])
    assert done.returncode == 0 and "differs from the block size the model was trained with" in done.stderr


def test_llada_warns_of_a_block_length_only_where_its_config_states_one(tmp_path):
    """LLaDA trains on whole responses: its configs carry no block size, so no block length is foreign to it."""
    llada = make_tiny_model("llada", tmp_path / "llada", 3)
    path = write_prompts(tmp_path / "one.jsonl", random_prompts(1))
    flags = ["--prompts", path, "--block-length", "64", "--max-tokens", "4"]
    done = run_cli(["generate", "--model", llada, *flags])
    assert done.returncode == 0 and "differs from the block size" not in done.stderr, done.stderr
    config = json.loads((llada / "config.json").read_text())
    (llada / "config.json").write_text(json.dumps(dict(config, block_size=32)))
    done = run_cli(["generate", "--model", llada, *flags])
    assert done.returncode == 0 and "differs from the block size the model was trained with (32)" in done.stderr
