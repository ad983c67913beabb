"""An independent PyTorch SDAR (Qwen3) network, its LLaDA variant and its Qwen2 variant
(Fast-dLLM v2, Dream), their masks, HF-folder I/O and a block-diffusion decoder.

Written from reference/models.md §1-2 and docs/decoding.md, not from the engine. Used by
tools/train_tiny_sdar.py and tools/train_tiny_llada.py (training and evaluating the demo models)
and as the plain-PyTorch eager baseline of the benchmarks (what a user would write without the engine).

    config = load_config(dir)                                  config.json as a dict
    model = SdarModel(config)                                  parameter names = HF checkpoint names
    model = LladaModel(config)                                 the same network, OLMo checkpoint names
    model = Qwen2Model(config)                                 Fast-dLLM v2 / Dream: q/k/v biases, no q/k norms
    logits = model(ids, positions, attn_mask)                  [N, T, V] float32
    logits, kv = model(ids, positions, attn_mask, past_kv, use_cache=True)
    model = load_model(dir, device, dtype); save_model(model, config, out_dir)
    block_causal_mask(T, B), sdar_training_mask(L, B)          bool masks, True = may attend
    dual_stream_mask(segment, inside)                          the training masks of any segments
    completions, forwards = greedy_block_decode(model, prompts, B, S, max_tokens, mask_id, stop_ids
                                                [, dynamic_threshold])

Layer math (models.md §1.3): RMSNorm with fp32 statistics and an fp32 weight multiply (the SDAR
files' flavour), per-head q/k RMSNorm before RoPE, NeoX rotate-half RoPE over the full head_dim,
GQA, SwiGLU, no biases, no logit shift (logits at position i predict token i). LLaDA (models.md
§2.2) is that network without the q/k norms, with head_dim = d_model / n_heads; its RMSNorm casts
before the weight multiply, which differs from this one only in the rounding of bf16 activations.
Qwen2 (Fast-dLLM v2, Dream) is the network without the q/k norms, with biases on q, k and v (added
before RoPE), under SDAR's names; its logits are shifted (position p is predicted by the row of
p - 1), which this module leaves to the caller: the forward returns every position's own row, and
greedy_block_decode refuses such a model.

Checkpoints are read by tests/reference/safetensors_np.py and written by tools/safetensors_io.py
(NumPy only: Debian packages torch but not safetensors).
"""
import json
import math
import os
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import safetensors_io  # noqa: E402
import safetensors_np  # noqa: E402


def load_config(model_dir):
    """config.json of a HF folder, as a dict."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as handle:
        return json.load(handle)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last axis, the statistics in fp32. Qwen3 (SDAR)
    applies the weight in fp32 and casts the product back to x's dtype; LLaDA casts the normalised
    x back first and applies the weight in x's dtype (weight_after_cast)."""

    def __init__(self, dim, eps, weight_after_cast=False):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps
        self.weight_after_cast = weight_after_cast

    def forward(self, x):
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.weight_after_cast:
            return normed.to(x.dtype) * self.weight
        return (normed * self.weight.float()).to(x.dtype)


def rope_cos_sin(positions, head_dim, theta):
    """cos, sin [N, T, 1, head_dim/2] (fp32) of absolute positions [N, T]: frequency i is theta^(-2i/d).

    Angles are formed in float64 so that large positions lose nothing before the cast.
    """
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float64)
                               / head_dim)
    angles = positions.to(torch.float64)[..., None] * inv_freq
    return angles.cos().float()[:, :, None, :], angles.sin().float()[:, :, None, :]


def apply_rope(x, cos, sin):
    """NeoX rotate-half on x [N, T, heads, d]: dimension i < d/2 pairs with i + d/2."""
    half = x.shape[-1] // 2
    first, second = x[..., :half].float(), x[..., half:].float()
    return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1).to(x.dtype)


def _math_attention(q, k, v, attn_mask=None):
    """softmax(q k^T / sqrt(d), where attn_mask (None: every key)) v: what
    F.scaled_dot_product_attention computes, for a torch that predates it (Debian's)."""
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    return scores.softmax(dim=-1).to(v.dtype) @ v


# attention(q, k, v, attn_mask=None): SDPA (flash on the GPU) where torch has it.
attention = getattr(F, "scaled_dot_product_attention", None) or _math_attention


class Attention(nn.Module):
    def __init__(self, config, qk_norm, qkv_bias=False):
        super().__init__()
        hidden = config["hidden_size"]
        self.num_heads = config["num_attention_heads"]
        self.num_kv_heads = config.get("num_key_value_heads") or self.num_heads  # null: MHA
        self.head_dim = config.get("head_dim") or hidden // self.num_heads
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"{self.num_heads} attention heads are not a multiple of "
                             f"{self.num_kv_heads} kv heads")
        eps = config.get("rms_norm_eps", 1e-6)
        self.q_proj = nn.Linear(hidden, self.num_heads * self.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, hidden, bias=False)
        self.qk_norm = qk_norm
        if qk_norm:
            self.q_norm = RMSNorm(self.head_dim, eps)
            self.k_norm = RMSNorm(self.head_dim, eps)

    def forward(self, x, cos, sin, attn_mask, past):
        """x [N, T, H]; past None or (k, v) [N, kv_heads, past, d] (after RoPE). Returns the output
        [N, T, H] and (k, v) extended by this forward's T keys."""
        n, t, _ = x.shape
        q = self.q_proj(x).view(n, t, self.num_heads, self.head_dim)
        k = self.k_proj(x).view(n, t, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).view(n, t, self.num_kv_heads, self.head_dim)
        if self.qk_norm:  # Qwen3: per-head RMSNorm of q and k, then RoPE
            q, k = self.q_norm(q), self.k_norm(k)
        q = apply_rope(q, cos, sin).transpose(1, 2)
        k = apply_rope(k, cos, sin).transpose(1, 2)
        v = v.transpose(1, 2)
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        # GQA: query head h reads kv head h // group.
        group = self.num_heads // self.num_kv_heads
        out = attention(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1), attn_mask)
        return self.o_proj(out.transpose(1, 2).reshape(n, t, -1)), (k, v)


class Mlp(nn.Module):
    def __init__(self, config):
        super().__init__()
        hidden, inter = config["hidden_size"], config["intermediate_size"]
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, config, qk_norm, qkv_bias=False):
        super().__init__()
        eps = config.get("rms_norm_eps", 1e-6)
        self.input_layernorm = RMSNorm(config["hidden_size"], eps)
        self.self_attn = Attention(config, qk_norm, qkv_bias)
        self.post_attention_layernorm = RMSNorm(config["hidden_size"], eps)
        self.mlp = Mlp(config)

    def forward(self, h, cos, sin, attn_mask, past):
        a, kv = self.self_attn(self.input_layernorm(h), cos, sin, attn_mask, past)
        h = h + a
        return h + self.mlp(self.post_attention_layernorm(h)), kv


class SdarModel(nn.Module):
    """The dense SDAR network. Module paths give the HF names: model.embed_tokens.weight,
    model.layers.{i}.self_attn.q_proj.weight, ..., model.norm.weight, lm_head.weight."""

    qk_norm = True
    qkv_bias = False
    shifted_logits = False  # position p predicted by the row of p - 1 (docs/decoding.md §1)
    block_causal = True  # how the engine attends (docs/decoding.md §1); greedy_block_decode follows it

    def __init__(self, config):
        super().__init__()
        if config.get("rope_scaling") is not None:
            raise ValueError(f"rope_scaling {config['rope_scaling']!r} is not supported")
        if not self.qkv_bias and config.get("attention_bias", False):
            raise ValueError("attention_bias = true is not supported (SDAR has no biases)")
        self.config = config
        hidden, vocab = config["hidden_size"], config["vocab_size"]
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(vocab, hidden)
        self.model.layers = nn.ModuleList(DecoderLayer(config, self.qk_norm, self.qkv_bias)
                                          for _ in range(config["num_hidden_layers"]))
        self.model.norm = RMSNorm(hidden, config.get("rms_norm_eps", 1e-6))
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.tied = bool(config.get("tie_word_embeddings", False))
        if self.tied:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.head_dim = self.model.layers[0].self_attn.head_dim
        self.rope_theta = float(config.get("rope_theta", 1e6))

    def init_weights(self, std=0.02):
        """Random init for training from scratch: norms 1, biases 0, matrices N(0, std), the two projections
        that write into the residual stream scaled by 1/sqrt(2 * layers) (GPT-2) so that the
        residual's variance does not grow with depth."""
        residual_std = std / math.sqrt(2 * len(self.model.layers))
        for name, p in self.named_parameters():
            if name.endswith(".bias"):  # Qwen2's q/k/v biases
                nn.init.zeros_(p)
            elif p.dim() == 1:
                nn.init.ones_(p)
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(p, 0.0, residual_std)
            else:
                nn.init.normal_(p, 0.0, std)

    def hidden(self, ids, positions, attn_mask, past_kv=None):
        """Final-normed hidden states [N, T, H] and the per-layer (k, v) caches extended by these
        tokens. ids [N, T]; positions [N, T] (or [1, T], broadcast); attn_mask bool, True = may
        attend, [T, past + T] or [N, T, past + T]; past_kv None or a list of per-layer (k, v)."""
        if attn_mask.dim() == 3:
            attn_mask = attn_mask[:, None]  # one mask for every head
        cos, sin = rope_cos_sin(positions, self.head_dim, self.rope_theta)
        h = self.model.embed_tokens(ids)
        new_kv = []
        for index, layer in enumerate(self.model.layers):
            h, kv = layer(h, cos, sin, attn_mask, None if past_kv is None else past_kv[index])
            new_kv.append(kv)
        return self.model.norm(h), new_kv

    def forward(self, ids, positions, attn_mask, past_kv=None, use_cache=False):
        """Logits [N, T, V] in float32 (and the extended KV cache when use_cache)."""
        h, new_kv = self.hidden(ids, positions, attn_mask, past_kv)
        logits = self.lm_head(h).float()
        return (logits, new_kv) if use_cache else logits

    @staticmethod
    def checkpoint_name(name):
        """The checkpoint's name of the parameter `name`."""
        return name


# LLaDA's OLMo names (models.md §2.2) of SdarModel's module paths: the whole-model tensors, then
# the suffixes after model.layers.{i}. (blocks.{i}. in the checkpoint).
_LLADA_NAMES = {"model.embed_tokens.weight": "model.transformer.wte.weight",
                "model.norm.weight": "model.transformer.ln_f.weight",
                "lm_head.weight": "model.transformer.ff_out.weight"}
_LLADA_LAYER_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "q_proj", "self_attn.k_proj": "k_proj",
                      "self_attn.v_proj": "v_proj", "self_attn.o_proj": "attn_out",
                      "post_attention_layernorm": "ff_norm", "mlp.gate_proj": "ff_proj", "mlp.up_proj": "up_proj",
                      "mlp.down_proj": "ff_out"}
# config.json keys of LLaDA (OLMo) -> the SDAR keys SdarModel reads.
_LLADA_KEYS = {"d_model": "hidden_size", "mlp_hidden_size": "intermediate_size", "n_layers": "num_hidden_layers",
               "n_heads": "num_attention_heads", "n_kv_heads": "num_key_value_heads", "rms_norm_eps": "rms_norm_eps",
               "rope_theta": "rope_theta", "weight_tying": "tie_word_embeddings"}


class LladaModel(SdarModel):
    """LLaDA (models.md §2): the SDAR network without q/k norms, bidirectional in the engine (the
    prefill part attends to all of itself, later blocks as SDAR's), saved and loaded under the
    OLMo names (model.transformer.blocks.{i}.q_proj.weight, ...). config is LLaDA's config.json."""

    qk_norm = False
    block_causal = False

    def __init__(self, config):
        for key in ("rope", "alibi", "include_bias", "attention_layer_norm", "scale_logits", "input_emb_norm"):
            if key in config and config[key] != (key == "rope"):
                raise ValueError(f"LLaDA {key} = {config[key]!r} is not supported")
        keys = {sdar: config[llada] for llada, sdar in _LLADA_KEYS.items() if llada in config}
        keys["vocab_size"] = config.get("embedding_size") or config["vocab_size"]
        keys["head_dim"] = config["d_model"] // config["n_heads"]
        keys.setdefault("rms_norm_eps", 1e-5)  # OLMo's defaults
        keys.setdefault("rope_theta", 10000.0)
        super().__init__(keys)
        self.config = config

    @staticmethod
    def checkpoint_name(name):
        if name in _LLADA_NAMES:
            return _LLADA_NAMES[name]
        layer, dot, rest = name.removeprefix("model.layers.").partition(".")
        module, _, kind = rest.rpartition(".")
        if not (name.startswith("model.layers.") and dot and module in _LLADA_LAYER_NAMES):
            raise ValueError(f"no LLaDA checkpoint name for parameter {name}")
        return f"model.transformer.blocks.{layer}.{_LLADA_LAYER_NAMES[module]}.{kind}"


class Qwen2Model(SdarModel):
    """Fast-dLLM v2 (model_type Fast_dLLM_Qwen, block-causal) and Dream (model_type Dream,
    bidirectional like LLaDA): the Qwen2 network, SDAR's without the q/k norms and with q/k/v
    biases (Dream's code has them whatever its attention_bias says), under SDAR's names plus
    self_attn.{q,k,v}_proj.bias. Logits are shifted: the row of p - 1 predicts p."""

    qk_norm = False
    qkv_bias = True
    shifted_logits = True

    def __init__(self, config):
        for key, allowed in (("use_sliding_window", (False, None)), ("hidden_act", ("silu",))):
            if config.get(key, allowed[0]) not in allowed:
                raise ValueError(f"{key} = {config[key]!r} is not supported")
        scaling = config.get("rope_scaling")
        if scaling is not None and (scaling.get("rope_type") or scaling.get("type")) != "default":
            raise ValueError(f"rope_scaling {scaling!r} is not supported")
        family = model_family(config)
        keys = dict(config, rope_scaling=None)
        if family == "dream":
            keys["head_dim"] = config["hidden_size"] // config["num_attention_heads"]  # what Dream computes
        keys.setdefault("rope_theta", 10000.0)  # Qwen2's default
        super().__init__(keys)
        self.config = config
        self.block_causal = family == "fast_dllm_v2"  # Dream attends like LLaDA


_FAMILIES = {"sdar": "sdar", "llada": "llada", "Fast_dLLM_Qwen": "fast_dllm_v2", "Dream": "dream"}
_FAMILY_BY_ARCHITECTURE = {"SDARForCausalLM": "sdar", "LLaDAModelLM": "llada",
                           "Fast_dLLM_QwenForCausalLM": "fast_dllm_v2", "DreamModel": "dream"}


def model_family(config):
    """sdar, llada, fast_dllm_v2 or dream, by config.json's model_type (architectures when it has
    none; sdar when neither says)."""
    kind = config.get("model_type")
    if kind is None:
        kind = next((_FAMILY_BY_ARCHITECTURE[a] for a in config.get("architectures", [])
                     if a in _FAMILY_BY_ARCHITECTURE), "sdar")
    elif kind in _FAMILIES:
        kind = _FAMILIES[kind]
    else:
        raise ValueError(f"model_type {kind!r} is not supported here (sdar, llada, Fast_dLLM_Qwen, Dream)")
    return kind


def model_class(config):
    """SdarModel, LladaModel or Qwen2Model, by config.json's model_type (architectures when it has none)."""
    return {"llada": LladaModel, "fast_dllm_v2": Qwen2Model, "dream": Qwen2Model}.get(model_family(config), SdarModel)


def load_model(model_dir, device="cuda", dtype=torch.bfloat16):
    """A SdarModel (LladaModel for a LLaDA folder) with the folder's weights (single file or
    sharded), every name checked."""
    config = load_config(model_dir)
    stored = {name: torch.from_numpy(array) for name, array in safetensors_np.load_checkpoint(model_dir).items()}
    model = model_class(config)(config)
    if model.tied and model.checkpoint_name("lm_head.weight") in stored:  # a stored head wins over the flag
        model.lm_head.weight = nn.Parameter(torch.empty_like(model.lm_head.weight))
        model.tied = False
    names = {model.checkpoint_name(name): name for name in model.state_dict()}
    state = {names.get(name, name): tensor for name, tensor in stored.items()}  # unknown names fail below
    if model.tied and "model.embed_tokens.weight" in state:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    model.load_state_dict(state, strict=True)
    return model.to(device=device, dtype=dtype).eval()


_DTYPE_NAMES = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}
_SAFETENSORS_DTYPES = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32"}


def save_model(model, config, out_dir, dtype=torch.bfloat16):
    """Writes config.json (torch_dtype set to dtype) and model.safetensors with the HF names."""
    os.makedirs(out_dir, exist_ok=True)
    # Rounded to dtype by torch, then widened to float32 for the NumPy writer (exact: it stores
    # them back as dtype without further rounding).
    state = {model.checkpoint_name(name): t.detach().to(device="cpu", dtype=dtype).float().numpy()
             for name, t in model.state_dict().items()}
    if model.tied:  # HF stores a tied head once, as the embedding
        del state[model.checkpoint_name("lm_head.weight")]
    safetensors_io.write_safetensors(os.path.join(out_dir, "model.safetensors"), state, _SAFETENSORS_DTYPES[dtype],
                                     metadata={"format": "pt"})
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as handle:
        json.dump(dict(config, torch_dtype=_DTYPE_NAMES[dtype]), handle, indent=2, sort_keys=True)
        handle.write("\n")


def block_causal_mask(length, block, device=None):
    """[T, T] bool: query i sees key j iff j // B <= i // B (bidirectional inside a block)."""
    b = torch.arange(length, device=device) // block
    return b[None, :] <= b[:, None]


def dual_stream_mask(segment, inside):
    """[n, 2L, 2L] bool for the training input [x_noisy ; x_clean] (both halves at positions
    0..L-1), given each position's segment [n, L] and whether it lies inside the example [n, L]:
    a noisy position sees the noisy positions of its own segment and the clean ones of earlier
    segments; a clean one sees the clean positions of its own segment and earlier ones; clean
    never sees noisy. Nothing sees a position outside the example, which sees only itself (a row
    with no key would make NaNs)."""
    query, key = segment[:, :, None], segment[:, None, :]
    keys = inside[:, None, :]
    noisy = torch.cat([(key == query) & keys, (key < query) & keys], dim=2)
    clean = torch.cat([torch.zeros_like(noisy[:, :, :segment.shape[1]]), (key <= query) & keys], dim=2)
    both = torch.cat([noisy, clean], dim=1)
    return both | torch.eye(both.shape[1], dtype=torch.bool, device=both.device)


def sdar_training_mask(length, block, device=None):
    """[2L, 2L] bool for SDAR's training input (models.md §1.4): dual_stream_mask with one segment
    per block of B, so a noisy block sees itself and the clean blocks before it, a clean block the
    clean blocks up to itself."""
    segment = (torch.arange(length, device=device) // block)[None]
    return dual_stream_mask(segment, torch.ones_like(segment, dtype=torch.bool))[0]


def step_counts(block, steps):
    """Scheduled commits per denoise step: B // S, plus one for the first B % S steps."""
    if not 1 <= steps <= block:
        raise ValueError(f"denoising steps must be in [1, {block}], got {steps}")
    return [block // steps + (s < block % steps) for s in range(steps)]


@torch.no_grad()
def greedy_block_decode(model, prompts, block_length, steps, max_tokens, mask_id, stop_ids, dynamic_threshold=None):
    """Greedy block-diffusion decoding (docs/decoding.md), batched: low_confidence_static, or
    low_confidence_dynamic when dynamic_threshold is given.

    prompts: lists of token ids (any lengths). Returns (completions, forwards): per prompt, its
    completion ids, cut right after the first stop token, at most max_tokens; and the forwards the
    engine counts for it (num_forwards: its prefill, if the prompt holds a full block, plus its
    denoise steps). Per sequence: the full prompt blocks are prefilled, block-causally
    (bidirectionally where not model.block_causal: LLaDA; with B > P there is no prefill, pure
    diffusion); the prompt tail starts the first block; each denoise step commits the scheduled
    number of most confident masked positions (the mask token is never a candidate; ties: lower
    position), or with dynamic_threshold every position more confident than it when there are at
    least that many; a block stops once no mask is left; one save forward of the finished block
    writes its K/V. Finished sequences leave the batch. Sequences are left-padded by multiples of
    B so that their blocks line up.
    """
    if model.shifted_logits:
        raise ValueError("greedy_block_decode does not implement shifted logits (head steps, docs/decoding.md §1)")
    B = block_length
    counts = step_counts(B, steps)
    device = next(model.parameters()).device
    stop_set = set(stop_ids)
    prompts = [list(p) for p in prompts]
    n = len(prompts)
    prompt_lens = [len(p) for p in prompts]
    prefills = [(p // B) * B for p in prompt_lens]
    width = max(prefills, default=0)
    pads = [width - f for f in prefills]

    # Prefill of the padded prompt blocks. A pad query sees only itself: a row with no allowed key
    # would make NaNs that leak through the pad keys' K/V.
    kv = None
    valid = torch.tensor([[c >= pad for c in range(width)] for pad in pads], dtype=torch.bool,
                         device=device).reshape(n, width)
    if width > 0:
        prefix = torch.tensor([[mask_id] * pad + p[:f] for p, f, pad in zip(prompts, prefills, pads)],
                              device=device)
        positions = (torch.arange(width, device=device)[None, :]
                     - torch.tensor(pads, device=device)[:, None]).clamp(min=0)
        allowed = valid[:, None, :].expand(n, width, width)
        if model.block_causal:
            allowed = allowed & block_causal_mask(width, B, device)[None]
        allowed = allowed | torch.eye(width, dtype=torch.bool, device=device)[None]
        _, kv = model.hidden(prefix, positions, allowed)

    active = list(range(n))  # prompt index of each batch row
    completions = [[] for _ in range(n)]
    forwards = [int(f > 0) for f in prefills]
    tails = [p[f:] for p, f in zip(prompts, prefills)]
    block = torch.tensor([t + [mask_id] * (B - len(t)) for t in tails], device=device).reshape(n, B)
    masked = torch.tensor([[j >= len(t) for j in range(B)] for t in tails], dtype=torch.bool,
                          device=device).reshape(n, B)
    masks_left = [B - len(t) for t in tails]
    starts = torch.tensor(prefills, device=device)  # absolute position of each row's block
    offsets = torch.arange(B, device=device)
    first_block = True
    while active:
        rows = len(active)
        positions = starts[:, None] + offsets[None, :]
        allowed = torch.cat([valid[:, None, :].expand(rows, B, valid.shape[1]),
                             torch.ones(rows, B, B, dtype=torch.bool, device=device)], dim=2)
        for s, count in enumerate(counts):
            if not any(masks_left):
                break
            for row, left in zip(active, masks_left):
                forwards[row] += left > 0
            logits = model(block, positions, allowed, past_kv=kv)
            logits[..., mask_id] = float("-inf")
            candidate = logits.argmax(dim=-1)  # lowest id on ties
            confidence = logits.softmax(dim=-1).gather(-1, candidate[..., None])[..., 0]
            confidence = confidence.masked_fill(~masked, float("-inf"))
            scheduled = [m if s == len(counts) - 1 else min(count, m) for m in masks_left]  # the last takes all
            order = confidence.argsort(dim=-1, descending=True, stable=True)
            rank = torch.empty_like(order).scatter_(1, order, offsets.expand(rows, B).contiguous())
            take = torch.tensor(scheduled, device=device)
            commit = masked & (rank < take[:, None])
            if dynamic_threshold is not None:
                sure = masked & (confidence > dynamic_threshold)
                commit = torch.where((sure.sum(dim=1) >= take)[:, None], sure, commit)
            block = torch.where(commit, candidate, block)
            masked &= ~commit
            # A static strategy commits exactly what is scheduled: the host knows what is left, no read-back.
            masks_left = masked.sum(dim=1).tolist() if dynamic_threshold is not None else \
                [m - k for m, k in zip(masks_left, scheduled)]
        _, kv = model.hidden(block, positions, allowed, past_kv=kv)  # save forward
        valid = torch.cat([valid, torch.ones(rows, B, dtype=torch.bool, device=device)], dim=1)

        keep = []
        for row, (index, tokens) in enumerate(zip(active, block.tolist())):
            # In the first block, the leading tokens are the prompt's tail, not completion.
            new = tokens[prompt_lens[index] - prefills[index]:] if first_block else tokens
            out = completions[index]
            done = False
            for token in new:
                out.append(token)
                if token in stop_set:
                    done = True
                    break
            if len(out) >= max_tokens:
                del out[max_tokens:]
                done = True
            if not done:
                keep.append(row)
        first_block = False
        if len(keep) < rows:
            index = torch.tensor(keep, dtype=torch.long, device=device)
            kv = [(k[index], v[index]) for k, v in kv]
            valid, starts = valid[index], starts[index]
            active = [active[row] for row in keep]
        rows = len(active)
        starts = starts + B
        block = torch.full((rows, B), mask_id, dtype=torch.long, device=device)
        masked = torch.ones(rows, B, dtype=torch.bool, device=device)
        masks_left = [B] * rows
    return completions, forwards
