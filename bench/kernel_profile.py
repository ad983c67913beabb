#!/usr/bin/env python3
"""Per-kernel GPU time of a `jetengine bench` run, by component.

    python3 bench/kernel_profile.py BUILD_DIR MODEL_DIR [--tracer ncu|cupti] [--save FILE] [bench flags ...]
    python3 bench/kernel_profile.py - - --load FILE      (the figures of a saved run, no GPU needed)

Two tracers:
  * ncu (default): `ncu --metrics gpu__time_duration.sum` over `BUILD_DIR/apps/cli/jetengine bench
    --model MODEL_DIR --device cuda --enforce-eager --kv-cache-mb 16384 FLAGS`. Nsight Compute runs
    the kernels one at a time, so this is each kernel alone; --enforce-eager because it would
    serialise graphs anyway.
  * cupti: the same command without --enforce-eager, with BUILD_DIR/bench/libjet_kernel_trace.so
    preloaded (bench/kernel_trace.cpp): every kernel's start and end in the real run, CUDA graphs
    replayed at full speed. A kernel's time is its exclusive time (from the end of the kernel
    before it, which a programmatically launched kernel waits for); besides it the report gives
    each forward's wall time on the GPU and the idle gaps between kernels. CUPTI itself idles the
    GPU for about 1 ms between forwards, so the bench's own tok/s under it is not the engine's.
FLAGS default to --batches 128 --prompt-len 64 --max-tokens 8 where not given; a MODEL_DIR without
safetensors (bench/run_gpu.sh makes one) runs with --load-format dummy. The kernel stream is cut
into forwards (a denoise forward starts at its gather_block_tokens kernels, a prefill at the
embedding kernel; the embedding kernel after the final norm is the LM head's row gather), and the
time of the denoise forwards (those that end in the sampling kernels) is summed by component: the
layers' GEMMs, the LM head (a forward's last GEMM), attention (attention, split combine), norms,
qk_norm_rope (which also stores the K/V), swiglu, the MoE op's kernels (routing, sort, expert GEMMs, combine), sampling, other. Prefill forwards are listed but
left out of the shares. --save FILE keeps every kernel's name, grid and time as CSV.
"""
import csv
import io
import os
import tempfile
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

COMPONENTS = [
    ("attention", ("attention_kernel", "combine_splits_kernel")),
    ("moe", ("route_kernel", "sort_routes_kernel", "expert_gemm_kernel", "combine_kernel")),
    ("norms", ("rmsnorm_kernel",)),  # add_rmsnorm_kernel too
    ("qk_norm_rope", ("qk_norm_rope_kernel",)),
    ("swiglu", ("swiglu_kernel",)),
    ("sampling", ("sample_step_positions", "commit")),
    ("embedding+gather", ("embedding_kernel", "gather_block_tokens_kernel")),
]


def component(name):
    for label, keys in COMPONENTS:
        if any(k in name for k in keys):
            return label
    if any(k in name.lower() for k in ("nvjet", "gemm", "cutlass", "sm90_xmma", "splitk")):
        return "gemm"
    return "other"


def bench_command(build, model, flags, eager):
    return [f"{build}/apps/cli/jetengine", "bench", "--model", model, "--device", "cuda"] + (
        ["--enforce-eager"] if eager else []) + ["--kv-cache-mb", "16384"] + flags


def run_logged(cmd, env=None):
    print("$", " ".join(cmd), flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.stderr.write(out.stdout[-4000:] + out.stderr[-4000:])
        sys.exit(out.returncode)
    return out


def run_ncu(build, model, flags):
    """(name, grid, microseconds, None, None, None) per kernel, each timed alone by Nsight Compute."""
    cmd = ["ncu", "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv", "--print-units",
           "base"] + bench_command(build, model, flags, eager=True)
    text = run_logged(cmd).stdout
    # The program's own output comes before ncu's CSV; the CSV starts at the header line.
    start = text.find('"ID","Process ID"')
    print(text[:start].replace("==PROF==", "").strip()[-3000:])
    kernels = []
    for row in csv.DictReader(io.StringIO(text[start:])):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        kernels.append((row["Kernel Name"], row["Grid Size"], float(row["Metric Value"].replace(",", "")) / 1e3, None,
                        None, None))
    return kernels


def run_cupti(build, model, flags):
    """(name, grid, microseconds, start_ns, end_ns, graph_id) per kernel of the real run, in start order
    (graph_id 0: launched eagerly)."""
    tracer = Path(build) / "bench" / "libjet_kernel_trace.so"
    if not tracer.exists():
        sys.exit(f"{tracer} is missing: build the jet_kernel_trace target (a CUDA build with CUPTI)")
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.csv"
        env = dict(os.environ, LD_PRELOAD=str(tracer.resolve()), JET_KERNEL_TRACE=str(trace))
        out = run_logged(bench_command(build, model, flags, eager=False), env)
        print(out.stdout.strip()[-3000:])
        with open(trace, newline="") as f:
            rows = list(csv.DictReader(f))
    kernels = [(r["name"], r["grid"], (int(r["end_ns"]) - int(r["start_ns"])) / 1e3, int(r["start_ns"]),
                int(r["end_ns"]), int(r["graph_id"])) for r in rows]
    return sorted(kernels, key=lambda k: k[3])


def load_saved(path):
    """The kernels a --save wrote, for another look without a GPU."""
    def number(v, kind):
        return kind(v) if v not in ("", "None") else None
    with open(path, newline="") as f:
        return [(r["kernel"], r["grid"], float(r["us"]), number(r["start_ns"], int), number(r["end_ns"], int),
                 number(r["graph_id"], int)) for r in csv.DictReader(f)]


def split_forwards(kernels):
    """Cuts the kernel stream into forwards: a denoise forward starts at its gather_block_tokens
    kernel, a prefill at its embedding kernel. The embedding kernel also gathers rows inside a
    forward (the last layer's rows for the LM head, after attention or a norm), so it starts a
    forward only after a kernel that ends one (sampling, or a layer's K/V store)."""
    forwards, current, previous = [], [], ""
    for k in kernels:
        name = k[0]
        inside = any(s in previous for s in ("gather_block_tokens_kernel", "rmsnorm", "attention_kernel",
                                              "combine_splits_kernel", "embedding_kernel"))
        starts = ("gather_block_tokens_kernel" in name and "gather_block_tokens_kernel" not in previous) or (
            "embedding_kernel" in name and not inside)
        if starts and current:
            forwards.append(current)
            current = []
        current.append(k)
        previous = name
    if current:
        forwards.append(current)
    return forwards


def exclusive_times(forward):
    """Real-run only: each kernel's time not overlapped by the one before it (a kernel launched
    programmatically starts while its predecessor finishes and waits for it, so its own span
    includes that wait), and the idle gap before it."""
    out = []
    for i, k in enumerate(forward):
        previous_end = forward[i - 1][4] if i else k[3]
        out.append(((k[4] - max(k[3], previous_end)) / 1e3, max(0, k[3] - previous_end) / 1e3))
    return out


def labels(forward, is_denoise):
    """Each kernel's component; a denoise forward's last GEMM is the LM head."""
    comps = [component(k[0]) for k in forward]
    gemms = [i for i, c in enumerate(comps) if c == "gemm"]
    if is_denoise and gemms:
        comps[gemms[-1]] = "lm_head"
    return comps


def print_gaps(denoise):
    """Real-run only: GPU wall time of the denoise forwards replayed from CUDA graphs (the eager
    first runs of each shape left out), each component's exclusive time, and the idle gaps."""
    denoise = [(f, comps) for f, comps in denoise if all(k[5] for k in f)]
    if not denoise:
        return
    walls, exclusive, gaps = [], defaultdict(float), defaultdict(float)
    for f, comps in denoise:
        walls.append((f[-1][4] - f[0][3]) / 1e3)
        for (k, c), (own, gap) in zip(zip(f, comps), exclusive_times(f)):
            exclusive[c] += own
            gaps["before a GEMM" if c in ("gemm", "lm_head") else "before our kernels"] += gap
    count, wall = len(denoise), sum(walls)
    print(f"\nReal run: {count} denoise forwards from graphs, GPU wall time {wall / count:.1f} us per forward "
          f"(first kernel's start to last kernel's end; median {statistics.median(walls):.1f})")
    print("component | exclusive us per forward | share of the wall time")
    for c, us in sorted(exclusive.items(), key=lambda kv: -kv[1]):
        print(f"{c} | {us / count:.1f} | {100 * us / wall:.1f}%")
    for where, us in gaps.items():
        print(f"idle gaps {where} | {us / count:.1f} | {100 * us / wall:.1f}%")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build, model, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
    tracer, save, load = "ncu", None, None
    while flags[:1] in (["--tracer"], ["--save"], ["--load"]):
        if flags[0] == "--tracer":
            tracer = flags[1]
        elif flags[0] == "--save":
            save = flags[1]
        else:
            load = flags[1]
        flags = flags[2:]
    if tracer not in ("ncu", "cupti"):
        sys.exit(f"--tracer must be ncu or cupti, not {tracer!r}")
    for name, value in (("--batches", "128"), ("--prompt-len", "64"), ("--max-tokens", "8")):
        if name not in flags:
            flags += [name, value]
    if not list(Path(model).glob("*.safetensors")) and "--load-format" not in flags:
        flags += ["--load-format", "dummy"]
    if load:
        kernels = load_saved(load)
        tracer = "cupti" if kernels and kernels[0][3] is not None else "ncu"
    else:
        kernels = run_ncu(build, model, flags) if tracer == "ncu" else run_cupti(build, model, flags)
    if save:
        with open(save, "w", newline="") as f:
            csv.writer(f).writerows([("kernel", "grid", "us", "start_ns", "end_ns", "graph_id"), *kernels])
    forwards = split_forwards(kernels)
    if tracer == "cupti":  # a kernel's span includes its wait for the one before: count its own time
        forwards = [[(k[0], k[1], own, *k[3:]) for k, (own, _) in zip(f, exclusive_times(f))] for f in forwards]
    totals, per_forward, denoise = defaultdict(float), [], []
    names = defaultdict(lambda: [0, 0.0])
    for f in forwards:
        is_denoise = any(component(k[0]) == "sampling" for k in f)
        comps = labels(f, is_denoise)
        comp = defaultdict(float)
        for k, c in zip(f, comps):
            comp[c] += k[2]
            if is_denoise:
                totals[c] += k[2]
                names[k[0][:90]][0] += 1
                names[k[0][:90]][1] += k[2]
        if is_denoise:
            denoise.append((f, comps))
        first_gemm = next((k[1] for k, c in zip(f, comps) if c == "gemm"), "-")
        per_forward.append((is_denoise, len(f), sum(comp.values()), first_gemm, comp))
    print(f"\n{len(kernels)} kernels, {len(forwards)} forwards")
    print("forward | denoise | kernels | kernel time (us) | first GEMM grid | gemm | attention")
    for i, (d, n, t, grid, comp) in enumerate(per_forward):
        kind = "yes" if d else "no (prefill)"
        print(f"{i} | {kind} | {n} | {t:.1f} | {grid} | {comp['gemm']:.1f} | {comp['attention']:.1f}")
    denoise_total = sum(totals.values())
    count = len(denoise)
    print(f"\nDenoise forwards: {count}, kernel time {denoise_total:.1f} us, "
          f"{denoise_total / max(count, 1):.1f} us per forward")
    print("component | us per forward | share")
    for c, us in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"{c} | {us / max(count, 1):.1f} | {100 * us / max(denoise_total, 1e-9):.1f}%")
    print("\nkernel (denoise forwards) | launches | total us | mean us")
    for n, (cnt, us) in sorted(names.items(), key=lambda kv: -kv[1][1])[:30]:
        print(f"{n} | {cnt} | {us:.1f} | {us / cnt:.2f}")
    if count:
        print(f"\nmedian denoise forward: {statistics.median(t for d, _, t, _, _ in per_forward if d):.1f} us")
    if tracer == "cupti":
        print_gaps(denoise)


if __name__ == "__main__":
    main()
