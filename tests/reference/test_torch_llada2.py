#!/usr/bin/python3
"""Checks model_np's llada2_moe family against tests/reference/torch_llada2.py, an independent torch
forward written in the HF code's terms, on tiny random LLaDA2-MoE models (float32 checkpoints,
float64 forwards): every row of block-causal and bidirectional forwards, model_np's teacher-forced
block logits, and that the pieces model_np might skip (expert bias, shared expert, q/k norms, the
dense first layer) each change the torch logits.

    python3 tests/reference/test_torch_llada2.py      (or pytest; skipped where torch is missing)
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
except ImportError:  # run as a script where pytest is not installed
    import torch
import torch_llada2  # noqa: E402
from model_np import ReferenceModel, block_logits, segment_ids  # noqa: E402

MAKE_TINY_MODEL = Path(__file__).resolve().parents[2] / "tools" / "make_tiny_model.py"
B = 4
# The tiny default (8 experts in 4 groups, 2 kept, top-2, one shared expert, a dense first layer,
# rotary 16 of 32); groups of 3 with one kept, top-3, two shared experts, full RoPE, MHA; one group,
# no shared expert, no dense layer, rotary 8 of 32, top-1 (no normalisation).
SHAPES = {"tiny": [],
          "grouped": ["--layers", "3", "--experts", "6", "--n-group", "2", "--topk-group", "1", "--top-k", "3",
                      "--shared-experts", "2", "--rotary-factor", "1.0", "--kv-heads", "4"],
          "flat": ["--experts", "4", "--n-group", "1", "--topk-group", "1", "--top-k", "1", "--shared-experts",
                   "0", "--first-dense", "0", "--rotary-factor", "0.25", "--kv-heads", "1"]}
_DIRS = {}


def model_dir(shape):
    if shape not in _DIRS:
        out = tempfile.mkdtemp(prefix=f"torch_llada2_{shape}_")
        subprocess.run([sys.executable, str(MAKE_TINY_MODEL), "--arch", "llada2_moe", "--out", out, "--seed", "3",
                        "--dtype", "f32", *SHAPES[shape]], check=True)
        _DIRS[shape] = out
    return _DIRS[shape]


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


def tokens_of(reference, count, seed):
    rng = np.random.default_rng(seed)
    return [int(t) for t in rng.integers(0, reference.config.mask_token_id, size=count)]


def torch_logits(config, weights, tokens, segments):
    segments = torch.as_tensor(np.asarray(segments))
    return torch_llada2.forward(config, weights, tokens, segments[None, :] <= segments[:, None]).numpy()


def test_logits_match_numpy():
    for shape in SHAPES:
        reference = ReferenceModel.from_dir(model_dir(shape))
        config, weights = torch_llada2.load(model_dir(shape))
        tokens = tokens_of(reference, 13, seed=1)
        for segments in (segment_ids("llada2_moe", 13, 12, B), np.zeros(13, dtype=int)):
            got = torch_logits(config, weights, tokens, segments)
            assert rel_err(got, reference.forward(tokens, segments)) < 1e-10, shape


def test_teacher_forced_block_logits_match_numpy():
    for shape in SHAPES:
        reference = ReferenceModel.from_dir(model_dir(shape))
        config, weights = torch_llada2.load(model_dir(shape))
        tokens = tokens_of(reference, 16, seed=6)
        mask = reference.config.mask_token_id
        committed = tokens[:12]
        for block in (tokens[12:], [tokens[12], mask, mask, tokens[15]], [mask] * 4):
            want = block_logits(reference, committed, block, 12, B)
            got = torch_logits(config, weights, committed + block, segment_ids("llada2_moe", 16, 12, B))[12:]
            assert rel_err(got, want) < 1e-10, (shape, block)


def test_each_piece_matters():
    """Zeroing the expert bias, the shared expert or the q/k norm weights' deviation from 1, or
    replacing the dense first layer's MLP, moves the torch logits: the agreement above covers them."""
    reference = ReferenceModel.from_dir(model_dir("tiny"))
    config, weights = torch_llada2.load(model_dir("tiny"))
    tokens = tokens_of(reference, 12, seed=2)
    segments = segment_ids("llada2_moe", 12, 8, B)
    base = torch_logits(config, weights, tokens, segments)
    edits = {"model.layers.1.mlp.gate.expert_bias": torch.zeros_like,
             "model.layers.1.mlp.shared_experts.down_proj.weight": torch.zeros_like,
             "model.layers.0.attention.query_layernorm.weight": torch.ones_like,
             "model.layers.0.mlp.down_proj.weight": torch.zeros_like}
    for name, edit in edits.items():
        changed = dict(weights, **{name: edit(weights[name])})
        assert rel_err(torch_logits(config, changed, tokens, segments), base) > 1e-6, name


if __name__ == "__main__":
    for name, test in list(globals().items()):
        if name.startswith("test_"):
            test()
            print(f"PASS {name}", flush=True)
