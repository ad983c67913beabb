"""Shared fixtures of the reference self-tests: tiny random models in HF layout, written by the
project's generator tools/make_tiny_model.py (real tensor names, small BPE vocabulary)."""

import subprocess
import sys
from pathlib import Path

import pytest

from model_np import ReferenceModel

MAKE_TINY_MODEL = Path(__file__).resolve().parents[2] / "tools" / "make_tiny_model.py"
# head_dim 32 for SDAR makes q_proj 128 wide for a hidden size of 64, like SDAR-4B (models.md).
# Fast-dLLM v2 and Dream keep head_dim = hidden / heads (their configs have no head_dim key) and
# GQA 2; Fast-dLLM v2's bd_size is 4, Dream has no block key (a request's block_length decides).
# LLaDA2-MoE: the generator's defaults (a dense first layer, then 8 experts in 4 groups, 2 kept,
# top-2, one shared expert; head_dim 32 with 16 rotated dims; block_size 4).
FIXTURE_ARGS = {"sdar": ["--head-dim", "32"], "sdar_moe": [], "llada": [], "fast_dllm_v2": [],
                "dream": [], "llada2_moe": []}
# The families whose logits are shifted (docs/decoding.md §1, head steps).
SHIFTED_ARCHS = ("fast_dllm_v2", "dream")


@pytest.fixture(scope="session")
def make_model(tmp_path_factory):
    """make_model(arch, *extra_args, seed=7) -> folder of a fresh tiny model."""
    def make(arch, *extra_args, seed=7):
        out = tmp_path_factory.mktemp(arch)
        subprocess.run([sys.executable, str(MAKE_TINY_MODEL), "--arch", arch, "--out", str(out),
                        "--seed", str(seed), *extra_args], check=True)
        return str(out)
    return make


@pytest.fixture(scope="session")
def tiny_model_dirs(make_model):
    """{arch: folder} of the tiny BF16 models most tests share."""
    return {arch: make_model(arch, *args) for arch, args in FIXTURE_ARGS.items()}


@pytest.fixture(scope="session")
def tiny_models(tiny_model_dirs):
    """{arch: ReferenceModel} loaded from tiny_model_dirs."""
    return {arch: ReferenceModel.from_dir(path) for arch, path in tiny_model_dirs.items()}
