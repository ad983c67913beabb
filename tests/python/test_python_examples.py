"""examples/ stay runnable: each runs to completion on a tiny model and prints what it promises."""

import json
import os
import subprocess
import sys

import pytest

from jet_test_utils import BUILD, REPO, make_tiny_model

sys.path.insert(0, str(REPO / "tools"))
import arith_tasks  # noqa: E402


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


def test_rl_loop_scores_samples_and_keeps_their_step_maps(tmp_path):
    """On the demo model: every sample is scored against its answer, advantages are centred per
    problem, each step map has one denoising step per completion token, and the loop (sleep,
    update_weights, wake_up; then sleep(2) and reload_from_hf_model) runs through."""
    path = tmp_path / "rollouts.jsonl"
    out = run_example("rl_loop.py", "--device", "cpu", "--steps", "2", "--problems", "6", "--samples", "3",
                      "--out", path)
    assert "step 0: reward" in out and "step 1: reward" in out and "after reload_from_hf_model: reward" in out
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["step"] for r in records] == [0] * 18 + [1] * 18
    for r in records:
        assert r["reward"] == float(arith_tasks.check(r["completion"], r["answer"]))
        assert len(r["step_map"]) == len(r["completion_ids"]) > 0
        assert min(r["step_map"]) >= 1 and max(r["step_map"]) <= len(r["completion_ids"])
    for start in range(0, len(records), 3):
        assert sum(r["advantage"] for r in records[start:start + 3]) == pytest.approx(0.0, abs=1e-9)
    # The demo model answers most of its own tasks even when sampling: scoring sees right answers.
    assert sum(r["reward"] for r in records[:18]) >= 9
