#!/usr/bin/python3
"""Decoding quality of a model trained on tools/arith_tasks.py (by default the shipped demo model
models/sdar-tiny-arith; models/llada-tiny-arith is the LLaDA one): accuracy, per task and overall,
of every remasking strategy at its default parameter, then a sweep of the dynamic strategies'
thresholds; with the parallelism each row buys (completion tokens per forward) and its wall time.

    bench/quality.py [--model DIR] [--n 1000] [--seed 0] [--device cpu|cuda|auto]
                     [--block-length B [--steps S]] [--no-sweep] [--strategies A,B] [--json OUT] [--markdown]

Every row decodes the same freshly generated problems (seeded), greedily (temperature 0), posed
through the model's chat template, at each of the model family's decode settings (DECODES), or at
the one --block-length (and --steps, default B) asks for. Needs the jetengine package on PYTHONPATH
(build/python). tests/python/test_trained_model.py scores the models with the functions of this file.
"""
import argparse
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import arith_tasks  # noqa: E402

STRATEGIES = ("sequential", "anti_sequential", "random", "dilated", "low_confidence_static", "margin_static",
              "entropy_static", "low_confidence_dynamic", "dynamic_factor", "dynamic_pmax", "entropy_bounded")
# The parameter each dynamic strategy reads (a SamplingParams field) and the sweep of it.
SWEEPS = {
    "low_confidence_dynamic": ("dynamic_threshold", (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)),
    "dynamic_pmax": ("dynamic_threshold", (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)),
    "dynamic_factor": ("dynamic_factor", (0.25, 0.5, 1.0, 2.0, 4.0)),
    "entropy_bounded": ("eb_threshold", (0.05, 0.1, 0.2, 0.35, 0.5, 1.0, 2.0)),
}
# The longest answer is a sorted list of six 2-digit numbers: 12 digits, 5 commas, 5 spaces, then
# the end-of-turn token: 23 tokens. 32 leaves room for a model that rambles before stopping.
MAX_TOKENS = 32
SEED = 0  # of the `random` strategy's draws, so that its rows are reproducible
# The (block_length, denoising_steps) each family's demo model is scored at: SDAR at the block size
# it was trained with; LLaDA in pure diffusion (B = 64 > P: the prompt and the whole answer, at
# most 56 tokens, in one block) and semi-autoregressively (B = 8), with S = B as LLaDA's own
# generate runs (one token per step for the static strategies).
DECODES = {"sdar": ((4, 4),), "llada": ((64, 64), (8, 8))}


def model_family(model_dir):
    """config.json's model_type of a model folder."""
    return json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8")).get("model_type")


def decodes_of(model_dir):
    """DECODES of the folder's family (SDAR's for a family without an entry)."""
    return DECODES.get(model_family(model_dir), DECODES["sdar"])


def labeled_problems(n, seed):
    """n (task, question, answer) triples of the arith_tasks mix."""
    rng = random.Random(seed)
    return [arith_tasks.make_labeled_problem(rng) for _ in range(n)]


def chat_prompts(llm, problems):
    return [llm.tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True) for _, q, _ in problems]


def default_of(parameter):
    from jetengine import SamplingParams
    return getattr(SamplingParams(), parameter)


def runs(sweep=True, strategies=STRATEGIES):
    """(strategy, parameter, value) of every row: each of the strategies at its default, then their
    sweeps. parameter and value are None for strategies without one."""
    rows = [(s, SWEEPS[s][0], default_of(SWEEPS[s][0])) if s in SWEEPS else (s, None, None) for s in strategies]
    if sweep:
        rows += [(s, parameter, v) for s, (parameter, values) in SWEEPS.items() if s in strategies for v in values
                 if v != default_of(parameter)]
    return rows


def measure(llm, prompts, problems, strategy, parameter=None, value=None, steps=4, max_tokens=MAX_TOKENS,
            progress=False):
    """One row: decodes every prompt with the strategy, scores the completions against the answers."""
    from jetengine import SamplingParams
    settings = {parameter: value} if parameter else {}
    params = SamplingParams(temperature=0, max_tokens=max_tokens, denoising_steps=steps, remasking_strategy=strategy,
                            seed=SEED, **settings)
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=progress)
    wall = time.perf_counter() - start
    per_task = {task: [0, 0] for task in arith_tasks.TASKS}  # [right, total]
    for (task, _, answer), out in zip(problems, outputs):
        per_task[task][0] += arith_tasks.check(out["completion_text"], answer)
        per_task[task][1] += 1
    tokens = sum(len(out["completion_ids"]) for out in outputs)
    forwards = sum(out["num_forwards"] for out in outputs)  # prefill, denoise and save forwards
    return {
        "strategy": strategy,
        "parameter": parameter,
        "value": value,
        "accuracy": sum(r for r, _ in per_task.values()) / len(outputs),
        "per_task": {task: r / t if t else None for task, (r, t) in per_task.items()},
        "completion_tokens": tokens,
        "forwards": forwards,
        "tokens_per_forward": tokens / forwards,
        "wall_s": wall,
    }


def markdown(result):
    """README-ready tables of the rows (defaults first, then the sweep), one per decode setting,
    each under a "B = .., S = .." line when there are several."""
    tables = []
    for decode in result["decodes"]:
        table = markdown_table(decode["rows"])
        if len(result["decodes"]) > 1:
            table = f"B = {decode['block_length']}, S = {decode['denoising_steps']}:\n\n{table}"
        tables.append(table)
    return "\n\n".join(tables)


def markdown_table(rows):
    head = "| strategy | parameter | accuracy | " + " | ".join(arith_tasks.TASKS) + " | tokens/forward | s |"
    lines = [head, "|" + "---|" * (len(arith_tasks.TASKS) + 5)]
    for row in rows:
        setting = f"{row['parameter']} = {row['value']:g}" if row["parameter"] else ""
        tasks = " | ".join("" if row["per_task"][t] is None else f"{row['per_task'][t]:.1%}" for t in arith_tasks.TASKS)
        lines.append(f"| `{row['strategy']}` | {setting} | {row['accuracy']:.1%} | {tasks} | "
                     f"{row['tokens_per_forward']:.2f} | {row['wall_s']:.1f} |")
    return "\n".join(lines)


def add_decode_arguments(p, seed):
    """The arguments of the decoding benchmarks (this one and fp8_quality.py): the model, the
    problems, the device, one decode setting, the strategies, the JSON output."""
    p.add_argument("--model", default=str(REPO / "models" / "sdar-tiny-arith"))
    p.add_argument("--n", type=int, default=1000, help="problems per row")
    p.add_argument("--seed", type=int, default=seed, help="seed of the problems")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0 = all cores)")
    p.add_argument("--block-length", type=int, help="one decode setting instead of the family's DECODES")
    p.add_argument("--steps", type=int, help="denoising steps per block (default: the block length)")
    p.add_argument("--strategies", help="comma-separated strategies to score (default: the benchmark's own)")
    p.add_argument("--json", type=Path, help="write the raw numbers here")


def check_decode_arguments(p, args, default_strategies):
    """Checks add_decode_arguments' values (p.error on a bad one); fills in --steps and turns
    --strategies into a tuple (default_strategies when not given)."""
    if args.n <= 0:
        p.error("--n must be positive")
    if args.block_length is None:
        if args.steps is not None:
            p.error("--steps needs --block-length")
    else:
        if args.steps is None:
            args.steps = args.block_length
        if not 1 <= args.steps <= args.block_length:
            p.error("--block-length must be positive and --steps in 1..--block-length")
    args.strategies = default_strategies if args.strategies is None else tuple(args.strategies.split(","))
    unknown = [s for s in args.strategies if s not in STRATEGIES]
    if unknown or not args.strategies:
        p.error(f"--strategies: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(STRATEGIES)}")
    if not any(Path(args.model).glob("*.safetensors")):
        p.error(f"{args.model} holds no weights (*.safetensors)")
    return args


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_decode_arguments(p, seed=0)
    p.add_argument("--no-sweep", action="store_true", help="only each strategy at its default")
    p.add_argument("--markdown", action="store_true", help="print README-ready tables")
    return check_decode_arguments(p, p.parse_args(argv), STRATEGIES)


def main(argv=None):
    args = parse_args(argv)
    from jetengine import LLM
    decodes = decodes_of(args.model) if args.block_length is None else ((args.block_length, args.steps),)
    problems = labeled_problems(args.n, args.seed)
    show = sys.stderr.isatty()
    result = {"model": args.model, "n": args.n, "seed": args.seed, "max_tokens": MAX_TOKENS, "temperature": 0,
              "decodes": []}
    for block_length, steps in decodes:
        llm = LLM(args.model, device=args.device, num_threads=args.threads, block_length=block_length)
        result["device"] = llm.summary.device
        prompts = chat_prompts(llm, problems)
        rows = []
        for strategy, parameter, value in runs(sweep=not args.no_sweep, strategies=args.strategies):
            row = measure(llm, prompts, problems, strategy, parameter, value, steps, progress=show)
            rows.append(row)
            setting = f" {parameter}={value:g}" if parameter else ""
            print(f"B={block_length} S={steps} {strategy}{setting}: accuracy {row['accuracy']:.1%}, "
                  f"{row['tokens_per_forward']:.2f} tokens/forward, {row['wall_s']:.1f} s", file=sys.stderr)
        result["decodes"].append({"block_length": block_length, "denoising_steps": steps, "rows": rows})
        del llm  # its KV cache, before the next setting's engine takes one
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.markdown:
        print(markdown(result))


if __name__ == "__main__":
    main()
