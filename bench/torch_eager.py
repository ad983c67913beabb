#!/usr/bin/env python3
"""The plain PyTorch eager baseline of Mode 1 (DESIGN.md §4): the decode a user would write
without the engine, timed on the same workload as `jetengine bench`.

    python3 bench/torch_eager.py [--batches 1,32,128] [--prompt-len 64] [--max-tokens 128] [--fp8]

Model: SDAR-4B's shapes (36 layers, hidden 2560, 32 q / 8 kv heads of 128, MLP 9728, vocabulary
151,936), random bf16 weights made on the GPU (tests/reference/torch_sdar.py's init_weights):
writing and reading the 8.8 GB checkpoint of tools/make_tiny_model.py would cost minutes, and
the weights' values do not change the work of a greedy static decode that ignores EOS.
Decode: torch_sdar.greedy_block_decode (prefill of the prompt blocks, dense per-layer KV cache,
B = 4, S = 4, low_confidence_static, one save forward per block), every sequence running to
max_tokens (no stop ids). Prompts: random ids in [3, vocab / 2), as `jetengine bench` draws them.
Each batch size runs once untimed with 8 tokens (cuBLAS plans, allocator), then once timed
between torch.cuda.synchronize() calls. Reports completion tokens per second. Needs a CUDA GPU.

--fp8: the FP8 peer of `--quantization fp8`, W8A8 e4m3 as docs/fp8.md has it, written as a user
would in plain PyTorch: each layer projection's weight quantized once per output channel, its
input per token on every call, the product by torch._scaled_mm with row-wise scales (cuBLASLt's
FP8 GEMM), bf16 out; the LM head, norms and attention stay bf16 as in the engine.
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


def e4m3_scales(x):
    """docs/fp8.md's scale per row of x: amax / 448, or 1 for an all-zero row (fp32, [rows, 1])."""
    amax = x.abs().amax(dim=-1, keepdim=True).float()
    return torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))


class Fp8Linear(torch.nn.Module):
    """A bias-free nn.Linear as e4m3 codes with a scale per output channel; its input is quantized
    per token with dynamic scales on each call."""

    def __init__(self, linear):
        super().__init__()
        w = linear.weight.detach().float()
        scale = e4m3_scales(w)
        self.codes = (w / scale).to(torch.float8_e4m3fn)
        self.scale = scale.t().contiguous()  # [1, N]

    def forward(self, x):
        rows = x.reshape(-1, x.shape[-1])
        scale = e4m3_scales(rows)
        codes = (rows.float() / scale).to(torch.float8_e4m3fn)
        out = torch._scaled_mm(codes, self.codes.t(), scale_a=scale, scale_b=self.scale, out_dtype=torch.bfloat16)
        return out.reshape(*x.shape[:-1], -1)


def to_fp8(model):
    """Replaces every layer projection (not the LM head) with its Fp8Linear."""
    for layer in list(model.modules()):
        for name, child in list(layer.named_children()):
            if isinstance(child, torch.nn.Linear) and child is not model.lm_head:
                setattr(layer, name, Fp8Linear(child))
    return model


def random_model(fp8):
    with torch.device("cuda"):
        model = torch_sdar.SdarModel(SDAR_4B)
    model.init_weights()
    model = model.to(torch.bfloat16).eval()
    return to_fp8(model) if fp8 else model


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
    parser.add_argument("--fp8", action="store_true", help="W8A8 e4m3 projections through torch._scaled_mm")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]

    model = random_model(args.fp8)
    generator = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}: SDAR-4B shapes, random bf16 weights, "
          f"prompt {args.prompt_len}, max_tokens {args.max_tokens}, B {BLOCK}, S {STEPS}, greedy, "
          f"low_confidence_static, eager, {'FP8 projections (torch._scaled_mm)' if args.fp8 else 'bf16'}")
    print(f"{'batch':>6} {'tokens':>10} {'seconds':>10} {'tok/s':>12}")
    for batch in batches:
        prompts = torch.randint(3, SDAR_4B["vocab_size"] // 2, (batch, args.prompt_len), generator=generator).tolist()
        decode(model, prompts, WARMUP_TOKENS)
        tokens, seconds = decode(model, prompts, args.max_tokens)
        print(f"{batch:>6} {tokens:>10} {seconds:>10.3f} {tokens / seconds:>12.1f}", flush=True)


if __name__ == "__main__":
    main()
