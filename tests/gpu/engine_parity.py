#!/usr/bin/env python3
"""Free-running greedy decode on the GPU against the CPU backend, through the CLI, token by token.

* The trained demo model models/sdar-tiny-arith, when its model.safetensors is there: 64 arithmetic
  chat prompts (tools/arith_tasks.py, --chat), stopping at EOS, at most 32 tokens. Bar: >= 99% of
  completion tokens equal, counted over the longer of the two completions of each prompt (a
  length difference counts as mismatches). The first 16 of them again on the GPU one at a time
  (--max-num-seqs 1: products of 4 or 8 rows, our few-rows matmul kernel), same bar.
* A tiny random SDAR (head_dim 32, Qwen3-sized q width): 64 random-id prompts, 32 tokens, ignore_eos,
  reported only: its distributions are near-flat (top probability ~0.1), so a bf16-vs-fp32
  near-tie flips an argmax and the rest of that sequence diverges. tests/gpu/torch_parity.py
  checks such forwards step by step instead.
* The same random-model decode on the GPU with CUDA graphs (the default) and with --enforce-eager:
  every output field must be identical (a replayed graph runs the very kernels of the eager
  forward), so a graph replaying stale addresses or shapes fails here.
* The trained model again with --quantization fp8 on both backends (the CPU emulates the CUDA
  backend's FP8 GEMMs, docs/fp8.md), batched and one sequence at a time (the few-rows kernel's
  e4m3 path); same bar.
* The trained model again with token editing (--editing-threshold 0.5: every step also re-samples
  the block's committed tokens and replaces the confident ones that changed), batched and one
  sequence at a time; same bar.
* The trained LLaDA models/llada-tiny-arith, when its model.safetensors is there: the same 64
  prompts at each of bench/quality.py's LLaDA decode settings (pure diffusion B = 64 and
  semi-autoregressive B = 8, S = B), with low_confidence_static and low_confidence_dynamic (at its
  default threshold); same bar for each of the four.

Usage: python3 tests/gpu/engine_parity.py BUILD_DIR   (PASS/FAIL/INFO/SKIP lines, exits non-zero on FAIL)
"""

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAINED = REPO / "models" / "sdar-tiny-arith"
TRAINED_LLADA = REPO / "models" / "llada-tiny-arith"
LLADA_STRATEGIES = ("low_confidence_static", "low_confidence_dynamic")
NUM_PROMPTS = 64
SINGLE_PROMPTS = 16  # decoded one at a time on the GPU
BAR = 0.99  # of completion tokens equal, for the trained models
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO / "bench"))
import arith_tasks  # noqa: E402
import quality  # noqa: E402


def generate(cli, model, prompts, device, flags):
    """The CLI's --json outputs of a greedy decode of `prompts` (texts or id lists) on `device`."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
        f.write("".join(json.dumps(p) + "\n" for p in prompts))
        f.flush()
        out = subprocess.run([cli, "generate", "--model", str(model), "--prompts", f.name, "--json",
                              "--device", device, "--temperature", "0", "--max-tokens", "32", *flags],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def agreement(cpu, gpu):
    """(equal tokens, tokens counted, identical prompts) over the longer completion of each pair."""
    pairs = [(c["completion_ids"], g["completion_ids"]) for c, g in zip(cpu, gpu)]
    same = sum(a == b for c, g in pairs for a, b in zip(c, g))
    total = sum(max(len(c), len(g)) for c, g in pairs)
    return same, total, sum(c == g for c, g in pairs)


def summary(same, total, identical):
    return (f"{same}/{total} completion tokens equal ({100 * same / max(total, 1):.2f}%), "
            f"{identical}/{NUM_PROMPTS} prompts identical")


def trained_parity(cli, model, problems, label, flags):
    """Prints the PASS/FAIL line of a CPU and a GPU decode of the chat problems; returns whether it
    passed and the CPU outputs."""
    questions = [q for q, _ in problems]
    cpu, gpu = (generate(cli, model, questions, device, ["--chat", *flags]) for device in ("cpu", "cuda"))
    same, total, identical = agreement(cpu, gpu)
    solved = [sum(arith_tasks.check(o["completion_text"], a) for o, (_, a) in zip(outs, problems))
              for outs in (cpu, gpu)]
    ok = total > 0 and same / total >= BAR
    print(f"{'PASS' if ok else 'FAIL'} engine_parity {label} (bar {BAR:.0%}): {summary(same, total, identical)}; "
          f"answers right: CPU {solved[0]}/{NUM_PROMPTS}, GPU {solved[1]}/{NUM_PROMPTS}")
    return ok, cpu


def llada_parity(cli, problems):
    """trained_parity of the trained LLaDA at every decode setting and strategy; True when all pass
    (or the model is absent)."""
    if not (TRAINED_LLADA / "model.safetensors").exists():
        print(f"SKIP engine_parity trained LLaDA: {TRAINED_LLADA / 'model.safetensors'} is absent")
        return True
    results = [trained_parity(cli, TRAINED_LLADA, problems, f"trained LLaDA, B = {block}, S = {steps}, {strategy}",
                              ["--block-length", str(block), "--denoising-steps", str(steps), "--strategy", strategy])[0]
               for block, steps in quality.DECODES["llada"] for strategy in LLADA_STRATEGIES]
    return all(results)


def main():
    cli = str(Path(sys.argv[1]) / "apps" / "cli" / "jetengine")
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "sdar"
        subprocess.run([sys.executable, str(REPO / "tools" / "make_tiny_model.py"), "--arch", "sdar", "--seed", "11",
                        "--head-dim", "32", "--out", str(model)], check=True)
        rng = random.Random(0)
        prompts = [[rng.randrange(3, 200) for _ in range(rng.randrange(1, 40))] for _ in range(NUM_PROMPTS)]
        flags = ["--ignore-eos"]
        cpu, gpu = (generate(cli, model, prompts, device, flags) for device in ("cpu", "cuda"))
        eager = generate(cli, model, prompts, "cuda", flags + ["--enforce-eager"])
    print(f"INFO engine_parity random model (no bar): {summary(*agreement(cpu, gpu))}")
    graphs_ok = gpu == eager
    differing = sum(g != e for g, e in zip(gpu, eager))
    print(f"{'PASS' if graphs_ok else 'FAIL'} engine_parity CUDA graphs vs --enforce-eager: "
          f"{NUM_PROMPTS - differing}/{NUM_PROMPTS} outputs identical in every field")

    rng = random.Random(0)
    problems = [arith_tasks.make_problem(rng) for _ in range(NUM_PROMPTS)]
    llada_ok = llada_parity(cli, problems)
    if not (TRAINED / "model.safetensors").exists():
        print(f"SKIP engine_parity trained model: {TRAINED / 'model.safetensors'} is absent")
        return 0 if graphs_ok and llada_ok else 1
    results = [graphs_ok, llada_ok]
    for label, flags in (("trained model", []), ("trained model, --quantization fp8", ["--quantization", "fp8"]),
                         ("trained model, token editing 0.5", ["--editing-threshold", "0.5"])):
        ok, cpu = trained_parity(cli, TRAINED, problems, label, flags)
        # One sequence at a time the GPU's products have 4 or 8 rows: the few-rows matmul kernel
        # (skinny_gemm.cu) instead of cuBLASLt, against the same CPU outputs.
        single = generate(cli, TRAINED, [q for q, _ in problems[:SINGLE_PROMPTS]], "cuda",
                          ["--chat", "--max-num-seqs", "1", *flags])
        same, total, identical = agreement(cpu[:SINGLE_PROMPTS], single)
        single_ok = total > 0 and same / total >= BAR
        print(f"{'PASS' if single_ok else 'FAIL'} engine_parity {label}, batch 1 on the GPU (bar {BAR:.0%}): "
              f"{same}/{total} completion tokens equal ({100 * same / max(total, 1):.2f}%), "
              f"{identical}/{SINGLE_PROMPTS} prompts identical")
        results += [ok, single_ok]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
