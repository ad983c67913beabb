#!/usr/bin/env python3
"""The plain PyTorch peer of the LLaDA-8B benchmarks (issue 25): LLaDA's own generate, the decode
its users run without an engine, timed on the rows of `bench/run_gpu.sh llada`.

    python3 bench/torch_llada_generate.py [--max-timed-steps 64] [--tiny --device cpu]

Model: tests/reference/torch_llada.py at LLaDA-8B's shapes (bench/llada_shapes.py: 32 layers,
hidden 4096, 32 heads of 128, MLP 12288, vocabulary 126,464), random bf16 weights made on the GPU
(the values do not change the work of a greedy decode that runs to the end). Decode:
torch_llada.generate, greedy, low-confidence remasking: every step forwards the whole canvas
(prompt of 64 + gen_length), no KV cache; blocks and steps from llada_shapes.llada_generate_args,
so each row commits as many tokens per step as the engine's. Prompts: random ids in
[3, vocab / 2), as `jetengine bench` draws them.

Every step of LLaDA's generate costs the same (the same canvas, the same shapes), so a row times
at most --max-timed-steps steps (0: all) after a warm-up of 2, between torch.cuda.synchronize()
calls, and states whether its tok/s (batch * gen_length over steps * time per step) is
extrapolated from them. --tiny runs toy shapes (llada_shapes.TINY), e.g. on a CPU, to check the
script.
"""

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reference"))
import torch_llada  # noqa: E402
from llada_shapes import ROWS, add_target_arguments, llada_generate_args, target  # noqa: E402

WARMUP_STEPS = 2


def random_model(config, device, dtype):
    if device.type == "cpu":  # toy shapes (--tiny); also where torch < 2.0 has no device context
        model = torch_llada.LladaModel(config).to(dtype)
    else:  # 8B parameters: laid out on the meta device, allocated once, in dtype, on the GPU
        with torch.device("meta"):
            model = torch_llada.LladaModel(config).to(dtype)
        model.to_empty(device=device)
    model.init_weights()
    return model.eval().requires_grad_(False)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def per_step_seconds(model, prompts, decode, limit):
    """Seconds per step of LLaDA's generate (decode: its keyword arguments) and the steps timed."""
    device = prompts.device
    torch_llada.generate(model, prompts, **decode, max_forwards=WARMUP_STEPS)
    synchronize(device)
    start = time.perf_counter()
    _, steps = torch_llada.generate(model, prompts, **decode, max_forwards=limit)
    synchronize(device)
    return (time.perf_counter() - start) / steps, steps


def main():
    parser = argparse.ArgumentParser(description="PyTorch LLaDA generate throughput on LLaDA-8B's shapes")
    parser.add_argument("--max-timed-steps", type=int, default=64, help="steps timed per row at most (0: all)")
    add_target_arguments(parser)
    args = parser.parse_args()
    if args.max_timed_steps < 0:
        parser.error("--max-timed-steps must be 0 or more")
    device, config, dtype, description = target(args)
    model = random_model(config, device, dtype)
    mask_id = config["mask_token_id"]
    generator = torch.Generator().manual_seed(0)
    print(f"{description}, random {dtype} weights, "
          f"LLaDA generate (whole canvas every step, no KV cache), greedy, low-confidence remasking, eager")
    print(f"{'row':<24} {'gen':>5} {'block':>6} {'steps':>6} {'canvas rows':>12} {'timed':>6} {'ms/step':>10} "
          f"{'tok/s':>10}")
    for row in ROWS:
        gen_length, block_length, steps = llada_generate_args(row)
        decode = dict(steps=steps, gen_length=gen_length, block_length=block_length, mask_id=mask_id)
        prompts = torch.randint(3, config["vocab_size"] // 2, (row.batch, row.prompt), generator=generator)
        limit = min(steps, args.max_timed_steps) if args.max_timed_steps else steps
        seconds, timed = per_step_seconds(model, prompts.to(device), decode, limit)
        note = f"  (extrapolated from {timed} of {steps} steps)" if timed < steps else ""
        print(f"{row.name:<24} {gen_length:>5} {block_length:>6} {steps:>6} {row.batch * (row.prompt + gen_length):>12} "
              f"{timed:>6} {1e3 * seconds:>10.3f} {row.batch * gen_length / (steps * seconds):>10.1f}{note}", flush=True)


if __name__ == "__main__":
    main()
