"""Shared fixtures of the reference self-tests: tiny random models written once per session."""

import pytest

import tiny_model_np
from model_np import ReferenceModel

ARCHS = ("sdar", "sdar_moe", "llada")


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory):
    """{arch: folder} of tiny BF16 models with the real tensor names."""
    root = tmp_path_factory.mktemp("tiny_models")
    return {arch: tiny_model_np.write_tiny_model(str(root / arch), arch, seed=7)
            for arch in ARCHS}


@pytest.fixture(scope="session")
def tiny_models(tiny_model_dirs):
    """{arch: ReferenceModel} loaded from tiny_model_dirs."""
    return {arch: ReferenceModel.from_dir(path) for arch, path in tiny_model_dirs.items()}
