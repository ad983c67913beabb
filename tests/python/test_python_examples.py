"""examples/ stay runnable: each runs to completion on a tiny model and prints what it promises."""

import os
import subprocess

import pytest

from jet_test_utils import BUILD, REPO, make_tiny_model


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_model("sdar", tmp_path_factory.mktemp("sdar"), seed=6)


def run_example(name, *args):
    env = {**os.environ, "PYTHONPATH": str(BUILD / "python")}
    done = subprocess.run(["/usr/bin/python3", str(REPO / "examples" / name), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_batch_generate(model):
    out = run_example("batch_generate.py", "--model", model, "--device", "cpu", "--max-tokens", "16")
    assert out.count("Q: ") == 3 and out.count("tokens/step") == 3


def test_streaming(model):
    out = run_example("streaming.py", "--model", model, "--device", "cpu", "--copies", "5", "--max-active", "4",
                      "--max-tokens", "16")
    assert out.startswith("20 completions,") and out.count("Q: ") == 4


def test_rl_loop(model):
    out = run_example("rl_loop.py", "--model", model, "--device", "cpu", "--steps", "2")
    assert "step 0:" in out and "step 1:" in out and "after reload_from_hf_model:" in out
