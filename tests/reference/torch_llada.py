"""An independent PyTorch LLaDA network and LLaDA's own generate: the whole canvas every step.

Written from reference/models.md §2 (config keys, weight names, block math, generate), not from
the engine. The plain-PyTorch peer of the LLaDA benchmarks (bench/torch_llada_generate.py): the
decode LLaDA's users run without an engine (HF-style network, bidirectional attention, no KV cache).

    model = LladaModel(config)          config.json keys of LLaDA; parameter names = HF checkpoint names
    model.init_weights()                random weights (norms 1, matrices N(0, 0.02))
    logits = model(ids)                 [N, T, V] in the weights' dtype, positions 0..T-1
    x, forwards = generate(model, prompts, steps, gen_length, block_length, mask_id)

Layer math (models.md §2.2): RMSNorm with fp32 statistics, cast back, then times the weight; NeoX
rotate-half RoPE over the full head_dim in fp32 (torch_sdar's); attention with no mask at all
(bidirectional over the whole input); SwiGLU with ff_proj as the gate; no biases; a separate
head; no logit shift.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_sdar import RMSNorm, apply_rope, attention, rope_cos_sin

# Config flags this network does not implement, with the value that would need them (models.md §2.1).
_UNSUPPORTED = {"rope": False, "alibi": True, "include_bias": True, "include_qkv_bias": True,
                "attention_layer_norm": True, "scale_logits": True, "input_emb_norm": True,
                "weight_tying": True}


class Block(nn.Module):
    """One LLaDALlamaBlock: model.transformer.blocks.{i}.*"""

    def __init__(self, config):
        super().__init__()
        hidden, eps = config["d_model"], config.get("rms_norm_eps", 1e-5)
        self.num_heads = config["n_heads"]
        self.num_kv_heads = config.get("n_kv_heads") or self.num_heads
        self.head_dim = hidden // self.num_heads
        inter = config.get("mlp_hidden_size") or config["mlp_ratio"] * hidden
        kv_width = self.num_kv_heads * self.head_dim
        self.attn_norm = RMSNorm(hidden, eps, weight_after_cast=True)
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, kv_width, bias=False)
        self.v_proj = nn.Linear(hidden, kv_width, bias=False)
        self.attn_out = nn.Linear(hidden, hidden, bias=False)
        self.ff_norm = RMSNorm(hidden, eps, weight_after_cast=True)
        self.ff_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.ff_out = nn.Linear(inter, hidden, bias=False)

    def forward(self, h, cos, sin):
        n, t, _ = h.shape
        x = self.attn_norm(h)
        q = apply_rope(self.q_proj(x).view(n, t, self.num_heads, self.head_dim), cos, sin).transpose(1, 2)
        k = apply_rope(self.k_proj(x).view(n, t, self.num_kv_heads, self.head_dim), cos, sin).transpose(1, 2)
        v = self.v_proj(x).view(n, t, self.num_kv_heads, self.head_dim).transpose(1, 2)
        group = self.num_heads // self.num_kv_heads  # 1 for LLaDA-8B (MHA)
        if group > 1:
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        a = attention(q, k, v)  # every query sees every key
        h = h + self.attn_out(a.transpose(1, 2).reshape(n, t, -1))
        x = self.ff_norm(h)
        return h + self.ff_out(F.silu(self.ff_proj(x)) * self.up_proj(x))


class LladaModel(nn.Module):
    """The LLaDA network. Module paths give the HF names: model.transformer.wte.weight,
    model.transformer.blocks.{i}.q_proj.weight, ..., model.transformer.ln_f.weight,
    model.transformer.ff_out.weight (the head)."""

    def __init__(self, config):
        super().__init__()
        for key, bad in _UNSUPPORTED.items():
            if config.get(key, not bad) == bad:
                raise ValueError(f"config {key} = {bad!r} is not supported")
        hidden = config["d_model"]
        rows = config.get("embedding_size") or config["vocab_size"]
        self.model = nn.Module()
        t = self.model.transformer = nn.Module()
        t.wte = nn.Embedding(rows, hidden)
        t.blocks = nn.ModuleList(Block(config) for _ in range(config["n_layers"]))
        t.ln_f = RMSNorm(hidden, config.get("rms_norm_eps", 1e-5), weight_after_cast=True)
        t.ff_out = nn.Linear(hidden, rows, bias=False)
        self.head_dim = t.blocks[0].head_dim
        self.rope_theta = float(config.get("rope_theta", 10000.0))

    def init_weights(self, std=0.02):
        """Random weights for speed runs: norms 1, every matrix N(0, std)."""
        for p in self.parameters():
            if p.dim() == 1:
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, ids):
        """Logits [N, T, V] of ids [N, T] at positions 0..T-1 (LLaDA takes no position ids)."""
        t = self.model.transformer
        positions = torch.arange(ids.shape[1], device=ids.device)[None]
        cos, sin = rope_cos_sin(positions, self.head_dim, self.rope_theta)
        h = t.wte(ids)
        for block in t.blocks:
            h = block(h, cos, sin)
        return t.ff_out(t.ln_f(h))


def transfer_counts(masks, steps):
    """LLaDA's per-step commits of a block: masks // steps each, one more for the first
    masks % steps steps. masks [N] (masked positions of each row's block) -> [N][steps] ints."""
    extra = torch.arange(steps, device=masks.device)[None, :] < (masks % steps)[:, None]
    return ((masks // steps)[:, None] + extra).tolist()


@torch.no_grad()
def generate(model, prompts, steps, gen_length, block_length, mask_id, max_forwards=None):
    """LLaDA's generate (models.md §2.3), greedy (temperature 0), low-confidence remasking, no CFG.

    prompts [N, P] (one length, no padding). The canvas is the prompt then gen_length masks, in
    gen_length / block_length blocks, each given steps / blocks steps. Every step forwards the whole
    canvas; each row's candidate is the argmax of its logits (the mask token included, as in
    LLaDA), its confidence the softmax probability of it; the step commits, per row, the most
    confident masked positions before the current block's end, as many as the block's schedule
    says. Returns (canvas [N, P + gen_length], forwards run); max_forwards stops after that many
    (for timing a few steps of a long decode: every step costs the same).
    """
    n, p = prompts.shape
    if gen_length % block_length:
        raise ValueError(f"gen_length {gen_length} is not a multiple of block_length {block_length}")
    num_blocks = gen_length // block_length
    if steps % num_blocks:
        raise ValueError(f"steps {steps} is not a multiple of the {num_blocks} blocks")
    per_block = steps // num_blocks
    x = torch.full((n, p + gen_length), mask_id, dtype=torch.long, device=prompts.device)
    x[:, :p] = prompts
    forwards = 0
    for b in range(num_blocks):
        end = p + (b + 1) * block_length
        counts = transfer_counts((x[:, end - block_length:end] == mask_id).sum(dim=1), per_block)
        for s in range(per_block):
            if forwards == max_forwards:
                return x, forwards
            masked = x == mask_id
            logits = model(x)
            candidate = logits.argmax(dim=-1)
            confidence = logits.softmax(dim=-1).gather(-1, candidate[..., None])[..., 0]
            confidence[:, end:] = -torch.inf
            confidence = torch.where(masked, confidence, -torch.inf)
            commit = torch.zeros_like(masked)
            for row in range(n):  # LLaDA's top-k, row by row (rows may have different counts)
                commit[row, confidence[row].topk(counts[row][s]).indices] = True
            x[commit] = candidate[commit]
            forwards += 1
    return x, forwards
