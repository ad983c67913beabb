#!/usr/bin/env python3
"""The GEMM floor of the engine's forwards on the LLaDA-8B rows of `bench/run_gpu.sh llada`: what
a forward would take if it did nothing but its matrix products, kept up as in a decode.

    python3 bench/llada_gemm_floor.py [--seconds 2] [--tiny --device cpu]

Products of a forward of N token rows, LLaDA-8B's shapes (bench/llada_shapes.py): per layer qkv
[N,4096]x[4096,12288], o [N,4096]x[4096,4096], gate_up [N,4096]x[4096,24576], down
[N,12288]x[12288,4096], 32 layers with weights of their own (14 GB, far beyond L2), then the LM
head [M,4096]x[4096,126464] on the forward's M masked rows. torch.matmul in bf16 with
preallocated outputs, launched back to back; each figure is the mean over a run of about
--seconds after one untimed call (GEMM plans): the H200 lowers its clocks under its power cap
within a second of such work, and a decode keeps it busy for seconds.

Per row: the engine's forwards (llada_shapes.engine_forwards: the prefill of full prompt blocks,
the denoise steps of each block, saves riding as entries of their own); the layers' time at each
distinct N; the LM head's mean over up to 16 forwards spread evenly over the sorted masked
counts. Printed: the forwards, floor ms per forward (total / forwards) and the floor tok/s
(completion tokens / total), to hold against `jetengine bench`'s forwards and ms/fwd. Left out,
so a real forward is slower: attention, norms, RoPE, sampling; the engine's LM head also writes
fp32 logits and pads M to its buckets. --tiny runs toy shapes (llada_shapes.TINY), e.g. on a CPU.
"""

import argparse
import collections
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llada_shapes import ROWS, add_target_arguments, engine_forwards, target  # noqa: E402

HEAD_SAMPLES = 16


class Products:
    """The weights and preallocated activations of the products, up to `rows` token rows."""

    def __init__(self, config, rows, device, dtype):
        hidden, inter, vocab = config["d_model"], config["mlp_hidden_size"], config["vocab_size"]
        qkv = hidden + 2 * config["n_kv_heads"] * (hidden // config["n_heads"])

        def randn(*shape):
            return torch.empty(shape, device=device, dtype=dtype).normal_(0.0, 0.02)

        self.layers = [(randn(hidden, qkv), randn(hidden, hidden), randn(hidden, 2 * inter), randn(inter, hidden))
                       for _ in range(config["n_layers"])]
        self.head = randn(hidden, vocab)
        self.x, self.mlp_in = randn(rows, hidden), randn(rows, inter)
        self.out = {n: torch.empty(rows, n, device=device, dtype=dtype) for n in {qkv, hidden, 2 * inter, vocab}}
        self.device = device

    def layer_products(self, n):
        x, mlp_in = self.x[:n], self.mlp_in[:n]
        for w_qkv, w_o, w_gate_up, w_down in self.layers:
            torch.matmul(x, w_qkv, out=self.out[w_qkv.shape[1]][:n])
            torch.matmul(x, w_o, out=self.out[w_o.shape[1]][:n])
            torch.matmul(x, w_gate_up, out=self.out[w_gate_up.shape[1]][:n])
            torch.matmul(mlp_in, w_down, out=self.out[w_down.shape[1]][:n])

    def head_products(self, masked_rows):
        for m in masked_rows:
            torch.matmul(self.x[:m], self.head, out=self.out[self.head.shape[1]][:m])

    def synchronize(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def kept_up_seconds(products, work, seconds):
    """Mean seconds of work() over back-to-back calls lasting about `seconds`."""
    work()
    products.synchronize()
    start = time.perf_counter()
    work()
    products.synchronize()
    calls = max(1, round(seconds / (time.perf_counter() - start)))
    start = time.perf_counter()
    for _ in range(calls):
        work()
    products.synchronize()
    return (time.perf_counter() - start) / calls


def spread(values, count):
    """Up to `count` of the sorted values, one from the middle of each of `count` equal slices."""
    values = sorted(values)
    if len(values) <= count:
        return values
    return [values[(2 * i + 1) * len(values) // (2 * count)] for i in range(count)]


def main():
    parser = argparse.ArgumentParser(description="GEMM floor of the engine's LLaDA-8B forwards")
    parser.add_argument("--seconds", type=float, default=2.0, help="how long each figure is kept up")
    add_target_arguments(parser)
    args = parser.parse_args()
    device, config, dtype, description = target(args)
    plans = {row: engine_forwards(row) for row in ROWS}
    products = Products(config, max(max(rows, masked) for f in plans.values() for rows, masked in f), device, dtype)
    print(f"{description}, {dtype} torch.matmul, "
          f"each figure kept up for about {args.seconds:g} s")
    print(f"{'row':<24} {'forwards':>8} {'rows/fwd':>9} {'masked/fwd':>10} {'layers ms':>10} {'head ms':>8} "
          f"{'floor ms/fwd':>12} {'floor tok/s':>11}")
    layer_seconds = {}  # by token rows: rows share shapes
    for row, forwards in plans.items():
        layers = 0.0
        for n, count in collections.Counter(rows for rows, _ in forwards).items():
            if n not in layer_seconds:
                layer_seconds[n] = kept_up_seconds(products, lambda n=n: products.layer_products(n), args.seconds)
            layers += count * layer_seconds[n]
        masked = [m for _, m in forwards if m]
        sample = spread(masked, HEAD_SAMPLES)
        head = len(masked) * kept_up_seconds(products, lambda: products.head_products(sample), args.seconds) / len(sample)
        total = layers + head
        print(f"{row.name:<24} {len(forwards):>8} {sum(r for r, _ in forwards) / len(forwards):>9.0f} "
              f"{sum(masked) / len(forwards):>10.0f} {1e3 * layers / len(forwards):>10.3f} "
              f"{1e3 * head / len(forwards):>8.3f} {1e3 * total / len(forwards):>12.3f} {row.tokens / total:>11.1f}",
              flush=True)


if __name__ == "__main__":
    main()
