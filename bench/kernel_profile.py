#!/usr/bin/env python3
"""Per-kernel GPU time of a `jetengine bench` run, read by Nsight Compute (no per-op sync).

    python3 bench/kernel_profile.py BUILD_DIR MODEL_DIR [--save FILE] [throughput flags ...]

Runs `ncu --metrics gpu__time_duration.sum` over `BUILD_DIR/apps/cli/jetengine bench --model MODEL_DIR
--device cuda --enforce-eager --kv-cache-mb 16384 FLAGS`. FLAGS default to --batches 128
--prompt-len 64 --max-tokens 8 where not given; a MODEL_DIR without safetensors (bench/run_gpu.sh
makes one) runs with --load-format dummy. The kernel stream is cut into forwards (a denoise
forward starts at its gather_block_tokens kernels, a prefill at the embedding kernel; the embedding
kernel after the final norm is the LM head's row gather), and the time of the denoise forwards
(those that end in the sampling kernels) is summed by component: the layers' GEMMs, the LM head
(a forward's last GEMM), attention (attention, split combine), norms, qk_norm_rope (which also
stores the K/V), swiglu, sampling, other. Prefill forwards are listed but left out of the shares. Kernel time only:
the host's gaps between launches are the difference to the unprofiled wall time of the same
workload. --enforce-eager because ncu times kernels one by one either way. --save FILE keeps every
kernel's name, grid and time as CSV.
"""
import csv
import io
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

COMPONENTS = [
    ("attention", ("attention_kernel", "combine_splits_kernel")),
    ("norms", ("rmsnorm_kernel",)),  # add_rmsnorm_kernel too
    ("qk_norm_rope", ("qk_norm_rope_kernel",)),
    ("swiglu", ("swiglu_kernel",)),
    ("sampling", ("sample_masked_positions", "commit")),
    ("embedding+gather", ("embedding_kernel", "gather_block_tokens_kernel")),
]


def component(name):
    for label, keys in COMPONENTS:
        if any(k in name for k in keys):
            return label
    if any(k in name.lower() for k in ("nvjet", "gemm", "cutlass", "sm90_xmma", "splitk")):
        return "gemm"
    return "other"


def run_ncu(build, model, flags):
    cmd = ["ncu", "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv", "--print-units", "base",
           f"{build}/apps/cli/jetengine", "bench", "--model", model, "--device", "cuda", "--enforce-eager",
           "--kv-cache-mb", "16384"] + flags
    print("$", " ".join(cmd), flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stdout[-4000:] + out.stderr[-4000:])
        sys.exit(out.returncode)
    text = out.stdout
    # The program's own output comes before ncu's CSV; the CSV starts at the header line.
    start = text.find('"ID","Process ID"')
    print(text[:start].replace("==PROF==", "").strip()[-3000:])
    kernels = []
    for row in csv.DictReader(io.StringIO(text[start:])):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        kernels.append((row["Kernel Name"], row["Grid Size"], float(row["Metric Value"].replace(",", "")) / 1e3))
    return kernels  # (name, grid, microseconds)


def split_forwards(kernels):
    forwards, current, previous = [], [], ""
    for k in kernels:
        name = k[0]
        starts = ("gather_block_tokens_kernel" in name and "gather_block_tokens_kernel" not in previous) or (
            "embedding_kernel" in name and "gather_block_tokens_kernel" not in previous and "rmsnorm" not in previous)
        if starts and current:
            forwards.append(current)
            current = []
        current.append(k)
        previous = name
    if current:
        forwards.append(current)
    return forwards


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build, model, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
    save = None
    if flags[:1] == ["--save"]:
        save, flags = flags[1], flags[2:]
    for name, value in (("--batches", "128"), ("--prompt-len", "64"), ("--max-tokens", "8")):
        if name not in flags:
            flags += [name, value]
    if not list(Path(model).glob("*.safetensors")) and "--load-format" not in flags:
        flags += ["--load-format", "dummy"]
    kernels = run_ncu(build, model, flags)
    if save:
        with open(save, "w", newline="") as f:
            csv.writer(f).writerows([("kernel", "grid", "us"), *kernels])
    forwards = split_forwards(kernels)
    totals, per_forward = defaultdict(float), []
    names = defaultdict(lambda: [0, 0.0])
    for f in forwards:
        is_denoise = any(component(n) == "sampling" for n, _, _ in f)
        gemm_idx = [i for i, (n, _, _) in enumerate(f) if component(n) == "gemm"]
        comp = defaultdict(float)
        for i, (n, grid, us) in enumerate(f):
            c = component(n)
            if c == "gemm" and is_denoise and gemm_idx and i == gemm_idx[-1]:
                c = "lm_head"
            comp[c] += us
            if is_denoise:
                totals[c] += us
                names[n[:90]][0] += 1
                names[n[:90]][1] += us
        per_forward.append((is_denoise, len(f), sum(comp.values()), f[gemm_idx[0]][1] if gemm_idx else "-", comp))
    print(f"\n{len(kernels)} kernels, {len(forwards)} forwards")
    print("forward | denoise | kernels | kernel time (us) | first GEMM grid | gemm | attention")
    for i, (d, n, t, grid, comp) in enumerate(per_forward):
        kind = "yes" if d else "no (prefill)"
        print(f"{i} | {kind} | {n} | {t:.1f} | {grid} | {comp['gemm']:.1f} | {comp['attention']:.1f}")
    denoise_total = sum(totals.values())
    count = sum(1 for f in per_forward if f[0])
    per = denoise_total / max(count, 1)
    print(f"\nDenoise forwards: {count}, kernel time {denoise_total:.1f} us, {per:.1f} us per forward")
    print("component | us per forward | share")
    for c, us in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"{c} | {us / max(count, 1):.1f} | {100 * us / denoise_total:.1f}%")
    print("\nkernel (denoise forwards) | launches | total us | mean us")
    for n, (cnt, us) in sorted(names.items(), key=lambda kv: -kv[1][1])[:30]:
        print(f"{n} | {cnt} | {us:.1f} | {us / cnt:.2f}")
    if per_forward:
        med = statistics.median(t for d, _, t, _, _ in per_forward if d) if count else 0
        print(f"\nmedian denoise forward: {med:.1f} us")


if __name__ == "__main__":
    main()
