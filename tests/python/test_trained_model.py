"""The shipped demo models solve their tasks: greedy accuracy on fresh tools/arith_tasks.py problems.

models/sdar-tiny-arith (SDAR): at the README's defaults (B = 4, S = 4), a stated minimum accuracy
for every remasking strategy, and far fewer forwards for the dynamic strategies than for the
static one at about the same accuracy. Each strategy decodes the same 200 problems once (cached):
about 10 s on two cores.

models/llada-tiny-arith (LLaDA): at bench/quality.py's DECODES for LLaDA, pure diffusion (B = 64)
and semi-autoregressive (B = 8), S = B, the static default (low_confidence_static) and the
dynamic one (low_confidence_dynamic at 0.9): accuracy, and the forwards the dynamic strategy
saves, each held against what the training's final check measured with the PyTorch decoder at the
same setting (the folder's training_log.json); the failure messages give each row's tokens per
forward. Skipped while the folder has no model.safetensors (tools/train_tiny_llada.py writes one).

CPU backend, temperature 0, scored with bench/quality.py's functions. JET_ARITH_MODEL=DIR and
JET_LLADA_ARITH_MODEL=DIR score other folders (fresh training runs): the SDAR one against the same
thresholds, the LLaDA one against its own training_log.json.
"""
import json
import math
import os
import sys
from pathlib import Path

import pytest

from jet_test_utils import BUILD, REPO

sys.path.insert(0, str(BUILD / "python"))
sys.path.insert(0, str(REPO / "bench"))
import quality  # noqa: E402

MODEL = Path(os.environ.get("JET_ARITH_MODEL", REPO / "models" / "sdar-tiny-arith"))
LLADA_MODEL = Path(os.environ.get("JET_LLADA_ARITH_MODEL", REPO / "models" / "llada-tiny-arith"))


def needs_weights(model, variable):
    return pytest.mark.skipif(not (model / "model.safetensors").is_file(),
                              reason=f"{model}/model.safetensors is missing ({variable} names another folder, or "
                                     "the checkout lacks the demo model's weights)")


needs_sdar = needs_weights(MODEL, "JET_ARITH_MODEL")
needs_llada = needs_weights(LLADA_MODEL, "JET_LLADA_ARITH_MODEL")

N = 200
PROBLEM_SEED = 20240601  # not the training data's seed: these problems are fresh
GREEDY_MIN_ACCURACY = 0.95  # the default strategy (low_confidence_static): the model works
GREEDY_MIN_TASK_ACCURACY = 0.90  # and on each task alone (about 40 problems each but addition's 80)
# What bench/quality.py measured on the shipped weights (CPU, 1,000 problems of seed 0): every
# strategy at its default 99.4-99.9%; on these 200 problems 99.0-100%, with 1 or 2 threads alike.
# The bar sits a few points lower, so that float noise of another CPU cannot flip it, while a
# broken strategy (or a mis-trained model) falls far below it.
MIN_ACCURACY = 0.97
# Measured: the dynamic strategies at their defaults take 0.38x the static one's forwards (the model
# is confident enough to commit most blocks in one step; saves ride in denoise forwards) and lose at
# most 0.5 points of accuracy.
DYNAMIC_MAX_FORWARD_RATIO = 0.5
DYNAMIC_MARGIN = 0.02
STATIC = "low_confidence_static"
DYNAMIC = ("low_confidence_dynamic", "dynamic_factor", "dynamic_pmax", "entropy_bounded")

# LLaDA: fewer problems, as a static decode at B = S = 64 takes about 43 forwards of 64 tokens each.
LLADA_N = 100
LLADA_STRATEGIES = (STATIC, "low_confidence_dynamic")
# Slack of the dynamic strategy's forwards over the static one's, on top of the ratio the final
# check measured: these problems are another and smaller draw (at B = 64 the prompt lengths set the
# static forwards), and confidences near the threshold round differently in bf16 and in fp32.
LLADA_FORWARD_RATIO_SLACK = 1.25


class Rows:
    """strategy -> its quality.measure row at the default parameter, decoded on first use, for
    one model at one (block_length, denoising_steps)."""

    def __init__(self, model, block_length, steps, n):
        from jetengine import LLM
        self.llm = LLM(str(model), device="cpu", block_length=block_length, kvcache_block_size=16,
                       num_kvcache_blocks=2048)
        self.steps = steps
        self.problems = quality.labeled_problems(n, PROBLEM_SEED)
        self.prompts = quality.chat_prompts(self.llm, self.problems)
        self.defaults = {strategy: (parameter, value) for strategy, parameter, value in quality.runs(sweep=False)}
        self.cache = {}

    def __call__(self, strategy):
        if strategy not in self.cache:
            self.cache[strategy] = quality.measure(self.llm, self.prompts, self.problems, strategy,
                                                   *self.defaults[strategy], steps=self.steps)
        return self.cache[strategy]


@pytest.fixture(scope="module")
def rows():
    return Rows(MODEL, 4, 4, N)


@pytest.fixture(scope="module")
def llada_rows():
    """(block_length, denoising_steps) -> Rows of the LLaDA model, made on first use."""
    made = {}

    def get(decode):
        if decode not in made:
            made[decode] = Rows(LLADA_MODEL, *decode, LLADA_N)
        return made[decode]

    return get


def describe(row):
    tasks = ", ".join(f"{t} {a:.1%}" for t, a in row["per_task"].items() if a is not None)
    return f"{row['strategy']}: {row['accuracy']:.1%} ({tasks}), {row['tokens_per_forward']:.2f} tokens/forward"


@needs_sdar
def test_greedy_accuracy(rows):
    row = rows(STATIC)
    assert row["accuracy"] >= GREEDY_MIN_ACCURACY, describe(row)
    assert all(a is not None and a >= GREEDY_MIN_TASK_ACCURACY for a in row["per_task"].values()), describe(row)


@needs_sdar
@pytest.mark.parametrize("strategy", quality.STRATEGIES)
def test_strategy_reaches_its_minimum(rows, strategy):
    row = rows(strategy)
    assert row["accuracy"] >= MIN_ACCURACY, describe(row)


@needs_sdar
@pytest.mark.parametrize("strategy", DYNAMIC)
def test_dynamic_strategy_needs_fewer_forwards_at_about_the_same_accuracy(rows, strategy):
    static, dynamic = rows(STATIC), rows(strategy)
    ratio = dynamic["forwards"] / static["forwards"]
    assert ratio <= DYNAMIC_MAX_FORWARD_RATIO, f"{ratio:.2f}x the forwards; {describe(dynamic)}; {describe(static)}"
    assert dynamic["accuracy"] >= static["accuracy"] - DYNAMIC_MARGIN, f"{describe(dynamic)}; {describe(static)}"


def measured(decode, strategy):
    """The training's final check (tools/tiny_training.py, PyTorch decoder, bf16 checkpoint) at this
    (block_length, denoising_steps) and strategy."""
    log = LLADA_MODEL / "training_log.json"
    for row in json.loads(log.read_text(encoding="utf-8")).get("final", []):
        if (row["block_length"], row["denoising_steps"], row["strategy"]) == (*decode, strategy):
            return row
    raise AssertionError(f"{log} has no final check at B = {decode[0]}, S = {decode[1]}, {strategy}")


def accuracy_bar(rate, n):
    """The least accuracy n fresh problems should show for a decoder right at `rate`: three standard
    deviations of an n-problem sample below it, and two problems fewer for decisions that bf16
    activations (the PyTorch decoder) and fp32 ones (the CPU backend) take differently."""
    return rate - 3 * math.sqrt(rate * (1 - rate) / n) - 2 / n


LLADA_DECODES = pytest.mark.parametrize("decode", quality.DECODES["llada"], ids=lambda d: f"B{d[0]}-S{d[1]}")


@needs_llada
def test_llada_folder_is_a_llada_model():
    assert quality.model_family(LLADA_MODEL) == "llada"


@needs_llada
@LLADA_DECODES
@pytest.mark.parametrize("strategy", LLADA_STRATEGIES)
def test_llada_accuracy_is_the_pytorch_decoders(llada_rows, decode, strategy):
    row, reference = llada_rows(decode)(strategy), measured(decode, strategy)
    bar = accuracy_bar(reference["accuracy"], LLADA_N)
    assert row["accuracy"] >= bar, (f"B = {decode[0]}, S = {decode[1]}: {describe(row)}; bar {bar:.1%} from the "
                                    f"PyTorch decoder's {reference['accuracy']:.1%} on {reference['problems']} problems")


@needs_llada
@LLADA_DECODES
def test_llada_dynamic_strategy_saves_forwards_as_the_pytorch_decoder(llada_rows, decode):
    static, dynamic = llada_rows(decode)(STATIC), llada_rows(decode)("low_confidence_dynamic")
    reference = measured(decode, "low_confidence_dynamic")["forwards"] / measured(decode, STATIC)["forwards"]
    ratio = dynamic["forwards"] / static["forwards"]
    assert ratio <= min(1.0, reference * LLADA_FORWARD_RATIO_SLACK), (
        f"B = {decode[0]}, S = {decode[1]}: {ratio:.2f}x the forwards (PyTorch decoder: {reference:.2f}x); "
        f"{describe(dynamic)}; {describe(static)}")
