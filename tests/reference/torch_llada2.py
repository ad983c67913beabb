"""An independent PyTorch forward of LLaDA2-MoE (LLaDA2.0 / 2.1; the Ling-2.0 / BailingMoeV2 network of
the HF file modeling_llada2_moe.py), for cross-checking model_np's llada2_moe family.

Written in the HF code's own terms, not from model_np: the fused query_key_value viewed as
[T, heads + 2 kv_heads, head_dim] and split by heads, q/k RMSNorm, rotate_half over the first
rotary_dim dims with cos / sin of cat(freqs, freqs), repeat_kv, the gate's group_limited_topk
(topk of the 2 best biased scores per group, topk of the kept groups' experts, weights gathered from
the unbiased sigmoid scores), the experts dispatched by index, the shared expert added. One
sequence, no KV cache, under a boolean attention mask; float64 by default.

    config, weights = load(model_dir)                    config.json dict, {name: tensor}
    logits = forward(config, weights, ids, allowed)      [T, V]; allowed [T, T] bool (query, key)
"""
import json
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import safetensors_np  # noqa: E402


def load(model_dir, dtype=torch.float64):
    """(config.json as a dict, {checkpoint name: tensor of dtype})."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as handle:
        config = json.load(handle)
    weights = {name: torch.from_numpy(array).to(dtype)
               for name, array in safetensors_np.load_checkpoint(model_dir).items()}
    return config, weights


def _rms_norm(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _rotate_half(x):
    x1, x2 = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def _mlp(x, weights, prefix):
    gate, up, down = (weights[prefix + f"{p}_proj.weight"] for p in ("gate", "up", "down"))
    return F.linear(F.silu(F.linear(x, gate)) * F.linear(x, up), down)


def _moe(config, weights, prefix, x):
    num_experts, top_k = config["num_experts"], config["num_experts_per_tok"]
    n_group, topk_group = config.get("n_group") or 1, config.get("topk_group") or 1
    tokens = x.shape[0]
    # The gate routes in fp32 at least (router_dtype fp32), and the experts' weighted sum is taken
    # there too, as the HF code's moe_infer does; float64 stays float64.
    router_dtype = torch.promote_types(x.dtype, torch.float32)
    logits = F.linear(x.to(router_dtype), weights[prefix + "gate.weight"].to(router_dtype))
    scores = torch.sigmoid(logits)
    bias = weights.get(prefix + "gate.expert_bias")
    bias = None if bias is None else bias.to(router_dtype)
    routing = scores + bias if config.get("moe_router_enable_expert_bias", True) else scores
    grouped = routing.view(tokens, n_group, -1)
    group_scores = grouped.topk(min(2, grouped.shape[-1]), dim=-1)[0].sum(dim=-1)
    group_idx = torch.topk(group_scores, k=topk_group, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(tokens, n_group, num_experts // n_group).reshape(tokens, -1)
    _, topk_idx = torch.topk(routing.masked_fill(~score_mask.bool(), float("-inf")), k=top_k, dim=-1)
    topk_weight = torch.gather(scores, 1, topk_idx)
    if top_k > 1:
        topk_weight = topk_weight / (topk_weight.sum(dim=-1, keepdim=True) + 1e-20)
    topk_weight = topk_weight * config.get("routed_scaling_factor", 1.0)
    out = torch.zeros(x.shape, dtype=router_dtype)
    for expert in range(num_experts):
        token, slot = torch.nonzero(topk_idx == expert, as_tuple=True)
        if token.numel():
            expert_out = _mlp(x[token], weights, f"{prefix}experts.{expert}.").to(router_dtype)
            out[token] += topk_weight[token, slot, None] * expert_out
    out = out.to(x.dtype)
    if config.get("num_shared_experts"):
        out = out + _mlp(x, weights, prefix + "shared_experts.")
    return out


def forward(config, weights, ids, allowed):
    """Logits [T, V] of the token ids [T] at positions 0..T-1; allowed[query, key] says who attends whom."""
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or hidden // heads
    rotary = int(head_dim * config.get("partial_rotary_factor", 1.0))
    eps, theta = config.get("rms_norm_eps", 1e-6), config.get("rope_theta", 10000.0)
    dtype = weights["model.word_embeddings.weight"].dtype
    ids = torch.as_tensor(ids)
    tokens = ids.shape[0]
    inv_freq = 1.0 / theta ** (torch.arange(0, rotary, 2, dtype=torch.float64) / rotary)
    freqs = torch.arange(tokens, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(dtype)[:, None, :], emb.sin().to(dtype)[:, None, :]  # [T, 1, rotary]
    allowed = torch.as_tensor(allowed, dtype=torch.bool)
    h = weights["model.word_embeddings.weight"][ids]
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        x = _rms_norm(h, weights[p + "input_layernorm.weight"], eps)
        qkv = F.linear(x, weights[p + "attention.query_key_value.weight"]).view(tokens, heads + 2 * kv_heads, head_dim)
        q, k, v = qkv.split([heads, kv_heads, kv_heads], dim=-2)
        if config.get("use_qk_norm", True):
            q = _rms_norm(q, weights[p + "attention.query_layernorm.weight"], eps)
            k = _rms_norm(k, weights[p + "attention.key_layernorm.weight"], eps)
        q = torch.cat([q[..., :rotary] * cos + _rotate_half(q[..., :rotary]) * sin, q[..., rotary:]], dim=-1)
        k = torch.cat([k[..., :rotary] * cos + _rotate_half(k[..., :rotary]) * sin, k[..., rotary:]], dim=-1)
        group = heads // kv_heads  # repeat_kv: kv head j serves query heads j * group .. (j + 1) * group - 1
        k = k[:, :, None, :].expand(tokens, kv_heads, group, head_dim).reshape(tokens, heads, head_dim)
        v = v[:, :, None, :].expand(tokens, kv_heads, group, head_dim).reshape(tokens, heads, head_dim)
        scores = torch.einsum("qhd,khd->hqk", q, k) / head_dim ** 0.5
        attn = scores.masked_fill(~allowed[None], float("-inf")).softmax(dim=-1)
        out = torch.einsum("hqk,khd->qhd", attn, v).reshape(tokens, heads * head_dim)
        h = h + F.linear(out, weights[p + "attention.dense.weight"])
        x = _rms_norm(h, weights[p + "post_attention_layernorm.weight"], eps)
        if layer < (config.get("first_k_dense_replace") or 0):
            h = h + _mlp(x, weights, p + "mlp.")
        else:
            h = h + _moe(config, weights, p + "mlp.", x)
    h = _rms_norm(h, weights["model.norm.weight"], eps)
    head = weights.get("lm_head.weight")
    return F.linear(h, weights["model.word_embeddings.weight"] if head is None else head)
