#!/usr/bin/python3
"""Checks tests/reference/torch_sdar.py against the float64 NumPy reference (model_np,
generate_np) on tiny random SDAR and LLaDA models from tools/make_tiny_model.py.

    python3 tests/reference/test_torch_sdar.py      (or pytest; skipped where torch is missing)

Covers: logits of a block-causal (SDAR) and a bidirectional (LLaDA) forward, the same for the
Qwen2 families (Fast-dLLM v2 block-causal, Dream bidirectional; q/k/v biases) with their shifted
rows (row p - 1 samples p, head rows included) against model_np's, the KV-cache path,
the SDAR training mask (its clean half is the block-causal forward; its noisy block i is block i
seen after clean blocks < i), save/load round trips (LLaDA's under the OLMo names), and
greedy_block_decode (completions and forward counts, low_confidence_static and _dynamic) against
generate_np on prompts of mixed lengths, for LLaDA also with B > P (pure diffusion). Runs on CUDA
when available, else CPU, in float32.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import pytest
    torch = pytest.importorskip("torch")
except ImportError:  # run as a script where pytest is not installed
    import torch
import generate_np  # noqa: E402
import torch_sdar  # noqa: E402
from model_np import ReferenceModel, head_logits, segment_ids, shifted_block_logits  # noqa: E402

MAKE_TINY_MODEL = Path(__file__).resolve().parents[2] / "tools" / "make_tiny_model.py"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
B = 4
# Shapes: SDAR with q_proj wider than hidden (like SDAR-4B), GQA 2; an odd SDAR with GQA 3; LLaDA
# with plain MHA (as LLaDA-8B) and with GQA 2.
SHAPES = {"wide": ("sdar", ["--head-dim", "32"]),
          "odd": ("sdar", ["--layers", "3", "--hidden", "48", "--heads", "6", "--kv-heads", "2", "--head-dim", "8",
                           "--intermediate", "80"]),
          "llada": ("llada", []),
          "llada_gqa": ("llada", ["--layers", "3", "--hidden", "48", "--heads", "6", "--kv-heads", "3",
                                  "--intermediate", "80"]),
          # Fast-dLLM v2 with a head_dim key wider than hidden / heads; Dream with GQA 3.
          "fast_dllm_v2": ("fast_dllm_v2", ["--head-dim", "24"]),
          "dream": ("dream", ["--layers", "3", "--hidden", "48", "--heads", "6", "--kv-heads", "2",
                              "--intermediate", "80"])}
BIDIRECTIONAL = ("llada", "dream")
_DIRS = {}


def model_dir(shape):
    if shape not in _DIRS:
        arch, args = SHAPES[shape]
        out = tempfile.mkdtemp(prefix=f"torch_sdar_{shape}_")
        subprocess.run([sys.executable, str(MAKE_TINY_MODEL), "--arch", arch, "--out", out, "--seed", "3",
                        "--dtype", "f32", *args], check=True)
        _DIRS[shape] = out
    return _DIRS[shape]


def load(shape):
    # requires_grad off: the checks read results as NumPy arrays, which a tensor needing grad refuses
    return torch_sdar.load_model(model_dir(shape), device=DEVICE, dtype=torch.float32).requires_grad_(False)


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


def random_tokens(model, count, seed):
    rng = np.random.default_rng(seed)
    mask = model.config["mask_token_id"]
    tokens = rng.integers(0, min(model.config["vocab_size"], mask), size=count)
    return [int(t) for t in tokens]


def run(model, tokens, mask, past=None, use_cache=False):
    ids = torch.tensor([tokens], device=DEVICE)
    start = 0 if past is None else past[0][0].shape[2]
    positions = torch.arange(start, start + len(tokens), device=DEVICE)[None]
    return model(ids, positions, mask.to(DEVICE), past_kv=past, use_cache=use_cache)


def test_logits_match_numpy():
    for shape, (arch, _) in SHAPES.items():
        model, reference = load(shape), ReferenceModel.from_dir(model_dir(shape))
        assert isinstance(model, torch_sdar.LladaModel) == (arch == "llada"), shape
        assert isinstance(model, torch_sdar.Qwen2Model) == (arch in ("fast_dllm_v2", "dream")), shape
        tokens = random_tokens(model, 13, seed=1)
        got = run(model, tokens, torch_sdar.block_causal_mask(13, B))[0].cpu().numpy()
        want = reference.forward(tokens, segment_ids("sdar", 13, 12, B))
        assert rel_err(got, want) < 1e-4, shape
        if arch in BIDIRECTIONAL:  # bidirectional: every token sees every other
            got = run(model, tokens, torch.ones(13, 13, dtype=torch.bool))[0].cpu().numpy()
            assert rel_err(got, reference.forward(tokens, np.zeros(13, dtype=int))) < 1e-4, shape


def test_qwen2_shifted_rows_match_numpy():
    """Teacher-forced: the torch forward over committed + block under the family's segments;
    its rows q0 - 1 .. q0 + B - 2 are model_np's shifted block rows (row 0 the head row)."""
    for shape in ("fast_dllm_v2", "dream"):
        model, reference = load(shape), ReferenceModel.from_dir(model_dir(shape))
        assert model.shifted_logits and model.block_causal == (shape == "fast_dllm_v2")
        tokens = random_tokens(model, 16, seed=6)
        committed, block = tokens[:12], tokens[12:]
        for num_prefill in (12, 8, 0):
            seg = torch.tensor(segment_ids(reference.config.family, 16, num_prefill, B))
            got = run(model, tokens, seg[None, :] <= seg[:, None])[0].cpu().numpy()
            want = shifted_block_logits(reference, committed, block, num_prefill, B)
            assert rel_err(got[11:15], want) < 1e-4, (shape, num_prefill)
            head = head_logits(reference, committed, num_prefill, B)
            assert rel_err(got[11], head) < 1e-4, (shape, num_prefill)
        # The biases are in the torch checkpoint and matter.
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.k_proj.bias.zero_()
        unbiased = run(model, tokens, torch_sdar.block_causal_mask(16, B))[0].cpu().numpy()
        assert rel_err(unbiased, reference.forward(tokens, segment_ids("sdar", 16, 12, B))) > 1e-3, shape
        try:
            torch_sdar.greedy_block_decode(model, [tokens[:5]], B, B, 4, model.config["mask_token_id"], [])
        except ValueError as error:
            assert "shifted logits" in str(error)
        else:
            raise AssertionError("greedy_block_decode must refuse a model with shifted logits")


def test_kv_cache_matches_full_forward():
    model = load("wide")
    tokens = random_tokens(model, 12, seed=2)
    full = run(model, tokens, torch_sdar.block_causal_mask(12, B))[0]
    _, past = run(model, tokens[:8], torch_sdar.block_causal_mask(8, B), use_cache=True)
    block = run(model, tokens[8:], torch.ones(4, 12, dtype=torch.bool), past=past)[0]
    assert rel_err(block.cpu().numpy(), full[8:].cpu().numpy()) < 1e-5


def test_training_mask_definition():
    L = 12
    got = torch_sdar.sdar_training_mask(L, B).numpy()
    for q in range(2 * L):
        for k in range(2 * L):
            bq, bk = (q % L) // B, (k % L) // B
            if q < L:
                want = bk == bq if k < L else bk < bq
            else:
                want = k >= L and bk <= bq
            assert got[q, k] == want, (q, k)
    b = np.arange(L) // B
    assert (torch_sdar.block_causal_mask(L, B).numpy() == (b[None, :] <= b[:, None])).all()


def test_training_input_semantics():
    model = load("wide")
    L = 12
    clean = random_tokens(model, L, seed=4)
    noisy = random_tokens(model, L, seed=5)
    ids = torch.tensor([noisy + clean], device=DEVICE)
    positions = torch.arange(L, device=DEVICE).repeat(2)[None]
    both = model(ids, positions, torch_sdar.sdar_training_mask(L, B, DEVICE))[0]
    clean_only = run(model, clean, torch_sdar.block_causal_mask(L, B))[0]
    assert rel_err(both[L:].cpu().numpy(), clean_only.cpu().numpy()) < 1e-5
    for i in range(L // B):
        seen = clean[:i * B] + noisy[i * B:(i + 1) * B]
        alone = run(model, seen, torch_sdar.block_causal_mask(len(seen), B))[0][i * B:]
        assert rel_err(both[i * B:(i + 1) * B].cpu().numpy(), alone.cpu().numpy()) < 1e-5


def test_save_load_round_trip():
    for shape in ("odd", "llada_gqa", "dream"):
        model = load(shape)
        with tempfile.TemporaryDirectory() as out:
            torch_sdar.save_model(model, model.config, out, dtype=torch.float32)
            again = torch_sdar.load_model(out, device=DEVICE, dtype=torch.float32)
            assert torch_sdar.load_config(out)["torch_dtype"] == "float32"
            # The checkpoint's names are those tools/make_tiny_model.py writes (and the engine reads).
            assert set(safetensors_names(out)) == set(safetensors_names(model_dir(shape))), shape
        for (name, a), (other, b) in zip(model.state_dict().items(), again.state_dict().items()):
            assert name == other and torch.equal(a, b), (shape, name)


def safetensors_names(folder):
    with open(Path(folder) / "model.safetensors", "rb") as handle:
        header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
    return [name for name in header if name != "__metadata__"]


def test_greedy_decode_matches_generate_np():
    # LLaDA at B = 16 is pure diffusion for these prompts (B > P: no prefill, the prompt inside
    # the first block); at B = 4 its prefill is bidirectional. The dynamic threshold 0.1 sits
    # among these random models' confidences, so that both of its rules are taken.
    for shape, block, steps_list in (("wide", B, (4, 2)), ("llada", B, (4, 2)), ("llada", 16, (16, 5))):
        model, reference = load(shape), ReferenceModel.from_dir(model_dir(shape))
        stop_ids = list(reference.config.eos_token_ids)
        prompts = [random_tokens(model, n, seed=10 + n) for n in (1, 3, 4, 6, 9, 11)]
        for steps, threshold in ((s, t) for s in steps_list for t in (None, 0.1)):
            got, forwards = torch_sdar.greedy_block_decode(model, prompts, block, steps, 10,
                                                           model.config["mask_token_id"], stop_ids, threshold)
            params = dict(block_length=block, denoising_steps=steps, temperature=0.0, max_tokens=10,
                          remasking_strategy="low_confidence_static")
            if threshold is not None:
                params.update(remasking_strategy="low_confidence_dynamic", dynamic_threshold=threshold)
            for prompt, completion, count in zip(prompts, got, forwards):
                want = generate_np.decode_one(reference, prompt, params, max_model_len=4096)
                where = (shape, block, steps, threshold, prompt)
                assert completion == want["completion_ids"], (*where, completion, want["completion_ids"])
                assert count == want["num_forwards"], (*where, count, want["num_forwards"])


if __name__ == "__main__":
    for name, test in list(globals().items()):
        if name.startswith("test_"):
            test()
            print(f"PASS {name}", flush=True)
