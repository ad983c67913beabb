#!/usr/bin/python3
"""Checks tests/reference/torch_sdar.py against the float64 NumPy reference (model_np,
generate_np) on tiny random SDAR models from tools/make_tiny_model.py.

    python3 tests/reference/test_torch_sdar.py      (or pytest; skipped where torch or safetensors is missing)

Covers: logits of a block-causal forward, the KV-cache path, the SDAR training mask (its clean
half is the block-causal forward; its noisy block i is block i seen after clean blocks < i),
save/load round trip, and greedy_block_decode against generate_np on prompts of mixed lengths.
Runs on CUDA when available, else CPU, in float32.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import pytest
    torch = pytest.importorskip("torch")
    pytest.importorskip("safetensors")  # Debian packages torch but not safetensors
except ImportError:  # run as a script where pytest is not installed
    import torch
import generate_np  # noqa: E402
import torch_sdar  # noqa: E402
from model_np import ReferenceModel, segment_ids  # noqa: E402

MAKE_TINY_MODEL = Path(__file__).resolve().parents[2] / "tools" / "make_tiny_model.py"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
B = 4
# Shapes: q_proj wider than hidden (like SDAR-4B), GQA 2; and an odd one with GQA 3.
SHAPES = {"wide": ["--head-dim", "32"],
          "odd": ["--layers", "3", "--hidden", "48", "--heads", "6", "--kv-heads", "2", "--head-dim", "8",
                  "--intermediate", "80"]}
_DIRS = {}


def model_dir(shape):
    if shape not in _DIRS:
        out = tempfile.mkdtemp(prefix=f"torch_sdar_{shape}_")
        subprocess.run([sys.executable, str(MAKE_TINY_MODEL), "--arch", "sdar", "--out", out, "--seed", "3",
                        "--dtype", "f32", *SHAPES[shape]], check=True)
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
    for shape in SHAPES:
        model, reference = load(shape), ReferenceModel.from_dir(model_dir(shape))
        tokens = random_tokens(model, 13, seed=1)
        got = run(model, tokens, torch_sdar.block_causal_mask(13, B))[0].cpu().numpy()
        want = reference.forward(tokens, segment_ids("sdar", 13, 12, B))
        assert rel_err(got, want) < 1e-4, shape


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
    model = load("odd")
    with tempfile.TemporaryDirectory() as out:
        torch_sdar.save_model(model, model.config, out, dtype=torch.float32)
        again = torch_sdar.load_model(out, device=DEVICE, dtype=torch.float32)
        assert torch_sdar.load_config(out)["torch_dtype"] == "float32"
    for (name, a), (other, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert name == other and torch.equal(a, b), name


def test_greedy_decode_matches_generate_np():
    model, reference = load("wide"), ReferenceModel.from_dir(model_dir("wide"))
    stop_ids = list(reference.config.eos_token_ids)
    prompts = [random_tokens(model, n, seed=10 + n) for n in (1, 3, 4, 6, 9, 11)]
    for steps in (4, 2):
        got = torch_sdar.greedy_block_decode(model, prompts, B, steps, 10, model.config["mask_token_id"],
                                             stop_ids)
        params = dict(block_length=B, denoising_steps=steps, temperature=0.0, max_tokens=10,
                      remasking_strategy="low_confidence_static")
        for prompt, completion in zip(prompts, got):
            want = generate_np.decode_one(reference, prompt, params, max_model_len=4096)["completion_ids"]
            assert completion == want, (steps, prompt, completion, want)


if __name__ == "__main__":
    for name, test in list(globals().items()):
        if name.startswith("test_"):
            test()
            print(f"PASS {name}", flush=True)
