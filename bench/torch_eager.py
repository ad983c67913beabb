#!/usr/bin/env python3
"""The plain PyTorch eager baseline of Mode 1 (DESIGN.md §4): the decode a user would write
without the engine, timed on the same workload as `jetengine bench`.

    python3 bench/torch_eager.py [--batches 1,32,128] [--prompt-len 64] [--max-tokens 128]

Model: SDAR-4B's shapes (36 layers, hidden 2560, 32 q / 8 kv heads of 128, MLP 9728, vocabulary
151,936), random bf16 weights made on the GPU (tests/reference/torch_sdar.py's init_weights):
writing and reading the 8.8 GB checkpoint of tools/make_tiny_model.py would cost minutes, and
the weights' values do not change the work of a greedy static decode that ignores EOS.
Decode: torch_sdar.greedy_block_decode (prefill of the prompt blocks, dense per-layer KV cache,
B = 4, S = 4, low_confidence_static, one save forward per block), every sequence running to
max_tokens (no stop ids). Prompts: random ids in [3, vocab / 2), as `jetengine bench` draws them.
Each batch size runs once untimed with 8 tokens (cuBLAS plans, allocator), then once timed
between torch.cuda.synchronize() calls. Reports completion tokens per second. Needs a CUDA GPU.
"""

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reference"))
import torch_sdar  # noqa: E402

# SDAR-4B-Chat's config.json (reference/models.md §1.1), the keys SdarModel reads.
SDAR_4B = {
    "hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "rope_scaling": None, "attention_bias": False, "tie_word_embeddings": False,
}
MASK_ID = 151669
BLOCK, STEPS = 4, 4
WARMUP_TOKENS = 8


def random_model():
    with torch.device("cuda"):
        model = torch_sdar.SdarModel(SDAR_4B)
    model.init_weights()
    return model.to(torch.bfloat16).eval()


def decode(model, prompts, max_tokens):
    """Completion tokens produced and seconds taken."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    completions, _ = torch_sdar.greedy_block_decode(model, prompts, BLOCK, STEPS, max_tokens, MASK_ID, stop_ids=[])
    torch.cuda.synchronize()
    return sum(len(c) for c in completions), time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description="PyTorch eager SDAR decode throughput (Mode 1)")
    parser.add_argument("--batches", default="1,32,128")
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]

    model = random_model()
    generator = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}: SDAR-4B shapes, random bf16 weights, "
          f"prompt {args.prompt_len}, max_tokens {args.max_tokens}, B {BLOCK}, S {STEPS}, greedy, "
          f"low_confidence_static, eager")
    print(f"{'batch':>6} {'tokens':>10} {'seconds':>10} {'tok/s':>12}")
    for batch in batches:
        prompts = torch.randint(3, SDAR_4B["vocab_size"] // 2, (batch, args.prompt_len), generator=generator).tolist()
        decode(model, prompts, WARMUP_TOKENS)
        tokens, seconds = decode(model, prompts, args.max_tokens)
        print(f"{batch:>6} {tokens:>10} {seconds:>10.3f} {tokens / seconds:>12.1f}", flush=True)


if __name__ == "__main__":
    main()
