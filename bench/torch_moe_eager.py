#!/usr/bin/env python3
"""The plain HF transformers baseline of SDAR-30B-A3B's MoE decode: per-forward timings of
Qwen3-MoE decoder layers in eager mode, scaled to the whole model.

    python3 bench/torch_moe_eager.py [--batches 1,32,128,256,512] [--layers 4]

Model: SDAR-30B-A3B's shapes (hidden 2048, 32 q / 4 kv heads of 128, 128 experts of width 768,
top-8, norm_topk_prob), `--layers` Qwen3MoeDecoderLayer's of transformers' own Qwen3-MoE with
random bf16 weights on the GPU. A whole 48-layer model (61 GB) with a block decode loop does not
fit in a benchmark call beside the engine's, so this times what dominates: one denoise forward
of a block of B = 4 tokens per sequence through the layers (no attention prefix, no LM head: both
favour the baseline), median of 10 after 3 warm-ups, scaled by 48 / layers. A block of B tokens
takes S = 4 forwards, so tokens/s = batch * B / (S * forward seconds). Needs a CUDA GPU.
"""

import argparse
import statistics
import time

import torch

BLOCK, STEPS, LAYERS = 4, 4, 48
SDAR_30B_A3B = dict(hidden_size=2048, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
                    moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8, norm_topk_prob=True,
                    intermediate_size=6144, vocab_size=151936, rms_norm_eps=1e-6, rope_theta=1000000.0,
                    decoder_sparse_step=1, mlp_only_layers=[])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", default="1,32,128,256,512")
    p.add_argument("--layers", type=int, default=4)
    args = p.parse_args()

    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe import modeling_qwen3_moe as qm

    config = Qwen3MoeConfig(num_hidden_layers=args.layers, **SDAR_30B_A3B)
    config._attn_implementation = "eager"
    with torch.device("cuda"):
        model = qm.Qwen3MoeModel(config).to(torch.bfloat16).eval()
    print(f"HF transformers {__import__('transformers').__version__} Qwen3-MoE eager, {args.layers} layers timed, "
          f"scaled to {LAYERS}; B = {BLOCK}, S = {STEPS}")
    for batch in (int(b) for b in args.batches.split(",")):
        x = torch.randn(batch, BLOCK, config.hidden_size, device="cuda", dtype=torch.bfloat16)
        positions = torch.arange(64, 64 + BLOCK, device="cuda").expand(batch, BLOCK)
        times = []
        with torch.no_grad():
            for i in range(13):
                torch.cuda.synchronize()
                start = time.perf_counter()
                model(inputs_embeds=x, position_ids=positions, use_cache=False)
                torch.cuda.synchronize()
                if i >= 3:
                    times.append(time.perf_counter() - start)
        forward = statistics.median(times) * LAYERS / args.layers
        print(f"batch {batch:4d}: forward {forward * 1e3:9.2f} ms (48 layers)  "
              f"{batch * BLOCK / (STEPS * forward):10.1f} tok/s")


if __name__ == "__main__":
    main()
