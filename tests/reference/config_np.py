"""Reads a HF model folder's config.json / generation_config.json into one ModelConfig.

Families (reference/models.md): `sdar` (Qwen3 network, HF key names), `sdar_moe` (Qwen3-MoE),
`llada` (OLMo-style key names; dLLM-Var checkpoints are LLaDA checkpoints), and the two Qwen2.5
ports with shifted logits (docs/decoding.md §1): `fast_dllm_v2` (Fast-dLLM v2, block-causal) and
`dream` (Dream, bidirectional). Those two read the Qwen2 keys and always have q/k/v biases.
`llada2_moe` (LLaDA2.0 / 2.1: the Ling-2.0 / BailingMoeV2 network, block-causal like SDAR, no
logit shift): fused q/k/v, partial RoPE, dense first layers, then sigmoid-scored experts chosen
group-limited with an expert bias, plus a shared expert.
"""

import json
import os
from dataclasses import dataclass

_FAMILY_BY_MODEL_TYPE = {
    "sdar": "sdar", "sdar_moe": "sdar_moe", "llada": "llada", "Fast_dLLM_Qwen": "fast_dllm_v2",
    "Dream": "dream", "llada2_moe": "llada2_moe",
}
_FAMILY_BY_ARCHITECTURE = {
    "SDARForCausalLM": "sdar", "SDARMoeForCausalLM": "sdar_moe", "LLaDAModelLM": "llada",
    "Fast_dLLM_QwenForCausalLM": "fast_dllm_v2", "DreamModel": "dream",
    "LLaDA2MoeModelLM": "llada2_moe",
    # Efficient-DLM keeps its base model's model_type ("qwen3"): the architecture names it.
    "EfficientDLM": "efficient_dlm",
}
# Used when config.json has no mask_token_id (the SDAR and Fast-dLLM v2 HF configs lack it,
# models.md §1.1; Fast-dLLM v2's generation code adds its mask token after Qwen2.5's 151665 ids).
_DEFAULT_MASK_TOKEN_ID = {"sdar": 151669, "sdar_moe": 151669, "llada": 126336,
                          "fast_dllm_v2": 151665, "dream": 151666, "llada2_moe": 156895,
                          "efficient_dlm": 151662}
# Used when neither generation_config.json nor config.json names an EOS: Qwen2.5's <|im_end|>
# and <|endoftext|> for Fast-dLLM v2 (an instruct model), <|endoftext|> for Dream, LLaDA2's
# <|endoftext|> (156892).
_DEFAULT_EOS_TOKEN_IDS = {"fast_dllm_v2": (151645, 151643), "dream": (151643,),
                          "llada2_moe": (156892,), "efficient_dlm": (151645, 151643)}
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
    qk_norm: bool               # per-head RMSNorm of q and k before RoPE (SDAR, LLaDA2-MoE)
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
    # LLaDA2-MoE only (the defaults are every other family's: full RoPE, softmax routing).
    rotary_dim: int | None = None        # rotated leading dims of each q/k head (None: head_dim)
    router: str = "softmax"              # "softmax" (Qwen3-MoE), "sigmoid" (grouped, biased)
    n_group: int = 1                     # experts in n_group consecutive groups of E / n_group
    topk_group: int = 1                  # groups kept per token
    routed_scaling_factor: float = 1.0   # multiplies the routed experts' weights
    expert_bias: bool = False            # mlp.gate.expert_bias [E] joins the selection scores
    num_shared_experts: int = 0          # shared SwiGLU, moe_intermediate_size * this wide


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
                         f"Fast_dLLM_Qwen, Dream, llada2_moe or EfficientDLM")
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
        block_size=config.get("block_size") or (32 if family == "efficient_dlm" else None),
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


_LLADA2_REFUSED = {"use_qkv_bias": True, "use_bias": True, "using_split_qkv_in_self_attention": True,
                   "norm_topk_prob": False}


def _llada2_fields(config, path):
    """LLaDA2-MoE (BailingMoeV2 keys, modeling_llada2_moe.py). Refuses what the network here does
    not compute: biases, split q/k/v, another score function or activation, rope scaling, a
    grouping that cannot pick num_experts_per_tok experts, or unnormalised top-k weights (the code
    normalises whenever top_k > 1, whatever norm_topk_prob says), or LLaDA2.2's block routing
    (expert_capacity)."""
    _reject_unsupported(config, path, _LLADA2_REFUSED)
    if config.get("expert_capacity") is not None:
        raise ValueError(f"{path}: expert_capacity (LLaDA2.2's block routing) is not supported")
    if config.get("score_function", "sigmoid") != "sigmoid":
        raise ValueError(f"{path}: score_function = {config['score_function']!r} is not supported "
                         f"(only sigmoid)")
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"{path}: hidden_act = {config['hidden_act']!r} is not supported "
                         f"(only silu)")
    if not _is_default_rope_scaling(config.get("rope_scaling")):
        raise ValueError(f"{path}: rope_scaling {config['rope_scaling']!r} is not supported")
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or hidden // heads)
    factor = config.get("partial_rotary_factor")
    rotary_dim = int(head_dim * float(1.0 if factor is None else factor))
    if rotary_dim < 2 or rotary_dim % 2 or rotary_dim > head_dim:
        raise ValueError(f"{path}: partial_rotary_factor {factor!r} gives rotary_dim {rotary_dim} "
                         f"of head_dim {head_dim}; it must be even, >= 2 and <= head_dim")
    if config.get("rotary_dim") is not None and int(config["rotary_dim"]) != rotary_dim:
        raise ValueError(f"{path}: rotary_dim {config['rotary_dim']} differs from head_dim * "
                         f"partial_rotary_factor = {rotary_dim}")
    num_experts = int(config["num_experts"])
    top_k = int(config["num_experts_per_tok"])
    n_group = int(config.get("n_group") or 1)
    topk_group = int(config.get("topk_group") or 1)
    if n_group < 1 or num_experts % n_group:
        raise ValueError(f"{path}: n_group = {n_group} does not divide num_experts = {num_experts}")
    if not 1 <= topk_group <= n_group:
        raise ValueError(f"{path}: topk_group = {topk_group} must be in [1, n_group = {n_group}]")
    if not 1 <= top_k <= num_experts // n_group * topk_group:
        raise ValueError(f"{path}: num_experts_per_tok = {top_k} must be in [1, "
                         f"{num_experts // n_group * topk_group}] (the experts of topk_group "
                         f"groups)")
    num_layers = int(config["num_hidden_layers"])
    dense = int(config.get("first_k_dense_replace") or 0)
    return dict(
        hidden_size=hidden, num_layers=num_layers, num_heads=heads,
        num_kv_heads=int(config.get("num_key_value_heads") or heads), head_dim=head_dim,
        intermediate_size=int(config["intermediate_size"]) if dense else
        int(config.get("intermediate_size") or 0),
        rope_theta=float(config.get("rope_theta", 10000.0)),
        rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
        qk_norm=bool(config.get("use_qk_norm", True)), qkv_bias=False, shifted_logits=False,
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        moe_layers=tuple(l >= dense for l in range(num_layers)), num_experts=num_experts,
        num_experts_per_tok=top_k, moe_intermediate_size=int(config["moe_intermediate_size"]),
        norm_topk_prob=top_k > 1, block_size=int(config.get("block_size") or 32),
        max_positions=config.get("max_position_embeddings"), rotary_dim=rotary_dim,
        router="sigmoid", n_group=n_group, topk_group=topk_group,
        routed_scaling_factor=float(config.get("routed_scaling_factor", 1.0)),
        expert_bias=bool(config.get("moe_router_enable_expert_bias", True)),
        num_shared_experts=int(config.get("num_shared_experts") or 0))


def load_config(model_dir):
    """ModelConfig of a HF folder; eos ids from generation_config.json, else config.json, else
    the family's default (Fast-dLLM v2, Dream, LLaDA2-MoE)."""
    path = os.path.join(model_dir, "config.json")
    config = _read_json(path)
    family = _family(config, path)
    try:
        if family == "llada":
            fields = _llada_fields(config, path)
        elif family in _QWEN2_FAMILIES:
            fields = _qwen2_fields(config, path, family)
        elif family == "llada2_moe":
            fields = _llada2_fields(config, path)
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
