"""Data parallel under a launcher: two ranks (processes with RANK / WORLD_SIZE / MASTER_ADDR /
MASTER_PORT, as torchrun sets them, gloo on the CPU) that pass the same prompts each decode a share
and both return what one engine returns, in submission order; requests that differ between ranks,
a bad prompt or a rank that fails raise on every rank, and the ranks stay usable; without torch, or
without a rendezvous address, the error names the fix. The share itself is checked without torch.
The CLI's `generate --data-parallel N` (N engine processes, here on the CPU) prints what one
engine prints, and a failing rank fails the command naming the rank and the prompt; `bench
--data-parallel N` decodes the same tokens per row as one engine."""

import importlib.util
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from jet_test_utils import BUILD, make_tiny_model, run_cli

sys.path.insert(0, str(BUILD / "python"))
from jetengine import LLM, SamplingParams  # noqa: E402
from jetengine.data_parallel import DataParallel  # noqa: E402
from test_python_generate import CLI_ENGINE, ENGINE, assert_same_tokens, cli_generate, random_prompts  # noqa: E402

WORKER = os.path.join(os.path.dirname(__file__), "data_parallel_worker.py")
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch.distributed")

GREEDY = dict(temperature=0, max_tokens=12)
SEEDED = [dict(temperature=0.9, topk=20, seed=100 + i, max_tokens=8 + i % 5, remasking_strategy="random")
          for i in range(9)]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_model("sdar", tmp_path_factory.mktemp("sdar"), seed=5)


@pytest.fixture(scope="module")
def llm(model):
    return LLM(model, **ENGINE)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(tmp_path, model, calls, world=2, engine=None, env=None, **job):
    """Runs `world` worker ranks to the end; returns each rank's list of call results."""
    spec = dict(package=str(BUILD / "python"), model=str(model), engine=engine or ENGINE, calls=calls, **job)
    (tmp_path / "job.json").write_text(json.dumps(spec))
    port = str(free_port())
    procs = []
    for rank in range(world):
        rank_env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
        rank_env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                        MASTER_PORT=port)
        rank_env.update(env or {})
        procs.append(subprocess.Popen([sys.executable, WORKER, str(tmp_path / "job.json"),
                                       str(tmp_path / f"rank{rank}.json")], env=rank_env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for rank, proc in enumerate(procs):
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"rank {rank}: {stderr}"
        results.append(json.loads((tmp_path / f"rank{rank}.json").read_text()))
    return results


def comparable(outputs):
    """JSON round trip, as the workers' outputs come back."""
    return json.loads(json.dumps(outputs))


@needs_torch
def test_two_ranks_return_one_engines_outputs_in_order_on_every_rank(tmp_path, model, llm):
    prompts = random_prompts(9, seed=21, low=2, high=30)
    calls = [dict(method="generate", prompts=prompts, params=GREEDY),
             dict(method="generate_streaming", prompts=prompts, params=SEEDED, max_active=2)]
    ranks = launch(tmp_path, model, calls)
    single = [llm.generate(prompts, SamplingParams(**GREEDY), use_tqdm=False),
              llm.generate_streaming(prompts, [SamplingParams(**p) for p in SEEDED], max_active=2, use_tqdm=False)]
    for call, expected in enumerate(single):
        shares = [ranks[r][call]["decoded"] for r in range(2)]
        assert sorted(shares) == [4, 5], shares  # every prompt decoded once, split about evenly
        for r in range(2):
            assert "error" not in ranks[r][call], ranks[r][call]
            assert_same_tokens(ranks[r][call]["outputs"], comparable(expected))


@needs_torch
def test_ranks_that_pass_other_prompts_fail_alike_and_stay_usable(tmp_path, model, llm):
    prompts = random_prompts(4, seed=3)
    calls = [dict(method="generate", prompts={"0": prompts, "1": prompts[:3]}, params=GREEDY),
             dict(method="generate", prompts={"0": prompts, "1": [[5, -1]]}, params=GREEDY),
             dict(method="generate", prompts=prompts, params=GREEDY)]
    ranks = launch(tmp_path, model, calls)
    for r in range(2):
        assert "ranks [1] passed other prompts or sampling params than rank 0" in ranks[r][0]["error"]
        assert "data_parallel=False" in ranks[r][0]["error"]
        assert ranks[r][0]["decoded"] == 0
    assert "rank 1 rejected the request" in ranks[0][1]["error"] and "-1" in ranks[0][1]["error"]
    assert "ValueError" in ranks[1][1]["error"] and "-1" in ranks[1][1]["error"]
    expected = comparable(llm.generate(prompts, SamplingParams(**GREEDY), use_tqdm=False))
    for r in range(2):
        assert_same_tokens(ranks[r][2]["outputs"], expected)


@needs_torch
def test_a_rank_that_fails_while_generating_fails_every_rank(tmp_path, model):
    ranks = launch(tmp_path, model, [dict(method="generate", prompts=random_prompts(4, seed=4), params=GREEDY)],
                   fail_rank=1)
    assert "rank 1 broke on purpose" in ranks[1][0]["error"]
    assert "data-parallel rank 1 failed while generating its share" in ranks[0][0]["error"]
    assert "rank 1 broke on purpose" in ranks[0][0]["error"]


@needs_torch
def test_tensor_parallel_ranks_inside_data_parallel_ones_give_one_engines_outputs(tmp_path, model, llm):
    prompts = random_prompts(5, seed=8)
    ranks = launch(tmp_path, model, [dict(method="generate", prompts=prompts, params=GREEDY)],
                   engine=dict(ENGINE, tensor_parallel_size=2))  # TP 2 x DP 2
    expected = comparable(llm.generate(prompts, SamplingParams(**GREEDY), use_tqdm=False))
    for r in range(2):
        assert_same_tokens(ranks[r][0]["outputs"], expected)


@needs_torch
def test_data_parallel_false_leaves_each_rank_its_own_prompts(tmp_path, model, llm):
    prompts = {"0": random_prompts(3, seed=6), "1": random_prompts(2, seed=7)}
    ranks = launch(tmp_path, model, [dict(method="generate", prompts=prompts, params=GREEDY)],
                   engine=dict(ENGINE, data_parallel=False))
    for r in range(2):
        expected = comparable(llm.generate(prompts[str(r)], SamplingParams(**GREEDY), use_tqdm=False))
        assert ranks[r][0]["decoded"] == len(prompts[str(r)])
        assert_same_tokens(ranks[r][0]["outputs"], expected)


def test_without_torch_a_world_size_above_one_names_the_fix(tmp_path, model):
    ranks = launch(tmp_path, model, [], hide_torch=True)
    for r in range(2):
        error = ranks[r][0]["error"]
        assert error.startswith("RuntimeError") and f"rank {r} of 2" in error
        assert "install PyTorch" in error and "data_parallel=False" in error


@needs_torch
def test_without_a_rendezvous_address_the_error_names_the_launchers(tmp_path, model, llm):
    ranks = launch(tmp_path, model, [], world=1, env=dict(WORLD_SIZE="2", MASTER_ADDR=""))
    assert "MASTER_ADDR is not set" in ranks[0][0]["error"] and "torchrun" in ranks[0][0]["error"]
    # data_parallel=False needs no rendezvous: the rank generates alone.
    prompts = random_prompts(2, seed=9)
    ranks = launch(tmp_path, model, [dict(method="generate", prompts=prompts, params=GREEDY)], world=1,
                   engine=dict(ENGINE, data_parallel=False), env=dict(WORLD_SIZE="2", MASTER_ADDR=""))
    assert_same_tokens(ranks[0][0]["outputs"], comparable(llm.generate(prompts, SamplingParams(**GREEDY),
                                                                      use_tqdm=False)))


def test_an_inconsistent_launch_environment_is_named(tmp_path, model):
    ranks = launch(tmp_path, model, [], world=1, env=dict(RANK="3", WORLD_SIZE="2"))
    assert "RANK=3 is not below WORLD_SIZE=2" in ranks[0][0]["error"]
    ranks = launch(tmp_path, model, [], world=1, env=dict(WORLD_SIZE="two"))
    assert "WORLD_SIZE='two' is not an integer" in ranks[0][0]["error"]


@pytest.mark.parametrize("world", [2, 3, 8])
def test_the_shares_cover_every_prompt_once_and_balance_the_tokens(world):
    rng = np.random.default_rng(world)
    costs = rng.integers(1, 4000, 500).tolist()
    shares = [DataParallel(rank, world, None, None).shard(costs) for rank in range(world)]
    assert sorted(i for share in shares for i in share) == list(range(500))
    assert all(share == sorted(share) for share in shares)
    loads = [sum(costs[i] for i in share) for share in shares]
    assert max(loads) - min(loads) <= max(costs)
    assert [DataParallel(0, world, None, None).shard(costs)] == shares[:1]  # the same on every call
    assert DataParallel(1, 4, None, None).shard([7, 7]) == [1]
    assert DataParallel(3, 4, None, None).shard([7, 7]) == []


@pytest.mark.parametrize("flags", [
    ["--temperature", "0", "--max-tokens", "12"],
    ["--temperature", "0.9", "--top-k", "20", "--seed", "5", "--max-tokens", "10", "--max-active", "2"],
], ids=["greedy", "seeded-streaming"])
@pytest.mark.parametrize("world", [2, 3])
def test_cli_data_parallel_prints_what_one_engine_prints(model, flags, world):
    prompts = random_prompts(7, seed=world, low=2, high=30)
    single = cli_generate(model, prompts, *flags)
    assert_same_tokens(cli_generate(model, prompts, "--data-parallel", str(world), *flags), single)
    # More ranks than prompts: the rank with none finishes at once.
    assert_same_tokens(cli_generate(model, prompts[:2], "--data-parallel", str(world), *flags), single[:2])


def test_cli_data_parallel_names_the_failing_rank_and_prompt(model):
    path = model / "dp_bad_prompts.jsonl"
    path.write_text("[5, 6, 7]\n[3, 4000000]\n[8, 9]\n")
    done = run_cli(["generate", "--model", model, "--prompts", path, "--data-parallel", "2", *CLI_ENGINE])
    assert done.returncode == 1 and done.stdout == ""
    assert "error: rank" in done.stderr and "prompt 1: prompt token id 4000000 is outside the vocabulary" in done.stderr


@pytest.mark.parametrize("flags, message", [
    (["--data-parallel", "0"], "--data-parallel expects a count of engine processes >= 1, got 0"),
    (["--data-parallel", "2", "--device", "cuda:1"], "give --device cuda (or auto, or cpu), not cuda:1"),
])
def test_cli_data_parallel_bad_flags_are_named(model, flags, message):
    done = run_cli(["generate", "--model", model, "--prompt", "hi", *flags])
    assert done.returncode != 0 and message in done.stderr, done.stderr


def test_cli_data_parallel_on_gpus_that_are_not_there_fails_per_rank(model):
    done = run_cli(["generate", "--model", model, "--prompt", "hi", "--data-parallel", "2", "--device", "cuda",
                    "--max-tokens", "4"])
    if done.returncode == 0:
        pytest.skip("this machine has the GPUs")
    assert "error: rank" in done.stderr and "cuda:" in done.stderr, done.stderr


def bench_rows(done):
    """(batch, tokens) of each Mode 1 row and the Mode 2 line's tokens."""
    assert done.returncode == 0, done.stderr
    rows = [tuple(map(int, line.split()[:2])) for line in done.stdout.splitlines() if line.split()[0].isdigit()]
    mode2 = [int(line.split(": ")[2].split()[0]) for line in done.stdout.splitlines() if line.startswith("mode 2:")]
    return rows, mode2


def test_cli_bench_data_parallel_decodes_what_one_engine_decodes(model):
    flags = ["bench", "--model", model, "--batches", "1,3,8", "--max-tokens", "12", "--mode2", "5",
             "--max-active", "2", *CLI_ENGINE]
    single = bench_rows(run_cli(flags))
    done = run_cli([*flags, "--data-parallel", "2"])
    assert "data parallel 2 engines" in done.stdout
    assert bench_rows(done) == single and single[0] == [(1, 12), (3, 36), (8, 96)] and single[1][0] > 0
    refused = run_cli([*flags, "--data-parallel", "2", "--profile"])
    assert refused.returncode != 0 and "--profile times one engine's ops: drop --data-parallel" in refused.stderr
