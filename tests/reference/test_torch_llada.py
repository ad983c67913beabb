#!/usr/bin/python3
"""Checks tests/reference/torch_llada.py against the float64 NumPy reference on tiny random LLaDA
models from tools/make_tiny_model.py (read with safetensors_np: no safetensors package needed).

    python3 -m pytest tests/reference/test_torch_llada.py      (skipped where torch is missing)

Covers: logits of a bidirectional forward (model_np with one segment), and generate against a
NumPy twin of LLaDA's generate written here from reference/models.md §2.3 (semi-AR blocks,
pure diffusion, uneven schedules, max_forwards). Runs on CUDA when available, else CPU, in float32.
"""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
torch = pytest.importorskip("torch")
import safetensors_np  # noqa: E402
import torch_llada  # noqa: E402
from model_np import ReferenceModel  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def tiny(make_model):
    """(torch model, ReferenceModel, mask id) of one tiny float32 LLaDA with GQA 2."""
    folder = make_model("llada", "--dtype", "f32", "--layers", "3", "--heads", "4", "--kv-heads", "2", seed=5)
    config = json.loads((Path(folder) / "config.json").read_text())
    model = torch_llada.LladaModel(config)
    state = {name: torch.from_numpy(array) for name, array in safetensors_np.load_checkpoint(folder).items()}
    model.load_state_dict(state, strict=True)
    return model.to(DEVICE).eval().requires_grad_(False), ReferenceModel.from_dir(folder), config["mask_token_id"]


def random_prompts(count, length, mask_id, seed):
    return np.random.default_rng(seed).integers(3, mask_id, size=(count, length))


def numpy_generate(reference, prompt, steps, gen_length, block_length, mask_id):
    """One row of LLaDA's generate, greedy, low-confidence, on the float64 forward."""
    x = np.concatenate([prompt, np.full(gen_length, mask_id)])
    per_block = steps // (gen_length // block_length)
    for end in range(len(prompt) + block_length, len(x) + 1, block_length):
        masks = int(np.sum(x[end - block_length:end] == mask_id))
        for s in range(per_block):
            logits = reference.forward(x, np.zeros(len(x), dtype=np.int64))
            candidate = logits.argmax(axis=-1)
            probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
            confidence = probs[np.arange(len(x)), candidate] / probs.sum(axis=-1)
            open_positions = [i for i in range(end) if x[i] == mask_id]
            count = masks // per_block + (s < masks % per_block)
            for i in sorted(open_positions, key=lambda i: -confidence[i])[:count]:
                x[i] = candidate[i]
    return x


def test_logits_match_numpy(tiny):
    model, reference, mask_id = tiny
    tokens = random_prompts(1, 13, mask_id, seed=1)[0]
    got = model(torch.tensor(tokens[None], device=DEVICE))[0].cpu().numpy()
    want = reference.forward(tokens, np.zeros(13, dtype=np.int64))
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-4


@pytest.mark.parametrize("steps, gen_length, block_length", [(8, 8, 4), (4, 8, 4), (3, 7, 7), (6, 12, 4)])
def test_generate_matches_numpy(tiny, steps, gen_length, block_length):
    model, reference, mask_id = tiny
    prompts = random_prompts(2, 5, mask_id, seed=steps + gen_length)
    got, forwards = torch_llada.generate(model, torch.tensor(prompts, device=DEVICE), steps, gen_length, block_length,
                                         mask_id)
    assert forwards == steps
    for row, prompt in enumerate(prompts):
        want = numpy_generate(reference, prompt, steps, gen_length, block_length, mask_id)
        assert got[row].tolist() == want.tolist()


def test_generate_stops_after_max_forwards(tiny):
    model, _, mask_id = tiny
    prompts = torch.tensor(random_prompts(2, 4, mask_id, seed=3), device=DEVICE)
    x, forwards = torch_llada.generate(model, prompts, 8, 8, 8, mask_id, max_forwards=3)
    assert forwards == 3
    assert (x[:, 4:] != mask_id).sum(dim=1).tolist() == [3, 3]  # one commit per step
    assert (x[:, :4] == prompts).all()


def test_generate_rejects_uneven_blocks(tiny):
    model, _, mask_id = tiny
    prompts = torch.tensor(random_prompts(1, 4, mask_id, seed=4), device=DEVICE)
    with pytest.raises(ValueError, match="block_length"):
        torch_llada.generate(model, prompts, 8, 8, 3, mask_id)
    with pytest.raises(ValueError, match="steps 3"):
        torch_llada.generate(model, prompts, 3, 8, 4, mask_id)
