#!/usr/bin/env python3
"""The bytes floor of a mixture-of-experts model's Mode 1 decode: the weights one denoise forward
must read, over the device's copy bandwidth measured here, as tokens/s.

    python3 bench/moe_bytes_floor.py [--model sdar-30b-a3b|llada2-mini] [--batches 1,32,128,256,512] [--fp8]

Bandwidth: a device-to-device copy of 4 GiB (bytes read + bytes written over the time), median
of 10 after 3 warm-ups. Bytes per forward: every layer's attention and router weights, the dense
layers' MLP and the shared expert (LLaDA2), the LM head, and the routed experts a forward's tokens
hit: with batch * B tokens each taking top-k of E experts, an expert is missed by all of them with
probability (1 - k/E)^(batch * B) when the routing is uniform, as it is for random weights (for
LLaDA2's group-limited routing too, whose groups are as likely as each other). A block of B tokens
takes S forwards, so tokens/s = batch * B / (S * bytes / bandwidth): SDAR-30B-A3B at B = S = 4,
LLaDA2.0-mini at B = S = 32 (bench/run_gpu.sh). The floor ignores attention's K/V reads and
activations (both small at prompt 64). With --fp8 the projections (attention, MLPs, experts, the
shared expert) are one byte a weight, as `--quantization fp8` stores them; the router and the LM
head stay bf16 (docs/fp8.md). Needs a CUDA GPU and torch.
"""

import argparse
import statistics

import torch

BF16 = 2
# hidden, attention widths (q, one of k / v), layers (dense ones first), dense MLP width, experts,
# top-k, expert width, shared expert width, vocabulary, block length B and steps S.
MODELS = {
    "sdar-30b-a3b": dict(hidden=2048, q=32 * 128, kv=4 * 128, layers=48, dense_layers=0, dense_width=0, experts=128,
                         top_k=8, expert_width=768, shared_width=0, vocab=151936, block=4, steps=4),
    "llada2-mini": dict(hidden=2048, q=16 * 128, kv=4 * 128, layers=20, dense_layers=1, dense_width=5120,
                        experts=256, top_k=8, expert_width=512, shared_width=512, vocab=157184, block=32, steps=32),
}


def copy_bandwidth():
    """Bytes moved per second (read + write) by a device-to-device copy of 4 GiB."""
    src = torch.empty(1 << 31, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(13):
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end) / 1e3)
    return 2 * src.numel() * BF16 / statistics.median(times)


def forward_bytes(m, batch, projection_bytes):
    """Weight bytes one denoise forward of `batch` sequences reads, and the experts hit a layer."""
    h, p = m["hidden"], projection_bytes
    attention = h * (m["q"] + 2 * m["kv"]) + m["q"] * h
    dense_mlp = 3 * h * m["dense_width"]
    expert = 3 * h * m["expert_width"]
    hit = m["experts"] * (1 - (1 - m["top_k"] / m["experts"]) ** (batch * m["block"]))
    moe_layers = m["layers"] - m["dense_layers"]
    projections = m["layers"] * attention + m["dense_layers"] * dense_mlp + moe_layers * (
        3 * h * m["shared_width"] + hit * expert)
    return p * projections + BF16 * (moe_layers * m["experts"] * h + m["vocab"] * h), hit


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(MODELS), default="sdar-30b-a3b")
    p.add_argument("--batches", default="1,32,128,256,512")
    p.add_argument("--fp8", action="store_true", help="projections in FP8 e4m3 (one byte a weight)")
    args = p.parse_args()
    m = MODELS[args.model]
    bandwidth = copy_bandwidth()
    print(f"copy bandwidth {bandwidth / 1e12:.3f} TB/s ({torch.cuda.get_device_name()}); {args.model}, "
          f"B = {m['block']}, S = {m['steps']}, projections {'FP8' if args.fp8 else 'bf16'}")
    for batch in (int(b) for b in args.batches.split(",")):
        nbytes, hit = forward_bytes(m, batch, 1 if args.fp8 else BF16)
        floor = batch * m["block"] / (m["steps"] * nbytes / bandwidth)
        print(f"batch {batch:4d}: {hit:6.1f} experts hit a layer, {nbytes / 1e9:6.2f} GB a forward, "
              f"bytes floor {floor:10.1f} tok/s")


if __name__ == "__main__":
    main()
