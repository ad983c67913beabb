#!/usr/bin/env python3
"""Free-running greedy decode on the GPU against the CPU backend, through the CLI: 64 prompts on a
tiny random SDAR model (head_dim 32, Qwen3-sized q width), >= 99% of completion tokens equal.
Usage: python3 tests/gpu/engine_parity.py BUILD_DIR   (prints PASS/FAIL, exits non-zero on FAIL)"""

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def generate(cli, model, prompts_path, device):
    out = subprocess.run([cli, "generate", "--model", model, "--prompts", prompts_path, "--json", "--device", device,
                          "--temperature", "0", "--max-tokens", "32", "--ignore-eos"],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line)["completion_ids"] for line in out.splitlines()]


def main():
    cli = str(Path(sys.argv[1]) / "apps" / "cli" / "jetengine")
    with tempfile.TemporaryDirectory() as tmp:
        model = str(Path(tmp) / "sdar")
        subprocess.run([sys.executable, str(REPO / "tools" / "make_tiny_model.py"), "--arch", "sdar", "--seed", "11",
                        "--head-dim", "32", "--out", model], check=True)
        rng = random.Random(0)
        prompts = [[rng.randrange(3, 200) for _ in range(rng.randrange(1, 40))] for _ in range(64)]
        prompts_path = str(Path(tmp) / "prompts.jsonl")
        Path(prompts_path).write_text("".join(json.dumps(p) + "\n" for p in prompts))
        cpu = generate(cli, model, prompts_path, "cpu")
        gpu = generate(cli, model, prompts_path, "cuda")
    total = sum(len(c) for c in cpu)
    same = sum(a == b for c, g in zip(cpu, gpu) for a, b in zip(c, g))
    identical = sum(c == g for c, g in zip(cpu, gpu))
    ok = total > 0 and same / total >= 0.99 and all(len(c) == len(g) for c, g in zip(cpu, gpu))
    print(f"{'PASS' if ok else 'FAIL'} engine_parity: {same}/{total} completion tokens equal "
          f"({100 * same / max(total, 1):.2f}%), {identical}/64 prompts identical")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
