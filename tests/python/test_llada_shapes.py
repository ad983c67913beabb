"""bench/llada_shapes.py: its model of the engine's forwards agrees with the forwards `jetengine
bench` counts on a tiny LLaDA (pure diffusion, a prompt tail in the first block, full prompt
blocks, uneven schedules), and its LLaDA generate arguments for the benchmark rows."""
import sys

import pytest
from jet_test_utils import REPO, make_tiny_model, run_cli

sys.path.insert(0, str(REPO / "bench"))
from llada_shapes import ROWS, Row, engine_forwards, llada_generate_args  # noqa: E402


@pytest.fixture(scope="module")
def llada(tmp_path_factory):
    return make_tiny_model("llada", tmp_path_factory.mktemp("llada") / "m", 1)


@pytest.mark.parametrize("row", [Row(16, 16, 2, 4, 12), Row(16, 5, 1, 4, 12), Row(4, 2, 2, 6, 8),
                                 Row(4, 3, 1, 8, 12), Row(8, 8, 3, 8, 16)], ids=lambda r: r.name)
def test_forwards_match_the_engine(llada, row):
    result = run_cli(["bench", "--model", llada, "--device", "cpu", "--kv-cache-mb", "16",
                      "--block-length", row.block, "--denoising-steps", row.steps, "--batches", row.batch,
                      "--prompt-len", row.prompt, "--max-tokens", row.max_tokens])
    assert result.returncode == 0, result.stderr
    fields = result.stdout.splitlines()[-1].split()
    assert (int(fields[0]), int(fields[1])) == (row.batch, row.tokens)
    assert int(fields[4]) == len(engine_forwards(row))


def test_rows_of_the_benchmark():
    assert [len(engine_forwards(r)) for r in ROWS] == [960, 120, 257, 257, 257, 257]
    assert [llada_generate_args(r) for r in ROWS] == [(960, 960, 960), (960, 960, 120), (256, 64, 256),
                                                      (256, 64, 256), (256, 32, 256), (256, 32, 256)]
    # B = 64, batch 64: the prefill, then 4,096 rows a step, 8,192 where a save rides along.
    forwards = engine_forwards(ROWS[3])
    assert forwards[:2] == [(4096, 0), (4096, 4096)] and forwards[65] == (8192, 4096)
    assert sum(rows == 8192 for rows, _ in forwards) == 3
