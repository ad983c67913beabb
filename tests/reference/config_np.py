"""Reads a HF model folder's config.json / generation_config.json into one ModelConfig.

Families (reference/models.md): `sdar` (Qwen3 network, HF key names), `sdar_moe` (Qwen3-MoE),
`llada` (OLMo-style key names; dLLM-Var checkpoints are LLaDA checkpoints), and the two Qwen2.5
ports with shifted logits (docs/decoding.md §1): `fast_dllm_v2` (Fast-dLLM v2, block-causal) and
`dream` (Dream, bidirectional). Those two read the Qwen2 keys and always have q/k/v biases.
"""

import json
import os
from dataclasses import dataclass

_FAMILY_BY_MODEL_TYPE = {
    "sdar": "sdar", "sdar_moe": "sdar_moe", "llada": "llada", "Fast_dLLM_Qwen": "fast_dllm_v2",
    "Dream": "dream",
}
_FAMILY_BY_ARCHITECTURE = {
    "SDARForCausalLM": "sdar", "SDARMoeForCausalLM": "sdar_moe", "LLaDAModelLM": "llada",
    "Fast_dLLM_QwenForCausalLM": "fast_dllm_v2", "DreamModel": "dream",
}
# Used when config.json has no mask_token_id (the SDAR and Fast-dLLM v2 HF configs lack it,
# models.md §1.1; Fast-dLLM v2's generation code adds its mask token after Qwen2.5's 151665 ids).
_DEFAULT_MASK_TOKEN_ID = {"sdar": 151669, "sdar_moe": 151669, "llada": 126336,
                          "fast_dllm_v2": 151665, "dream": 151666}
# Used when neither generation_config.json nor config.json names an EOS: Qwen2.5's <|im_end|>
# and <|endoftext|> for Fast-dLLM v2 (an instruct model), <|endoftext|> for Dream.
_DEFAULT_EOS_TOKEN_IDS = {"fast_dllm_v2": (151645, 151643), "dream": (151643,)}
# Block length when config.json has none: Fast-dLLM v2's bd_size default, and a default only for
# Dream, which trains on whole sequences (like LLaDA, whose configs have no such key).
_QWEN2_DEFAULT_BLOCK = 32
_QWEN2_FAMILIES = ("fast_dllm_v2", "dream")


@dataclass(frozen=True)
class ModelConfig:
    family: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int      # dense SwiGLU width (LLaDA: mlp_hidden_size)
    rope_theta: float
    rms_norm_eps: float
    qk_norm: bool               # per-head RMSNorm of q and k before RoPE (SDAR only)
    qkv_bias: bool              # q, k and v projections add a bias (Fast-dLLM v2, Dream)
    shifted_logits: bool        # position p is sampled from the row of p - 1 (decoding.md §1)
    tie_word_embeddings: bool
    moe_layers: tuple           # per layer: True where the MLP is the expert mixture
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    norm_topk_prob: bool
    mask_token_id: int
    eos_token_ids: tuple
    block_size: int | None      # config hint only; a request's block_length decides
    max_positions: int | None


def _read_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _as_id_tuple(value):
    if value is None:
        return ()
    return tuple(int(v) for v in (value if isinstance(value, list) else [value]))


def _family(config, path):
    family = _FAMILY_BY_MODEL_TYPE.get(config.get("model_type"))
    if family is None:
        names = config.get("architectures") or []
        family = next((_FAMILY_BY_ARCHITECTURE[a] for a in names
                       if a in _FAMILY_BY_ARCHITECTURE), None)
    if family is None:
        raise ValueError(f"{path}: unknown architecture (model_type "
                         f"{config.get('model_type')!r}, architectures "
                         f"{config.get('architectures')!r}); expected sdar, sdar_moe, llada, "
                         f"Fast_dLLM_Qwen or Dream")
    return family


def _reject_unsupported(config, path, flags):
    for key, unsupported_value in flags.items():
        if key in config and config[key] == unsupported_value:
            raise ValueError(f"{path}: {key} = {config[key]!r} is not supported")


def _sdar_fields(config, path, family):
    _reject_unsupported(config, path, {"attention_bias": True})
    if config.get("rope_scaling") is not None:
        raise ValueError(f"{path}: rope_scaling {config['rope_scaling']!r} is not supported")
    heads = int(config["num_attention_heads"])
    num_layers = int(config["num_hidden_layers"])
    num_experts = int(config.get("num_experts", 0)) if family == "sdar_moe" else 0
    sparse_step = int(config.get("decoder_sparse_step", 1))
    mlp_only = set(config.get("mlp_only_layers", []))
    # Qwen3-MoE rule: layer l uses experts unless listed in mlp_only_layers, every
    # decoder_sparse_step-th layer counting from 1.
    moe_layers = tuple(num_experts > 0 and l not in mlp_only and (l + 1) % sparse_step == 0
                       for l in range(num_layers))
    return dict(
        hidden_size=int(config["hidden_size"]), num_layers=num_layers, num_heads=heads,
        num_kv_heads=int(config.get("num_key_value_heads", heads)),
        head_dim=int(config.get("head_dim") or config["hidden_size"] // heads),
        intermediate_size=int(config.get("intermediate_size", 0)),
        rope_theta=float(config.get("rope_theta", 1e6)),
        rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)), qk_norm=True, qkv_bias=False,
        shifted_logits=False,
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        moe_layers=moe_layers, num_experts=num_experts,
        num_experts_per_tok=int(config.get("num_experts_per_tok", 0)),
        moe_intermediate_size=int(config.get("moe_intermediate_size", 0)),
        norm_topk_prob=bool(config.get("norm_topk_prob", False)),
        block_size=config.get("block_size"),
        max_positions=config.get("max_position_embeddings"))


def _llada_fields(config, path):
    _reject_unsupported(config, path, {"rope": False, "alibi": True, "include_bias": True,
                                       "attention_layer_norm": True, "scale_logits": True,
                                       "input_emb_norm": True})
    hidden = int(config["d_model"])
    heads = int(config["n_heads"])
    mlp = config.get("mlp_hidden_size") or int(config["mlp_ratio"]) * hidden
    return dict(
        hidden_size=hidden, num_layers=int(config["n_layers"]), num_heads=heads,
        num_kv_heads=int(config.get("n_kv_heads") or heads), head_dim=hidden // heads,
        intermediate_size=int(mlp), rope_theta=float(config.get("rope_theta", 10000.0)),
        rms_norm_eps=float(config.get("rms_norm_eps", 1e-5)), qk_norm=False, qkv_bias=False,
        shifted_logits=False, tie_word_embeddings=bool(config.get("weight_tying", False)),
        moe_layers=(False,) * int(config["n_layers"]), num_experts=0, num_experts_per_tok=0,
        moe_intermediate_size=0, norm_topk_prob=False, block_size=config.get("block_size"),
        max_positions=config.get("max_sequence_length"))


def _is_default_rope_scaling(value):
    """null, or an object naming the "default" rope type (transformers writes both spellings)."""
    if value is None:
        return True
    return isinstance(value, dict) and \
        (value.get("rope_type") if "rope_type" in value else value.get("type")) == "default"


def _qwen2_fields(config, path, family):
    """Fast-dLLM v2 and Dream: Qwen2 keys. Dream's code gives q/k/v biases whatever its
    attention_bias says and derives head_dim from hidden / heads, so attention_bias is not read
    and a head_dim that disagrees is refused; Fast-dLLM v2 reads head_dim like transformers'
    Qwen2 (absent in the real configs)."""
    if config.get("use_sliding_window"):
        raise ValueError(f"{path}: use_sliding_window = {config['use_sliding_window']!r} "
                         f"is not supported")
    if not _is_default_rope_scaling(config.get("rope_scaling")):
        raise ValueError(f"{path}: rope_scaling {config['rope_scaling']!r} is not supported")
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"{path}: hidden_act = {config['hidden_act']!r} is not supported "
                         f"(only silu)")
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    if hidden % heads:
        raise ValueError(f"{path}: hidden_size {hidden} is not a multiple of "
                         f"num_attention_heads {heads}")
    head_dim = hidden // heads
    if family == "dream":
        if config.get("head_dim") is not None and int(config["head_dim"]) != head_dim:
            raise ValueError(f"{path}: head_dim {config['head_dim']} differs from hidden_size / "
                             f"num_attention_heads = {head_dim}, which Dream uses")
        block = config.get("block_size") or _QWEN2_DEFAULT_BLOCK
    else:
        head_dim = int(config.get("head_dim") or head_dim)
        block = config.get("bd_size") or _QWEN2_DEFAULT_BLOCK
    num_layers = int(config["num_hidden_layers"])
    return dict(
        hidden_size=hidden, num_layers=num_layers, num_heads=heads,
        # null is what transformers writes for "as many as the attention heads"
        num_kv_heads=int(config.get("num_key_value_heads") or heads), head_dim=head_dim,
        intermediate_size=int(config["intermediate_size"]),
        rope_theta=float(config.get("rope_theta", 10000.0)),
        rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)), qk_norm=False, qkv_bias=True,
        shifted_logits=True, tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        moe_layers=(False,) * num_layers, num_experts=0, num_experts_per_tok=0,
        moe_intermediate_size=0, norm_topk_prob=False, block_size=int(block),
        max_positions=config.get("max_position_embeddings"))


def load_config(model_dir):
    """ModelConfig of a HF folder; eos ids from generation_config.json, else config.json, else
    the family's default (Fast-dLLM v2, Dream)."""
    path = os.path.join(model_dir, "config.json")
    config = _read_json(path)
    family = _family(config, path)
    try:
        if family == "llada":
            fields = _llada_fields(config, path)
        elif family in _QWEN2_FAMILIES:
            fields = _qwen2_fields(config, path, family)
        else:
            fields = _sdar_fields(config, path, family)
    except KeyError as error:
        raise ValueError(f"{path}: missing key {error.args[0]!r}") from error
    generation_path = os.path.join(model_dir, "generation_config.json")
    generation = _read_json(generation_path) if os.path.exists(generation_path) else {}
    eos = _as_id_tuple(generation.get("eos_token_id", config.get("eos_token_id")))
    mask = config.get("mask_token_id")
    return ModelConfig(
        family=family,
        mask_token_id=int(_DEFAULT_MASK_TOKEN_ID[family] if mask is None else mask),
        eos_token_ids=eos or _DEFAULT_EOS_TOKEN_IDS.get(family, ()), **fields)
