#!/usr/bin/python3
"""FP8 against the float weights on a model trained on tools/arith_tasks.py (by default the demo
models/sdar-tiny-arith): the same fresh problems decoded by two engines, one as stored and one
with --quantization fp8, scored, and compared token by token (docs/fp8.md).

    bench/fp8_quality.py [--model DIR] [--n 1000] [--seed 1] [--device cpu|cuda|auto]
                         [--block-length B [--steps S]] [--strategies A,B] [--json OUT]

Per decode setting and strategy: accuracy of each engine, the share of problems whose completions
are identical, the share of completion positions holding the same token, and tokens per forward
of each (a diffusion decode commits by confidence, so FP8 may change how many tokens a step
commits). Greedy (temperature 0). Needs the jetengine package on PYTHONPATH (build/python).
"""
import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality  # noqa: E402

DEFAULT_STRATEGIES = ("low_confidence_static", "low_confidence_dynamic")


def decode(llm, prompts, strategy, steps):
    from jetengine import SamplingParams
    params = SamplingParams(temperature=0, max_tokens=quality.MAX_TOKENS, denoising_steps=steps,
                            remasking_strategy=strategy, seed=quality.SEED)
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    return outputs, time.perf_counter() - start


def score(problems, outputs):
    return sum(quality.arith_tasks.check(out["completion_text"], answer) for (_, _, answer), out in
               zip(problems, outputs)) / len(outputs)


def agreement(a, b):
    """(share of identical completions, share of positions with the same token, over the longer)."""
    same = sum(x["completion_ids"] == y["completion_ids"] for x, y in zip(a, b)) / len(a)
    positions = matches = 0
    for x, y in zip(a, b):
        ids_x, ids_y = x["completion_ids"], y["completion_ids"]
        positions += max(len(ids_x), len(ids_y))
        matches += sum(p == q for p, q in zip(ids_x, ids_y))
    return same, matches / max(positions, 1)


def tokens_per_forward(outputs):
    return sum(len(o["completion_ids"]) for o in outputs) / sum(o["num_forwards"] for o in outputs)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    quality.add_decode_arguments(p, seed=1)
    return quality.check_decode_arguments(p, p.parse_args(argv), DEFAULT_STRATEGIES)


def main(argv=None):
    args = parse_args(argv)
    from jetengine import LLM
    decodes = (quality.decodes_of(args.model) if args.block_length is None
               else ((args.block_length, args.steps),))
    problems = quality.labeled_problems(args.n, args.seed)
    result = {"model": args.model, "n": args.n, "seed": args.seed, "rows": []}
    for block_length, steps in decodes:
        engines = {q: LLM(args.model, device=args.device, num_threads=args.threads, block_length=block_length,
                          quantization=q) for q in (None, "fp8")}
        result["device"] = engines[None].summary.device
        prompts = quality.chat_prompts(engines[None], problems)
        for strategy in args.strategies:
            (ref, ref_s), (fp8, fp8_s) = (decode(engines[q], prompts, strategy, steps) for q in (None, "fp8"))
            same, positions = agreement(ref, fp8)
            row = {"block_length": block_length, "denoising_steps": steps, "strategy": strategy,
                   "accuracy": score(problems, ref), "accuracy_fp8": score(problems, fp8),
                   "identical_completions": same, "same_tokens": positions,
                   "tokens_per_forward": tokens_per_forward(ref), "tokens_per_forward_fp8": tokens_per_forward(fp8),
                   "wall_s": ref_s, "wall_s_fp8": fp8_s}
            result["rows"].append(row)
            print(f"B={block_length} S={steps} {strategy}: accuracy {row['accuracy']:.1%} -> fp8 "
                  f"{row['accuracy_fp8']:.1%}; identical completions {same:.1%}, same tokens {positions:.1%}; "
                  f"tokens/forward {row['tokens_per_forward']:.2f} -> {row['tokens_per_forward_fp8']:.2f}",
                  file=sys.stderr)
        del engines
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
