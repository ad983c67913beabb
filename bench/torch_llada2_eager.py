#!/usr/bin/env python3
"""The plain PyTorch baseline of LLaDA2.0-mini's decode: per-forward timings of its layers in
eager mode, scaled to the whole model.

    python3 bench/torch_llada2_eager.py [--batches 1,128] [--moe-layers 3]

LLaDA2's modeling code is not in transformers (its checkpoints run it as remote code), so the
layers are tests/reference/torch_llada2.py's, the PyTorch forward written from that code and
checked against the engine (tests/gpu/llada2_parity.py): its dense MLP, and its MoE with the
sigmoid group-limited router, the experts run one after another over the tokens routed to each
(as the HF code's moe_infer does) and the shared expert; attention is batched per sequence here.
Shapes: LLaDA2.0-mini's (hidden 2048, 16 q / 4 kv heads of 128 with half-rotated RoPE, one dense
layer of width 5120, then 19 MoE layers of 256 experts of width 512, top-8 in 4 of 8 groups, one
shared expert), random bf16 weights on the GPU. Timed: one denoise forward of a block of B = 32
tokens per sequence through the dense layer and `--moe-layers` MoE layers (no attention prefix,
no LM head: both favour the baseline), median of 10 after 3 warm-ups, the MoE layers scaled to
19. A block of B = 32 tokens takes S = 32 forwards (bench/run_gpu.sh llada2), so tokens/s =
batch / forward seconds. Needs a CUDA GPU.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "reference"))
import torch_llada2  # noqa: E402

BLOCK, STEPS, MOE_LAYERS = 32, 32, 19
LLADA2_MINI = dict(hidden_size=2048, num_attention_heads=16, num_key_value_heads=4, head_dim=128,
                   partial_rotary_factor=0.5, intermediate_size=5120, num_experts=256, num_experts_per_tok=8,
                   n_group=8, topk_group=4, moe_intermediate_size=512, num_shared_experts=1,
                   routed_scaling_factor=2.5, rms_norm_eps=1e-6, rope_theta=600000.0)


def layer_weights(c, prefix, moe):
    """Random bf16 weights of one layer, by the checkpoint's names."""
    h, hd = c["hidden_size"], c["head_dim"]
    heads, kv = c["num_attention_heads"], c["num_key_value_heads"]
    w = {prefix + "input_layernorm.weight": torch.ones(h), prefix + "post_attention_layernorm.weight": torch.ones(h),
         prefix + "attention.query_key_value.weight": torch.randn((heads + 2 * kv) * hd, h) * 0.02,
         prefix + "attention.query_layernorm.weight": torch.ones(hd),
         prefix + "attention.key_layernorm.weight": torch.ones(hd),
         prefix + "attention.dense.weight": torch.randn(h, heads * hd) * 0.02}

    def mlp(p, width):
        w.update({p + "gate_proj.weight": torch.randn(width, h) * 0.02, p + "up_proj.weight": torch.randn(width, h) * 0.02,
                  p + "down_proj.weight": torch.randn(h, width) * 0.02})

    if not moe:
        mlp(prefix + "mlp.", c["intermediate_size"])
        return w
    w[prefix + "mlp.gate.weight"] = torch.randn(c["num_experts"], h) * 0.02
    w[prefix + "mlp.gate.expert_bias"] = torch.zeros(c["num_experts"], dtype=torch.float32)
    for e in range(c["num_experts"]):
        mlp(f"{prefix}mlp.experts.{e}.", c["moe_intermediate_size"])
    mlp(prefix + "mlp.shared_experts.", c["moe_intermediate_size"] * c["num_shared_experts"])
    return w


def layer(c, w, prefix, moe, h, cos, sin):
    """One decoder layer over h [batch, B, hidden], attention within each sequence's block."""
    batch, tokens, hidden = h.shape
    heads, kv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    rotary = cos.shape[-1]
    eps = c["rms_norm_eps"]
    x = torch_llada2._rms_norm(h, w[prefix + "input_layernorm.weight"], eps)
    qkv = torch.nn.functional.linear(x, w[prefix + "attention.query_key_value.weight"])
    q, k, v = qkv.view(batch, tokens, heads + 2 * kv, hd).split([heads, kv, kv], dim=-2)
    q = torch_llada2._rms_norm(q, w[prefix + "attention.query_layernorm.weight"], eps)
    k = torch_llada2._rms_norm(k, w[prefix + "attention.key_layernorm.weight"], eps)
    rope = lambda t: torch.cat([t[..., :rotary] * cos + torch_llada2._rotate_half(t[..., :rotary]) * sin,  # noqa: E731
                                t[..., rotary:]], dim=-1)
    q, k = rope(q), rope(k)
    k, v = (t.repeat_interleave(heads // kv, dim=2) for t in (k, v))
    attn = (torch.einsum("bqhd,bkhd->bhqk", q, k) / hd ** 0.5).softmax(dim=-1)
    out = torch.einsum("bhqk,bkhd->bqhd", attn, v).reshape(batch, tokens, heads * hd)
    h = h + torch.nn.functional.linear(out, w[prefix + "attention.dense.weight"])
    x = torch_llada2._rms_norm(h, w[prefix + "post_attention_layernorm.weight"], eps).reshape(batch * tokens, hidden)
    mlp = torch_llada2._moe(c, w, prefix + "mlp.", x) if moe else torch_llada2._mlp(x, w, prefix + "mlp.")
    return h + mlp.view(batch, tokens, hidden)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", default="1,128")
    p.add_argument("--moe-layers", type=int, default=3)
    args = p.parse_args()
    c = LLADA2_MINI
    torch.set_default_device("cuda")
    torch.set_default_dtype(torch.bfloat16)
    weights = layer_weights(c, "model.layers.0.", moe=False)
    for i in range(1, 1 + args.moe_layers):
        weights.update(layer_weights(c, f"model.layers.{i}.", moe=True))
    rotary = int(c["head_dim"] * c["partial_rotary_factor"])
    inv_freq = 1.0 / c["rope_theta"] ** (torch.arange(0, rotary, 2, dtype=torch.float32) / rotary)
    freqs = torch.arange(64, 64 + BLOCK, dtype=torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().bfloat16()[:, None, :], emb.sin().bfloat16()[:, None, :]
    print(f"PyTorch {torch.__version__} eager, LLaDA2.0-mini layers (tests/reference/torch_llada2.py): the dense "
          f"layer and {args.moe_layers} MoE layers timed, scaled to {MOE_LAYERS}; B = {BLOCK}, S = {STEPS}")
    for batch in (int(b) for b in args.batches.split(",")):
        h0 = torch.randn(batch, BLOCK, c["hidden_size"])
        dense_times, moe_times = [], []
        with torch.no_grad():
            for i in range(13):
                torch.cuda.synchronize()
                start = time.perf_counter()
                h = layer(c, weights, "model.layers.0.", False, h0, cos, sin)
                torch.cuda.synchronize()
                middle = time.perf_counter()
                for j in range(1, 1 + args.moe_layers):
                    h = layer(c, weights, f"model.layers.{j}.", True, h, cos, sin)
                torch.cuda.synchronize()
                if i >= 3:
                    dense_times.append(middle - start)
                    moe_times.append((time.perf_counter() - middle) / args.moe_layers)
        forward = statistics.median(dense_times) + MOE_LAYERS * statistics.median(moe_times)
        print(f"batch {batch:4d}: forward {forward * 1e3:9.2f} ms (20 layers)  "
              f"{batch * BLOCK / (STEPS * forward):10.1f} tok/s")


if __name__ == "__main__":
    main()
