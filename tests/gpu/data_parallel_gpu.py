#!/usr/bin/env python3
"""Data parallel on one GPU through the Python package: two ranks under torchrun, each engine with
0.4 of the GPU's memory, decode 64 arithmetic chat prompts of the trained demo model
(models/sdar-tiny-arith) greedily and with seeded sampling, and every rank's outputs must equal
one engine's, in submission order. Bar: >= 99% of completion tokens equal (engine_parity's: a
batch of another size may round a GEMM differently), and every rank returns every prompt.

Usage: python3 tests/gpu/data_parallel_gpu.py BUILD_DIR   (BUILD_DIR built with -DJET_PYTHON=ON;
PASS/FAIL lines, exits non-zero on FAIL). Needs torch with torch.distributed (torchrun).
"""

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "models" / "sdar-tiny-arith"
NUM_PROMPTS = 64
BAR = 0.99
sys.path.insert(0, str(REPO / "tools"))
import arith_tasks  # noqa: E402


def decode(build, memory):
    """[greedy outputs, seeded outputs] of one engine (this process's rank, under torchrun)."""
    sys.path.insert(0, str(Path(build) / "python"))
    from jetengine import LLM, SamplingParams

    llm = LLM(str(MODEL), device="cuda", gpu_memory_utilization=memory, max_num_seqs=32)
    rng = random.Random(0)
    prompts = [llm.tokenizer.apply_chat_template([{"role": "user", "content": arith_tasks.make_problem(rng)[0]}],
                                                 add_generation_prompt=True) for _ in range(NUM_PROMPTS)]
    greedy = SamplingParams(temperature=0, max_tokens=32)
    seeded = [SamplingParams(temperature=0.8, topk=20, seed=7 + i, max_tokens=32) for i in range(NUM_PROMPTS)]
    outputs = [llm.generate(prompts, greedy, use_tqdm=False),
               llm.generate_streaming(prompts, seeded, max_active=16, use_tqdm=False)]
    llm.shutdown()
    return [[o["completion_ids"] for o in call] for call in outputs]


def agreement(a, b):
    equal = total = 0
    for x, y in zip(a, b):
        n = max(len(x), len(y))
        equal += sum(p == q for p, q in zip(x, y))
        total += n
    return equal, max(total, 1)


def main():
    build = sys.argv[1]
    if "RANK" in os.environ:  # one torchrun rank: write its outputs
        out = decode(build, 0.4)
        Path(sys.argv[2]).joinpath(f"rank{os.environ['RANK']}.json").write_text(json.dumps(out))
        return 0
    single = decode(build, 0.8)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        __file__, build, tmp], check=True)
        ranks = [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(2)]
    ok = True
    for r, outputs in enumerate(ranks):
        for label, got, want in zip(("greedy", "seeded"), outputs, single):
            equal, total = agreement(got, want)
            passed = len(got) == len(want) == NUM_PROMPTS and equal / total >= BAR
            ok = ok and passed
            print(f"{'PASS' if passed else 'FAIL'} data_parallel_gpu rank {r} of 2, {label}: {len(got)} outputs, "
                  f"{equal}/{total} completion tokens equal to one engine's ({100 * equal / total:.2f}%, bar "
                  f"{100 * BAR:.0f}%), {sum(g == w for g, w in zip(got, want))}/{NUM_PROMPTS} prompts identical")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
