"""Shared fixtures of the reference self-tests: tiny random models in HF layout, written by the
project's generator tools/make_tiny_model.py (real tensor names, small BPE vocabulary)."""

import subprocess
import sys
from pathlib import Path

import pytest

from model_np import ReferenceModel

MAKE_TINY_MODEL = Path(__file__).resolve().parents[2] / "tools" / "make_tiny_model.py"
# head_dim 32 for SDAR makes q_proj 128 wide for a hidden size of 64, like SDAR-4B (models.md).
FIXTURE_ARGS = {"sdar": ["--head-dim", "32"], "sdar_moe": [], "llada": []}


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
