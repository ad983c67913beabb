#!/usr/bin/env python3
"""PyTorch's attention on bench/attention_op_bench.cpp's shapes: the peer of the attention op for a
large query block. S sequences of N new tokens over C cached ones, 32 heads MHA of 128, bf16,
torch.nn.functional.scaled_dot_product_attention (its fastest backend for the mask: flash
attention for no mask and for causal without a prefix, else the memory-efficient kernel with an
explicit mask), the fastest of 20 calls, and the TFLOP/s of the pairs the mask keeps (the same
count as the op bench's).

    python3 bench/torch_attention.py [--seqs 1,8] [--new 1024] [--cached 0,960]
"""

import argparse

import torch
import torch.nn.functional as F

HEADS, HEAD_DIM, REPS = 32, 128, 20


def fastest_ms(body):
    body()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(REPS):
        start.record()
        body()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop))
    return best


def kept_pairs(fresh, cached, causal):
    return fresh * cached + (fresh * (fresh + 1) / 2 if causal else fresh * fresh)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", default="1,8")
    parser.add_argument("--new", default="1024")
    parser.add_argument("--cached", default="0,960")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}: scaled_dot_product_attention, "
          f"{HEADS} heads of {HEAD_DIM}, bf16; fastest of {REPS} calls")
    print(f"{'seqs':>5} {'new':>6} {'cached':>7} {'mask':<14} {'ms':>10} {'TFLOP/s':>10}")
    for seqs in map(int, args.seqs.split(",")):
        for fresh in map(int, args.new.split(",")):
            for cached in map(int, args.cached.split(",")):
                q = torch.randn(seqs, HEADS, fresh, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
                k = torch.randn(seqs, HEADS, cached + fresh, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
                v = torch.randn_like(k)
                for causal in (False, True):
                    if causal and cached:  # query i (at cached + i) sees keys up to cached + i
                        keys = torch.arange(cached + fresh, device="cuda")
                        mask = keys[None, :] <= (cached + torch.arange(fresh, device="cuda"))[:, None]
                        ms = fastest_ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
                    else:
                        ms = fastest_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                    flop = 4.0 * HEADS * HEAD_DIM * seqs * kept_pairs(fresh, cached, causal)
                    print(f"{seqs:>5} {fresh:>6} {cached:>7} {'causal' if causal else 'bidirectional':<14} "
                          f"{ms:>10.3f} {flop / ms / 1e9:>10.1f}", flush=True)


if __name__ == "__main__":
    main()
