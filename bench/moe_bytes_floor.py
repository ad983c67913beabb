#!/usr/bin/env python3
"""The bytes floor of SDAR-30B-A3B's Mode 1 decode: the weights one denoise forward must read,
over the device's copy bandwidth measured here, as tokens/s.

    python3 bench/moe_bytes_floor.py [--batches 1,32,128,256,512]

Bandwidth: a device-to-device copy of 4 GiB (bytes read + bytes written over the time), median
of 10 after 3 warm-ups. Bytes per forward: every layer's attention and router weights, the LM
head, and the experts a forward's tokens hit: with batch * B tokens each taking top-8 of 128
experts, an expert is missed by all of them with probability (1 - 8/128)^(batch * B) when the
routing is uniform, as it is for random weights. A block of B = 4 tokens takes S = 4 forwards, so
tokens/s = batch * B / (S * bytes / bandwidth). The floor ignores attention's K/V reads and
activations (both small at prompt 64). Needs a CUDA GPU and torch.
"""

import argparse
import statistics

import torch

BLOCK, STEPS = 4, 4
LAYERS, HIDDEN, Q_WIDTH, KV_WIDTH = 48, 2048, 32 * 128, 4 * 128
EXPERTS, TOP_K, EXPERT_WIDTH, VOCAB = 128, 8, 768, 151936
BF16 = 2


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


def forward_bytes(batch):
    """Weight bytes one denoise forward of `batch` sequences reads."""
    attention = HIDDEN * (Q_WIDTH + 2 * KV_WIDTH) + Q_WIDTH * HIDDEN
    router = EXPERTS * HIDDEN
    expert = 3 * HIDDEN * EXPERT_WIDTH
    hit = EXPERTS * (1 - (1 - TOP_K / EXPERTS) ** (batch * BLOCK))
    return BF16 * (LAYERS * (attention + router + hit * expert) + VOCAB * HIDDEN), hit


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", default="1,32,128,256,512")
    args = p.parse_args()
    bandwidth = copy_bandwidth()
    print(f"copy bandwidth {bandwidth / 1e12:.3f} TB/s ({torch.cuda.get_device_name()})")
    for batch in (int(b) for b in args.batches.split(",")):
        nbytes, hit = forward_bytes(batch)
        floor = batch * BLOCK / (STEPS * nbytes / bandwidth)
        print(f"batch {batch:4d}: {hit:6.1f} experts hit a layer, {nbytes / 1e9:6.2f} GB a forward, "
              f"bytes floor {floor:10.1f} tok/s")


if __name__ == "__main__":
    main()
