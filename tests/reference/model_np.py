"""Float64 forwards of SDAR (Qwen3), SDAR-MoE (Qwen3-MoE), LLaDA, Fast-dLLM v2 and Dream
(Qwen2: no q/k norm, biases on q/k/v), and LLaDA2-MoE (BailingMoeV2: fused q/k/v, partial RoPE,
dense first layers, sigmoid group-limited routing with an expert bias, a shared expert), without
a KV cache.

Weights are read as fp32 (what the engine computes from) and widened to float64, so the only
difference to the engine is the engine's own fp32 rounding. Layer math: reference/models.md §1.3
(SDAR), §2.2 (LLaDA). FP8 (fp8_np.py): projections stored in e4m3 with scales, or quantized at
load with quantize_fp8, read back as floats, and their input activations quantized on the fly.

Why a full recompute with a segment mask equals the engine's cached decode (docs/decoding.md §1):
give every position x a segment seg(x) and let query p attend key q iff seg(q) <= seg(p).
  * block-causal models (SDAR, SDAR-MoE, Fast-dLLM v2, LLaDA2-MoE): seg(x) = floor(x / B);
  * LLaDA / dLLM-Var, Dream: seg(x) = 0 for the prefilled prompt part (x < num_prefill,
    bidirectional prefill), then one segment per block: seg(x) = 1 + floor((x - num_prefill) / B).
The engine writes the K/V of segment s exactly once for good: the prefill forward (segment 0 of
LLaDA, segments 0..num_prefill/B - 1 of SDAR, each block of which sees the earlier ones and
itself) or the save pass of a committed block, which sees all committed K/V (segments < s)
plus the block itself. By induction over s, every cached K/V equals the K/V that this full
forward computes for the same tokens: both depend only on the tokens of segments <= s through
the same attention pattern. A denoise forward of the current block (the highest segment) sees
the whole cache plus its block, which is again "seg(q) <= seg(p)". Later denoise forwards of a
block overwrite its K/V, so only the save forward's K/V ever reach another block.

Shifted logits (Fast-dLLM v2, Dream; docs/decoding.md §1): position p is sampled from the forward
row of p - 1. block_logits keeps the unshifted rows of the block's own positions (what a forward
computes there); shifted_block_logits and head_logits give the rows that sample the block. With a
prefill that stops at P - B (P a multiple of B), num_prefill is that shorter prefill: the prompt's
last block is then its own segment, as the head step that writes it sees it.
"""

import math

import numpy as np

import config_np
import fp8_np
import safetensors_np


def rms_norm(x, weight, eps):
    """x / sqrt(mean(x^2) + eps) over the last axis, then times the weight."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rope(x, positions, theta):
    """NeoX rotate-half RoPE over the full head_dim: x [T, heads, d], absolute positions [T].

    Dimension i < d/2 is paired with i + d/2 and rotated by angle position * theta^(-2i/d).
    """
    half = x.shape[-1] // 2
    inv_freq = theta ** (-np.arange(half, dtype=np.float64) * 2.0 / x.shape[-1])
    angles = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def partial_rope(x, positions, theta, rotary_dim):
    """RoPE of the first rotary_dim dims of each head only (LLaDA2's partial_rotary_factor): rope()
    of x[..., :rotary_dim], so dim i < rotary_dim/2 pairs with i + rotary_dim/2 at angle
    position * theta^(-2i/rotary_dim); dims >= rotary_dim pass through unchanged."""
    if rotary_dim == x.shape[-1]:
        return rope(x, positions, theta)
    return np.concatenate([rope(x[..., :rotary_dim], positions, theta), x[..., rotary_dim:]],
                          axis=-1)


def attention(q, k, v, allowed):
    """Softmax attention with GQA: q [T, nh, d], k/v [T, nkv, d], allowed [T query, T key].

    Query head h reads kv head h // (nh / nkv); scale 1/sqrt(d). The products are batched
    matmuls (BLAS), so that sequences of a few thousand tokens (blocks of 1024) stay quick.
    """
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k, group, axis=1).transpose(1, 2, 0)  # [h, d, T key]
    v = np.repeat(v, group, axis=1).transpose(1, 0, 2)  # [h, T key, d]
    scores = np.matmul(q.transpose(1, 0, 2), k) / math.sqrt(q.shape[-1])  # [h, T query, T key]
    scores = np.where(allowed[None, :, :], scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return np.matmul(weights, v).transpose(1, 0, 2)


def silu(x):
    return x / (1.0 + np.exp(-x))


def _identity(x):
    return x


def swiglu(x, gate, up, down, quantize_in=_identity, quantize_hidden=_identity):
    """down(silu(gate x) * up x) with [out, in] weight matrices; the quantize_* functions are
    applied to the inputs of gate|up and of down (FP8 activations)."""
    x = quantize_in(x)
    return quantize_hidden(silu(x @ gate.T) * (x @ up.T)) @ down.T


def moe_routing(router_logits, top_k, norm_topk_prob):
    """Per row: softmax over all experts, the top_k (ties: lower expert id), renormalised to
    sum 1 when norm_topk_prob. Returns (expert ids [T, k], weights [T, k])."""
    probs = np.exp(router_logits - router_logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    experts = np.argsort(-probs, axis=-1, kind="stable")[:, :top_k]
    weights = np.take_along_axis(probs, experts, axis=-1)
    if norm_topk_prob:
        weights = weights / weights.sum(axis=-1, keepdims=True)
    return experts, weights


def group_limited_routing(router_logits, top_k, n_group, topk_group, expert_bias=None,
                          routed_scaling_factor=1.0):
    """LLaDA2-MoE's router (BailingMoeV2), per row: scores s = sigmoid(logits); the selection reads
    r = s + expert_bias (r = s without a bias). The E experts form n_group consecutive groups;
    a group's score is the sum of its 2 largest r (its one r for groups of 1); the topk_group
    groups of the largest scores are kept (ties: lower group), and of their experts the top_k
    of the largest r (ties: lower expert id). The weights are the chosen experts' unbiased s,
    divided by their sum (+1e-20) when top_k > 1, times routed_scaling_factor.
    Returns (expert ids [T, k], weights [T, k])."""
    logits = np.asarray(router_logits, dtype=np.float64)
    scores = 1.0 / (1.0 + np.exp(-logits))
    routing = scores if expert_bias is None else scores + np.asarray(expert_bias, np.float64)
    tokens, num_experts = routing.shape
    if num_experts % n_group or not 1 <= topk_group <= n_group:
        raise ValueError(f"{num_experts} experts in {n_group} groups, {topk_group} kept")
    size = num_experts // n_group
    if not 1 <= top_k <= size * topk_group:
        raise ValueError(f"top_k {top_k} of the {size * topk_group} experts of kept groups")
    grouped = np.sort(routing.reshape(tokens, n_group, size), axis=-1)
    group_scores = grouped[..., -min(2, size):].sum(axis=-1)
    groups = np.argsort(-group_scores, axis=-1, kind="stable")[:, :topk_group]
    kept = np.zeros((tokens, n_group), dtype=bool)
    np.put_along_axis(kept, groups, True, axis=-1)
    candidates = np.where(np.repeat(kept, size, axis=-1), routing, -np.inf)
    experts = np.argsort(-candidates, axis=-1, kind="stable")[:, :top_k]
    weights = np.take_along_axis(scores, experts, axis=-1)
    if top_k > 1:
        weights = weights / (weights.sum(axis=-1, keepdims=True) + 1e-20)
    return experts, weights * routed_scaling_factor


def moe_mlp(x, router, experts, top_k, norm_topk_prob, quantize_in=_identity, quantize_hidden=_identity):
    """Sum over each row's routed experts of weight * SwiGLU expert; experts = [(g, u, d)]."""
    chosen, weights = moe_routing(x @ router.T, top_k, norm_topk_prob)
    return weighted_experts(x, chosen, weights, experts, quantize_in, quantize_hidden)


def weighted_experts(x, chosen, weights, experts, quantize_in=_identity, quantize_hidden=_identity):
    """Per row of x: sum of weights[row, i] * SwiGLU expert chosen[row, i]; experts = [(g, u, d)]."""
    out = np.zeros_like(x)
    for row in range(x.shape[0]):
        for expert, weight in zip(chosen[row], weights[row]):
            out[row] += weight * swiglu(x[row:row + 1], *experts[expert], quantize_in, quantize_hidden)[0]
    return out


def activation_quantizer(group):
    """The input quantization of a projection whose weight is FP8 with this activation group
    (0: a scale per row; 128: per row and 128 columns; "tensor": one scale), or none (None)."""
    if group is None:
        return _identity
    return lambda x: fp8_np.fake_quantize(x, group or None)


# Families whose attention has no block condition (the segment rule's second case).
BIDIRECTIONAL_FAMILIES = ("llada", "dream")


def segment_ids(family, num_tokens, num_prefill, block_length):
    """seg(x) for x in [0, num_tokens): see the module comment."""
    x = np.arange(num_tokens)
    if family in BIDIRECTIONAL_FAMILIES:
        return np.where(x < num_prefill, 0, 1 + (x - num_prefill) // block_length)
    return x // block_length


class _WeightReader:
    """Takes named tensors out of a checkpoint, checking their shapes, as float64."""

    def __init__(self, tensors, model_dir, quantize_fp8=False):
        self._tensors = tensors
        self._model_dir = model_dir
        self._quantize_fp8 = quantize_fp8

    def has(self, name):
        return name in self._tensors

    def take(self, name, shape):
        if name not in self._tensors:
            raise ValueError(f"{self._model_dir}: tensor {name} is missing")
        array = self._tensors[name]
        if tuple(array.shape) != tuple(shape):
            raise ValueError(f"{self._model_dir}: tensor {name} has shape {list(array.shape)}, "
                             f"expected {list(shape)}")
        return array.astype(np.float64)

    def take_projection(self, name, shape):
        """(weight, activation group) of a projection: an FP8 checkpoint tensor (its codes
        beside a weight_scale_inv of 128x128 blocks, or a weight_scale per tensor or row) read
        back as floats, a float one quantized per row when quantizing at load, or else the
        float weight with group None."""
        base = name[:name.rindex(".") + 1]
        if base + "weight_scale_inv" in self._tensors:
            return fp8_np.dequantize(self.take(name, shape), self._tensors[base + "weight_scale_inv"], block=128), 128
        if base + "weight_scale" in self._tensors:
            return fp8_np.dequantize(self.take(name, shape), self._tensors[base + "weight_scale"]), 0
        weight = self.take(name, shape)
        if self._quantize_fp8:
            return fp8_np.fake_quantize_weight(self._tensors[name]), 0
        return weight, None


# Per-family tensor names of the pieces every layer has (reference/models.md §1.2, §2.2).
_NAMES = {
    "sdar": dict(embed="model.embed_tokens.weight", final_norm="model.norm.weight",
                 head="lm_head.weight", layer="model.layers.{}.",
                 attn_norm="input_layernorm.weight", q="self_attn.q_proj.weight",
                 k="self_attn.k_proj.weight", v="self_attn.v_proj.weight",
                 o="self_attn.o_proj.weight", q_norm="self_attn.q_norm.weight",
                 k_norm="self_attn.k_norm.weight", mlp_norm="post_attention_layernorm.weight",
                 gate="mlp.gate_proj.weight", up="mlp.up_proj.weight",
                 down="mlp.down_proj.weight", router="mlp.gate.weight",
                 expert="mlp.experts.{}."),
    "llada": dict(embed="model.transformer.wte.weight", final_norm="model.transformer.ln_f.weight",
                  head="model.transformer.ff_out.weight", layer="model.transformer.blocks.{}.",
                  attn_norm="attn_norm.weight", q="q_proj.weight", k="k_proj.weight",
                  v="v_proj.weight", o="attn_out.weight", mlp_norm="ff_norm.weight",
                  gate="ff_proj.weight", up="up_proj.weight", down="ff_out.weight"),
}
_NAMES["sdar_moe"] = _NAMES["efficient_dlm"] = _NAMES["sdar"]
# Qwen2 (Fast-dLLM v2, Dream): SDAR's names without q/k norms, plus the q/k/v biases.
_NAMES["fast_dllm_v2"] = _NAMES["dream"] = dict(
    {k: v for k, v in _NAMES["sdar"].items() if k not in ("q_norm", "k_norm")},
    q_bias="self_attn.q_proj.bias", k_bias="self_attn.k_proj.bias", v_bias="self_attn.v_proj.bias")
# LLaDA2-MoE (modeling_llada2_moe.py): one fused q/k/v matrix (rows: q heads, k heads, v heads);
# the dense MLP of the first layers under SDAR's names, the MoE's under mlp.gate / mlp.experts /
# mlp.shared_experts.
_NAMES["llada2_moe"] = dict(
    embed="model.word_embeddings.weight", final_norm="model.norm.weight", head="lm_head.weight",
    layer="model.layers.{}.", attn_norm="input_layernorm.weight",
    qkv="attention.query_key_value.weight", o="attention.dense.weight",
    q_norm="attention.query_layernorm.weight", k_norm="attention.key_layernorm.weight",
    mlp_norm="post_attention_layernorm.weight", gate="mlp.gate_proj.weight",
    up="mlp.up_proj.weight", down="mlp.down_proj.weight", router="mlp.gate.weight",
    expert_bias="mlp.gate.expert_bias", expert="mlp.experts.{}.", shared="mlp.shared_experts.")
_PROJECTIONS = ("q", "k", "v", "qkv", "o", "gate", "up", "down")
_EXPERT_PARTS = ("gate_proj.weight", "up_proj.weight", "down_proj.weight")


def is_projection(name):
    """Whether a checkpoint tensor of any family is a linear layer's weight (what FP8 quantizes):
    a layer's q / k / v (or fused query_key_value) / o (dense), gate / up / down or an expert's
    (a shared expert's too); never a router or its expert_bias, a norm, the embedding or the head
    (LLaDA's ff_out is the down projection inside a block only), nor a bias (Qwen2's q/k/v biases
    stay in their float dtype)."""
    in_layer = any(names["layer"].split("{}")[0] in name for names in _NAMES.values())
    suffixes = tuple(names[key] for names in _NAMES.values() for key in _PROJECTIONS
                     if key in names) + _EXPERT_PARTS
    return in_layer and name.endswith(suffixes)


class ReferenceModel:
    """A loaded checkpoint; forward() recomputes the whole sequence every call."""

    def __init__(self, config, tensors, model_dir="<memory>", quantize_fp8=False):
        self.config = config
        names = _NAMES[config.family]
        reader = _WeightReader(tensors, model_dir, quantize_fp8)
        hidden = config.hidden_size
        if config.num_heads % config.num_kv_heads:
            raise ValueError(f"{model_dir}: {config.num_heads} attention heads are not a "
                             f"multiple of {config.num_kv_heads} kv heads")
        if not reader.has(names["embed"]):
            raise ValueError(f"{model_dir}: tensor {names['embed']} is missing")
        vocab = tensors[names["embed"]].shape[0]
        self.embed = reader.take(names["embed"], (vocab, hidden))
        if reader.has(names["head"]) or not config.tie_word_embeddings:
            self.head = reader.take(names["head"], (vocab, hidden))
        else:
            self.head = self.embed
        self.final_norm = reader.take(names["final_norm"], (hidden,))
        self.layers = [self._read_layer(reader, names, l) for l in range(config.num_layers)]

    @classmethod
    def from_dir(cls, model_dir, quantize_fp8=False):
        return cls(config_np.load_config(model_dir), safetensors_np.load_checkpoint(model_dir),
                   model_dir, quantize_fp8)

    @property
    def vocab_rows(self):
        return self.head.shape[0]

    def _read_layer(self, reader, names, index):
        c = self.config
        prefix = names["layer"].format(index)
        q_width, kv_width = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
        hidden = c.hidden_size

        def take(key, shape):
            return reader.take(prefix + names[key], shape)

        # fp8[key]: the activation group of an FP8 projection (activation_quantizer); absent
        # for float ones. A stack the engine runs as one product shares its inputs' group.
        fp8 = {}

        def projection(key, shape, group_key=None):
            weight, group = reader.take_projection(prefix + names[key], shape)
            if group is not None:
                fp8[group_key or key] = group
            return weight

        attn_norm = take("attn_norm", (hidden,))
        if "qkv" in names:  # LLaDA2: the fused [q; k; v] rows, split (its FP8 scales are per row
            # or per 128 rows, its activation group one for all three)
            qkv = projection("qkv", (q_width + 2 * kv_width, hidden), "q")
            qkv_parts = dict(q=qkv[:q_width], k=qkv[q_width:q_width + kv_width],
                             v=qkv[q_width + kv_width:])
            if "q" in fp8:
                fp8["k"] = fp8["v"] = fp8["q"]
        else:
            qkv_parts = dict(q=projection("q", (q_width, hidden)), k=projection("k", (kv_width, hidden)),
                             v=projection("v", (kv_width, hidden)))
        layer = dict(attn_norm=attn_norm, **qkv_parts, o=projection("o", (hidden, q_width)),
                     mlp_norm=take("mlp_norm", (hidden,)), fp8=fp8)
        if c.qk_norm:
            layer["q_norm"] = take("q_norm", (c.head_dim,))
            layer["k_norm"] = take("k_norm", (c.head_dim,))
        if c.qkv_bias:  # floats even in an FP8 checkpoint: added after the product
            layer["q_bias"] = take("q_bias", (q_width,))
            layer["k_bias"] = take("k_bias", (kv_width,))
            layer["v_bias"] = take("v_bias", (kv_width,))
        if c.moe_layers[index]:
            width = c.moe_intermediate_size
            layer["router"] = take("router", (c.num_experts, hidden))
            if c.expert_bias:  # LLaDA2's mlp.gate.expert_bias (float32 in the checkpoints)
                layer["expert_bias"] = take("expert_bias", (c.num_experts,))

            def swiglu_weights(module, width):
                parts = []
                for part, shape, group_key in (("gate", (width, hidden), "mlp_in"), ("up", (width, hidden), "mlp_in"),
                                               ("down", (hidden, width), "mlp_hidden")):
                    weight, group = reader.take_projection(module + f"{part}_proj.weight", shape)
                    if group is not None:
                        fp8[group_key] = group
                    parts.append(weight)
                return tuple(parts)

            expert = prefix + names["expert"]
            layer["experts"] = [swiglu_weights(expert.format(e), width) for e in range(c.num_experts)]
            if c.num_shared_experts:  # LLaDA2: one SwiGLU of num_shared_experts experts' width
                layer["shared"] = swiglu_weights(prefix + names["shared"],
                                                 width * c.num_shared_experts)
        else:
            width = c.intermediate_size
            layer["mlp"] = (projection("gate", (width, hidden), "mlp_in"), projection("up", (width, hidden), "mlp_in"),
                            projection("down", (hidden, width), "mlp_hidden"))
        return layer

    def _attention_block(self, layer, x, positions, allowed):
        c = self.config
        tokens = x.shape[0]
        fp8 = layer["fp8"]
        q, k, v = (activation_quantizer(fp8.get(key))(x) @ layer[key].T for key in ("q", "k", "v"))
        if c.qkv_bias:  # Qwen2: the bias joins before RoPE
            q, k, v = q + layer["q_bias"], k + layer["k_bias"], v + layer["v_bias"]
        q = q.reshape(tokens, c.num_heads, c.head_dim)
        k = k.reshape(tokens, c.num_kv_heads, c.head_dim)
        v = v.reshape(tokens, c.num_kv_heads, c.head_dim)
        if c.qk_norm:  # Qwen3, LLaDA2: per-head RMSNorm before RoPE
            q = rms_norm(q, layer["q_norm"], c.rms_norm_eps)
            k = rms_norm(k, layer["k_norm"], c.rms_norm_eps)
        rotary = c.rotary_dim or c.head_dim  # LLaDA2: partial RoPE
        q = partial_rope(q, positions, c.rope_theta, rotary)
        k = partial_rope(k, positions, c.rope_theta, rotary)
        out = attention(q, k, v, allowed).reshape(tokens, -1)
        return activation_quantizer(fp8.get("o"))(out) @ layer["o"].T

    def _mlp_block(self, layer, x):
        fp8 = layer["fp8"]
        quantize_in = activation_quantizer(fp8.get("mlp_in"))
        quantize_hidden = activation_quantizer(fp8.get("mlp_hidden"))
        c = self.config
        if "experts" not in layer:
            return swiglu(x, *layer["mlp"], quantize_in, quantize_hidden)
        if c.router == "sigmoid":  # LLaDA2: group-limited top-k of the biased sigmoid scores
            chosen, weights = group_limited_routing(
                x @ layer["router"].T, c.num_experts_per_tok, c.n_group, c.topk_group,
                layer.get("expert_bias"), c.routed_scaling_factor)
            out = weighted_experts(x, chosen, weights, layer["experts"], quantize_in, quantize_hidden)
        else:
            out = moe_mlp(x, layer["router"], layer["experts"], c.num_experts_per_tok,
                          c.norm_topk_prob, quantize_in, quantize_hidden)
        if "shared" in layer:  # unweighted, on the same input
            out = out + swiglu(x, *layer["shared"], quantize_in, quantize_hidden)
        return out

    def forward(self, tokens, segments, rows=None, hidden_states=None):
        """Logits (float64) of `rows` (default: all) for the sequence `tokens` at positions
        0..T-1, where a query at p attends a key at q iff segments[q] <= segments[p]. A list
        given as hidden_states receives the residual stream after each layer."""
        tokens = np.asarray(tokens, dtype=np.int64)
        bad = tokens[(tokens < 0) | (tokens >= self.embed.shape[0])]
        if bad.size:
            raise ValueError(f"token id {int(bad[0])} is outside the embedding's "
                             f"{self.embed.shape[0]} rows")
        segments = np.asarray(segments)
        allowed = segments[None, :] <= segments[:, None]
        positions = np.arange(tokens.size)
        eps = self.config.rms_norm_eps
        h = self.embed[tokens]
        for layer in self.layers:
            h = h + self._attention_block(layer, rms_norm(h, layer["attn_norm"], eps), positions,
                                          allowed)
            h = h + self._mlp_block(layer, rms_norm(h, layer["mlp_norm"], eps))
            if hidden_states is not None:
                hidden_states.append(h)
        selected = h if rows is None else h[np.asarray(rows, dtype=np.int64)]
        return rms_norm(selected, self.final_norm, eps) @ self.head.T


def block_logits(model, committed_tokens, block_tokens, num_prefill, block_length):
    """Logits [B, V] of the current block's positions, given the committed sequence (prompt
    prefill + committed blocks) before it: what a denoise forward of this block sees. Unshifted
    for every family: row j is the forward row of position q0 + j (q0 = the block's first)."""
    sequence = list(committed_tokens) + list(block_tokens)
    segments = segment_ids(model.config.family, len(sequence), num_prefill, block_length)
    rows = np.arange(len(committed_tokens), len(sequence))
    return model.forward(sequence, segments, rows)


def shifted_block_logits(model, committed_tokens, block_tokens, num_prefill, block_length):
    """Logits [B, V] that sample the block's positions under shifted logits: row j is the row of
    position q0 + j - 1 in the same forward as block_logits. Row 0 is the row of q0 - 1, which
    the segment rule keeps off the block (it equals head_logits); NaN when q0 = 0."""
    sequence = list(committed_tokens) + list(block_tokens)
    start = len(committed_tokens)
    segments = segment_ids(model.config.family, len(sequence), num_prefill, block_length)
    logits = model.forward(sequence, segments, np.arange(max(start - 1, 0), len(sequence) - 1))
    if start == 0:  # position 0 has no row before it (it is a prompt token, never sampled)
        logits = np.vstack([np.full((1, logits.shape[1]), np.nan), logits])
    return logits


def head_logits(model, committed_tokens, num_prefill, block_length):
    """Logits [V] of the head step (docs/decoding.md §1): the row of the last committed position
    q0 - 1 of a forward of the committed sequence alone, which samples the next block's first
    position q0."""
    if not committed_tokens:
        raise ValueError("a head step needs a committed position before the block")
    segments = segment_ids(model.config.family, len(committed_tokens), num_prefill, block_length)
    return model.forward(committed_tokens, segments, [len(committed_tokens) - 1])[0]


def sampling_logits(model, committed_tokens, block_tokens, num_prefill, block_length):
    """The rows a denoise forward samples the block's masked positions from: shifted_block_logits
    for a family with shifted logits, else block_logits."""
    rows = shifted_block_logits if model.config.shifted_logits else block_logits
    return rows(model, committed_tokens, block_tokens, num_prefill, block_length)
