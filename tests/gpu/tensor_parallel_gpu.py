#!/usr/bin/env python3
"""Tensor parallel on the GPUs of one host: the engine at --tensor-parallel-size N against the
same engine at 1, on the trained demo models (SDAR and LLaDA, chat problems) and on random SDAR-MoE
and LLaDA2 models (token ids, with and without --enable-expert-parallel), greedy. The ranks sum bf16 partial products, so a logit may round
differently from one GPU's and a near-tie may flip: the bar is 99% of completion tokens equal on
the trained models; the random ones (near-flat distributions) are reported. Needs N visible GPUs
(SKIP otherwise) and a build with NCCL.

    python3 tests/gpu/tensor_parallel_gpu.py BUILD_DIR [N]   (N default 2; PASS/FAIL/INFO/SKIP lines)
"""

import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine_parity  # noqa: E402

REPO = engine_parity.REPO
BAR = 0.99


def visible_gpus():
    out = subprocess.run(["nvidia-smi", "--list-gpus"], stdout=subprocess.PIPE, text=True)
    return len(out.stdout.splitlines()) if out.returncode == 0 else 0


def compare(cli, model, prompts, tp, label, flags, bar, split_flags=()):
    one, split = (engine_parity.generate(cli, model, prompts, "cuda", ["--tensor-parallel-size", str(size), *flags])
                  for size, flags in ((1, flags), (tp, [*flags, *split_flags])))
    same, total, identical = engine_parity.agreement(one, split)
    share = same / max(total, 1)
    verdict = "INFO" if bar is None else "PASS" if share >= bar else "FAIL"
    print(f"{verdict} tensor_parallel {label}, TP {tp} vs 1: {same}/{total} completion tokens equal "
          f"({100 * share:.2f}%), {identical}/{len(prompts)} prompts identical")
    return verdict != "FAIL"


def main():
    cli = str(Path(sys.argv[1]) / "apps" / "cli" / "jetengine")
    tp = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    if visible_gpus() < tp:
        print(f"SKIP tensor_parallel: {visible_gpus()} GPU(s) visible, TP {tp} needs {tp}")
        return 0
    import arith_tasks
    rng = random.Random(0)
    questions = [arith_tasks.make_problem(rng)[0] for _ in range(engine_parity.NUM_PROMPTS)]
    ok = True
    for name, flags in (("sdar-tiny-arith", []), ("llada-tiny-arith", [])):
        model = REPO / "models" / name
        if not (model / "model.safetensors").exists():
            print(f"SKIP tensor_parallel {name}: no weights")
            continue
        ok &= compare(cli, model, questions, tp, f"trained {name}", ["--chat", *flags], BAR)
    with tempfile.TemporaryDirectory() as tmp:
        for arch in ("sdar_moe", "llada2_moe"):
            model = Path(tmp) / arch
            subprocess.run([sys.executable, str(REPO / "tools" / "make_tiny_model.py"), "--arch", arch, "--seed", "7",
                            "--out", str(model)], check=True)
            ids = [[rng.randrange(3, 200) for _ in range(rng.randrange(1, 40))] for _ in range(32)]
            ok &= compare(cli, model, ids, tp, f"random {arch}", ["--ignore-eos"], None)
            ok &= compare(cli, model, ids, tp, f"random {arch}, expert parallel", ["--ignore-eos"], None,
                          ["--enable-expert-parallel"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
