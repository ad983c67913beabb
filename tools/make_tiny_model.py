#!/usr/bin/python3
"""Writes a tiny random model as a complete HuggingFace folder, for tests and benchmarks.

    make_tiny_model.py --arch {sdar,sdar_moe,llada,fast_dllm_v2,dream,llada2_moe} --out DIR [--seed N]
        [--vocab small|qwen3 | --tokenizer DIR]
        [--layers L --hidden H --heads N --kv-heads K --head-dim D --intermediate I]
        [--experts E --top-k K --moe-intermediate M] [--block-size B] [--dtype bf16|f16|f32] [--shards K]
        [--n-group G --topk-group TG --shared-experts S --first-dense F --rotary-factor R]  (llada2_moe)
        [--vocab-size ROWS] [--mask-token-id ID] [--no-weights]

fast_dllm_v2 (Fast-dLLM v2) and dream (Dream) are Qwen2.5 networks: SDAR's without q/k norms, with q/k/v
biases, head_dim = hidden / heads by default (Dream: always). Fast-dLLM v2's block size is its bd_size key;
Dream's config has none (--block-size refused, as for llada). Their real configs lack mask_token_id
(Fast-dLLM v2) or carry it (Dream): fast_dllm_v2 writes it only where the vocabulary's mask is not the
family's default 151665 (always, for the small and qwen3 vocabularies, whose masks sit elsewhere).
llada2_moe (LLaDA2.0 / 2.1, the BailingMoeV2 network of modeling_llada2_moe.py): fused query_key_value,
q/k norms, partial RoPE (head_dim default 32, --rotary-factor 0.5: 16 rotated dims), --first-dense dense
layers (default 1, width --intermediate), then MoE layers of --experts experts in --n-group groups (defaults
8 in 4), --topk-group 2 groups kept, --top-k 2, sigmoid scores with a random expert_bias (std EXPERT_BIAS_STD,
stored as F32 whatever --dtype, as the real checkpoints keep it), routed_scaling_factor 2.5, and
--shared-experts 1 shared expert of --moe-intermediate times that width.
Output: config.json (the keys the real checkpoints use, reference/models.md), generation_config.json,
model.safetensors (or K shards + model.safetensors.index.json), tokenizer.json, tokenizer_config.json.
--tokenizer DIR copies a tokenizer folder with SDAR's added tokens instead (e.g. models/sdar-tiny-arith,
whose ChatML tokenizer the demo models of both families share: a random model with a demo model's
tokenizer and layout, to exercise its harness before the trained weights exist).
Weights are random but deterministic for a seed (NumPy PCG64), scaled so that logits have a standard
deviation of about 2: the output distribution of a tiny model is neither flat nor one-hot.
--no-weights writes everything but the safetensors (seconds instead of minutes at SDAR-4B's shapes),
for the engine's `load_format` "dummy", which makes random weights of config.json's shapes itself.
--vocab-size and --mask-token-id give a small tokenizer a real model's embedding rows and mask id
(e.g. LLaDA-8B's 126464 and 126336), for benchmarks of its shapes: rows past the tokenizer decode
to nothing.
NumPy only: no torch, no network.
"""
import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import safetensors_io  # noqa: E402
import tiny_tokenizer  # noqa: E402

ARCHS = ("sdar", "sdar_moe", "llada", "fast_dllm_v2", "dream", "llada2_moe")
QWEN2_ARCHS = ("fast_dllm_v2", "dream")
FAST_DLLM_V2_MASK = 151665  # the mask id Fast-dLLM v2 uses when config.json has none
DTYPES = {"bf16": ("BF16", "bfloat16"), "f16": ("F16", "float16"), "f32": ("F32", "float32")}
LOGIT_STD = 2.0  # target standard deviation of the logits
NORM_NOISE = 0.05  # norm weights are 1 + NORM_NOISE * N(0, 1)
BIAS_STD = 0.5  # q/k/v biases: N(0, BIAS_STD^2), large enough that a forward without them differs
# LLaDA2's router expert_bias: N(0, EXPERT_BIAS_STD^2) against sigmoid scores in (0, 1) of router logits
# of std ~1, so that it changes some tokens' expert (and group) choice but not most.
EXPERT_BIAS_STD = 0.1
LLADA2_ROUTED_SCALING = 2.5  # routed_scaling_factor of LLaDA2.0-mini / -flash


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", choices=ARCHS, required=True)
    p.add_argument("--out", required=True, help="output directory (created)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vocab", choices=("small", "qwen3"), default="small")
    p.add_argument("--tokenizer", help="tokenizer folder with SDAR's added tokens to copy (instead of --vocab)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, help="default 2 (llada: = heads)")
    p.add_argument("--head-dim", type=int,
                   help="default 16 (llada, fast_dllm_v2, dream: hidden / heads; llada2_moe: 32)")
    p.add_argument("--intermediate", type=int, default=128)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--moe-intermediate", type=int, default=32)
    p.add_argument("--n-group", type=int, default=4, help="llada2_moe: expert groups (n_group)")
    p.add_argument("--topk-group", type=int, default=2, help="llada2_moe: groups kept per token (topk_group)")
    p.add_argument("--shared-experts", type=int, default=1, help="llada2_moe: num_shared_experts (0: none)")
    p.add_argument("--first-dense", type=int, default=1,
                   help="llada2_moe: first_k_dense_replace, the leading layers with a dense MLP")
    p.add_argument("--rotary-factor", type=float, default=0.5,
                   help="llada2_moe: partial_rotary_factor (rotary_dim = head_dim * it)")
    p.add_argument("--block-size", type=int,
                   help="default 4; sdar, sdar_moe, fast_dllm_v2 (bd_size) and llada2_moe only (LLaDA and Dream "
                        "configs have no such key)")
    p.add_argument("--dtype", choices=DTYPES, default="bf16")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--vocab-size", type=int,
                   help="embedding rows (config vocab_size), at least the tokenizer's size (default: the tokenizer's "
                        "size rounded up to 64; qwen3: 151936)")
    p.add_argument("--mask-token-id", type=int, help="config mask_token_id, below the rows (default: the tokenizer's mask)")
    p.add_argument("--no-weights", action="store_true", help="config and tokenizer only (load_format dummy)")
    args = p.parse_args(argv)
    llada = args.arch == "llada"
    if args.kv_heads is None:
        args.kv_heads = args.heads if llada else 2
    if args.head_dim is None:
        args.head_dim = args.hidden // args.heads if llada or args.arch in QWEN2_ARCHS else \
            32 if args.arch == "llada2_moe" else 16
    if args.block_size is None:
        args.block_size = 4
    elif llada or args.arch == "dream":
        p.error("--block-size applies to sdar, sdar_moe, fast_dllm_v2 and llada2_moe only")
    sizes = ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "experts", "top_k",
             "moe_intermediate", "block_size", "shards")
    for name in sizes:
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if args.heads % args.kv_heads:
        p.error("--heads must be a multiple of --kv-heads")
    if args.arch in ("llada", "dream") and args.head_dim * args.heads != args.hidden:
        p.error(f"{args.arch}: --head-dim must equal --hidden / --heads")
    if args.tokenizer is not None and args.vocab != "small":
        p.error("--tokenizer replaces --vocab: give one of them")
    if args.top_k > args.experts:
        p.error("--top-k must not exceed --experts")
    if args.arch == "llada2_moe":
        check_llada2_args(p, args)
    return args


def check_llada2_args(p, args):
    """The grouping and partial RoPE that config_np (and the engine) accept."""
    if args.n_group <= 0 or args.experts % args.n_group:
        p.error("--n-group must be positive and divide --experts")
    if not 1 <= args.topk_group <= args.n_group:
        p.error("--topk-group must be in [1, --n-group]")
    if args.top_k > args.experts // args.n_group * args.topk_group:
        p.error("--top-k must not exceed the experts of --topk-group groups")
    if args.shared_experts < 0 or args.first_dense < 0:
        p.error("--shared-experts and --first-dense must not be negative")
    rotary = int(args.head_dim * args.rotary_factor)
    if rotary < 2 or rotary % 2 or rotary > args.head_dim:
        p.error(f"--rotary-factor {args.rotary_factor} gives rotary_dim {rotary} of head_dim {args.head_dim}: "
                "it must be even, >= 2 and <= head_dim")


def sdar_config(args, vocab, torch_dtype):
    moe = args.arch == "sdar_moe"
    config = {
        "architectures": ["SDARMoeForCausalLM" if moe else "SDARForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_sdar_moe.SDARMoeConfig" if moe else "configuration_sdar.SDARConfig",
            "AutoModel": "modeling_sdar_moe.SDARMoeModel" if moe else "modeling_sdar.SDARModel",
            "AutoModelForCausalLM": "modeling_sdar_moe.SDARMoeForCausalLM" if moe else "modeling_sdar.SDARForCausalLM",
        },
        "attention_bias": False,
        "attention_dropout": 0.0,
        "block_size": args.block_size,
        "bos_token_id": vocab.bos,
        "eos_token_id": vocab.eos,
        "head_dim": args.head_dim,
        "hidden_act": "silu",
        "hidden_size": args.hidden,
        "initializer_range": 0.02,
        "intermediate_size": args.intermediate,
        "mask_token_id": vocab.mask,
        "max_position_embeddings": 32768,
        "max_window_layers": args.layers,
        "model_type": args.arch,
        "num_attention_heads": args.heads,
        "num_hidden_layers": args.layers,
        "num_key_value_heads": args.kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": torch_dtype,
        "transformers_version": "4.51.0",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": vocab.rows,
    }
    if moe:
        config.update({
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "moe_intermediate_size": args.moe_intermediate,
            "norm_topk_prob": True,
            "num_experts": args.experts,
            "num_experts_per_tok": args.top_k,
            "output_router_logits": False,
            "router_aux_loss_coef": 0.001,
        })
    return dict(sorted(config.items()))


def llada_config(args, vocab, torch_dtype):
    return {
        "activation_type": "silu",
        "alibi": False,
        "alibi_bias_max": 8.0,
        "architectures": ["LLaDAModelLM"],
        "attention_dropout": 0.0,
        "attention_layer_norm": False,
        "attention_layer_norm_with_affine": True,
        "auto_map": {
            "AutoConfig": "configuration_llada.LLaDAConfig",
            "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM",
            "AutoModel": "modeling_llada.LLaDAModelLM",
        },
        "bias_for_layer_norm": False,
        "block_group_size": 1,
        "block_type": "llama",
        "d_model": args.hidden,
        "embedding_dropout": 0.0,
        "embedding_size": vocab.rows,
        "eos_token_id": vocab.eos,
        "flash_attention": False,
        "include_bias": False,
        "include_qkv_bias": False,
        "init_cutoff_factor": None,
        "init_device": "meta",
        "init_fn": "mitchell",
        "init_std": 0.02,
        "input_emb_norm": False,
        "layer_norm_type": "rms",
        "layer_norm_with_affine": True,
        "mask_token_id": vocab.mask,
        "max_sequence_length": 4096,
        "mlp_hidden_size": args.intermediate,
        "mlp_ratio": 4,
        "model_type": "llada",
        "multi_query_attention": None,
        "n_heads": args.heads,
        "n_kv_heads": args.kv_heads,
        "n_layers": args.layers,
        "pad_token_id": vocab.eos,
        "precision": "amp_bf16",
        "residual_dropout": 0.0,
        "rms_norm_eps": 1e-05,
        "rope": True,
        "rope_full_precision": True,
        "rope_theta": 500000.0,
        "scale_logits": False,
        "torch_dtype": torch_dtype,
        "transformers_version": "4.46.3",
        "use_cache": False,
        "vocab_size": vocab.rows,
        "weight_tying": False,
    }


def qwen2_config(args, vocab, torch_dtype):
    """Fast-dLLM v2's or Dream's config.json: Qwen2.5's keys (no head_dim unless it differs from hidden / heads,
    which Dream refuses) plus bd_size (Fast-dLLM v2) or mask_token_id (Dream)."""
    fast = args.arch == "fast_dllm_v2"
    config = {
        "architectures": ["Fast_dLLM_QwenForCausalLM" if fast else "DreamModel"],
        "auto_map": {
            "AutoConfig": "configuration.Fast_dLLM_QwenConfig",
            "AutoModelForCausalLM": "modeling.Fast_dLLM_QwenForCausalLM",
        } if fast else {
            "AutoConfig": "configuration_dream.DreamConfig",
            "AutoModel": "modeling_dream.DreamModel",
        },
        "attention_dropout": 0.0,
        "bos_token_id": vocab.bos,
        # Qwen2.5-Instruct (Fast-dLLM v2's base) ends a turn with <|im_end|>; Dream's config names <|endoftext|>.
        "eos_token_id": vocab.stop_ids[0] if fast else vocab.eos,
        "hidden_act": "silu",
        "hidden_size": args.hidden,
        "initializer_range": 0.02,
        "intermediate_size": args.intermediate,
        "max_position_embeddings": 32768 if fast else 131072,
        "max_window_layers": args.layers,
        "model_type": "Fast_dLLM_Qwen" if fast else "Dream",
        "num_attention_heads": args.heads,
        "num_hidden_layers": args.layers,
        "num_key_value_heads": args.kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": 131072,
        "tie_word_embeddings": False,
        "torch_dtype": torch_dtype,
        "transformers_version": "4.53.2" if fast else "4.46.2",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": vocab.rows,
    }
    if args.head_dim * args.heads != args.hidden:  # Fast-dLLM v2 only (parse_args)
        config["head_dim"] = args.head_dim
    if fast:
        config["bd_size"] = args.block_size
        if vocab.mask != FAST_DLLM_V2_MASK:  # the real configs rely on the default
            config["mask_token_id"] = vocab.mask
    else:
        config["mask_token_id"] = vocab.mask
        config["pad_token_id"] = vocab.eos
    return dict(sorted(config.items()))


def llada2_config(args, vocab, torch_dtype):
    """LLaDA2-MoE's config.json (LLaDA2.0-mini's keys, modeling_llada2_moe.py): BailingMoeV2 names, the
    block size as block_size, the tokenizer's mask as mask_token_id."""
    return dict(sorted({
        "architectures": ["LLaDA2MoeModelLM"],
        "auto_map": {
            "AutoConfig": "configuration_llada2_moe.LLaDA2MoeConfig",
            "AutoModel": "modeling_llada2_moe.LLaDA2MoeModel",
            "AutoModelForCausalLM": "modeling_llada2_moe.LLaDA2MoeModelLM",
        },
        "attention_dropout": 0.0,
        "block_size": args.block_size,
        "embedding_dropout": 0.0,
        "eos_token_id": vocab.eos,
        "first_k_dense_replace": args.first_dense,
        "head_dim": args.head_dim,
        "hidden_act": "silu",
        "hidden_size": args.hidden,
        "initializer_range": 0.02,
        "intermediate_size": args.intermediate,
        "mask_token_id": vocab.mask,
        "max_position_embeddings": 32768,
        "max_window_layers": args.layers,
        "model_type": "llada2_moe",
        "moe_intermediate_size": args.moe_intermediate,
        "moe_router_enable_expert_bias": True,
        "n_group": args.n_group,
        "norm_head": False,
        "norm_softmax": False,
        "norm_topk_prob": True,
        "num_attention_heads": args.heads,
        "num_experts": args.experts,
        "num_experts_per_tok": args.top_k,
        "num_hidden_layers": args.layers,
        "num_key_value_heads": args.kv_heads,
        "num_shared_experts": args.shared_experts,
        "output_dropout": 0.0,
        "output_router_logits": False,
        "pad_token_id": vocab.eos,
        "partial_rotary_factor": args.rotary_factor,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 600000.0,
        "routed_scaling_factor": LLADA2_ROUTED_SCALING,
        "router_dtype": "fp32",
        "score_function": "sigmoid",
        "tie_word_embeddings": False,
        "topk_group": args.topk_group,
        "torch_dtype": torch_dtype,
        "transformers_version": "4.52.3",
        "use_bias": False,
        "use_cache": True,
        "use_qk_norm": True,
        "use_qkv_bias": False,
        "use_rmsnorm": True,
        "using_split_qkv_in_self_attention": False,
        "vocab_size": vocab.rows,
    }.items()))


def generation_config(args, vocab):
    if args.arch == "llada":
        return {"bos_token_id": vocab.bos, "eos_token_id": vocab.stop_ids, "pad_token_id": vocab.eos,
                "transformers_version": "4.46.3"}
    if args.arch == "dream":
        return {"bos_token_id": vocab.bos, "eos_token_id": vocab.eos, "pad_token_id": vocab.eos,
                "transformers_version": "4.46.2"}
    if args.arch == "llada2_moe":
        return {"bos_token_id": vocab.bos, "eos_token_id": vocab.eos, "pad_token_id": vocab.eos,
                "transformers_version": "4.52.3"}
    if args.arch == "fast_dllm_v2":  # Qwen2.5-Instruct's
        return {"bos_token_id": vocab.bos, "do_sample": True, "eos_token_id": vocab.stop_ids, "pad_token_id": vocab.eos,
                "temperature": 0.7, "top_k": 20, "top_p": 0.8,
                "transformers_version": "4.53.2"}
    return {"bos_token_id": vocab.bos, "do_sample": True, "eos_token_id": vocab.stop_ids, "pad_token_id": vocab.eos,
            "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0"}


# Tensor kinds and how they are initialised (see random_weight).
EMBED, NORM, PROJ, HEAD, BIAS, EXPERT_BIAS = "embed", "norm", "proj", "head", "bias", "expert_bias"


def qwen_tensors(args, rows):
    """[(name, shape, kind)] in checkpoint order of the Qwen-named families: SDAR / SDAR-MoE (Qwen3:
    q/k norms after o_proj, reference/models.md §1.2) and Fast-dLLM v2 / Dream (Qwen2: a bias after
    each of q_proj, k_proj and v_proj, no q/k norms)."""
    qwen2 = args.arch in ("fast_dllm_v2", "dream")
    h, q, kv, d = args.hidden, args.heads * args.head_dim, args.kv_heads * args.head_dim, args.head_dim
    out = [("model.embed_tokens.weight", (rows, h), EMBED)]
    for layer in range(args.layers):
        p = f"model.layers.{layer}."
        out.append((p + "input_layernorm.weight", (h,), NORM))
        for name, width in (("q", q), ("k", kv), ("v", kv)):
            out.append((p + f"self_attn.{name}_proj.weight", (width, h), PROJ))
            if qwen2:
                out.append((p + f"self_attn.{name}_proj.bias", (width,), BIAS))
        out.append((p + "self_attn.o_proj.weight", (h, q), PROJ))
        if not qwen2:
            out += [(p + "self_attn.q_norm.weight", (d,), NORM), (p + "self_attn.k_norm.weight", (d,), NORM)]
        out.append((p + "post_attention_layernorm.weight", (h,), NORM))
        if args.arch == "sdar_moe":
            m = args.moe_intermediate
            out.append((p + "mlp.gate.weight", (args.experts, h), PROJ))
            for e in range(args.experts):
                x = f"{p}mlp.experts.{e}."
                out += [(x + "gate_proj.weight", (m, h), PROJ), (x + "up_proj.weight", (m, h), PROJ),
                        (x + "down_proj.weight", (h, m), PROJ)]
        else:
            i = args.intermediate
            out += [(p + "mlp.gate_proj.weight", (i, h), PROJ), (p + "mlp.up_proj.weight", (i, h), PROJ),
                    (p + "mlp.down_proj.weight", (h, i), PROJ)]
    return out + [("model.norm.weight", (h,), NORM), ("lm_head.weight", (rows, h), HEAD)]


def llada_tensors(args, rows):
    """[(name, shape, kind)] of LLaDA in checkpoint order (reference/models.md §2.2)."""
    h, kv, i = args.hidden, args.kv_heads * args.head_dim, args.intermediate
    out = [("model.transformer.wte.weight", (rows, h), EMBED)]
    for layer in range(args.layers):
        p = f"model.transformer.blocks.{layer}."
        out += [
            (p + "attn_norm.weight", (h,), NORM),
            (p + "q_proj.weight", (h, h), PROJ),
            (p + "k_proj.weight", (kv, h), PROJ),
            (p + "v_proj.weight", (kv, h), PROJ),
            (p + "attn_out.weight", (h, h), PROJ),
            (p + "ff_norm.weight", (h,), NORM),
            (p + "ff_proj.weight", (i, h), PROJ),
            (p + "up_proj.weight", (i, h), PROJ),
            (p + "ff_out.weight", (h, i), PROJ),
        ]
    return out + [("model.transformer.ln_f.weight", (h,), NORM), ("model.transformer.ff_out.weight", (rows, h), HEAD)]


def llada2_tensors(args, rows):
    """[(name, shape, kind)] of LLaDA2-MoE in its modules' order: per layer the norm, the fused
    query_key_value (rows: q heads, k heads, v heads), the q/k norms, dense, the post-attention norm, then the
    dense MLP (layers < --first-dense) or the router (gate.weight, gate.expert_bias), the experts and the shared
    expert."""
    h, d = args.hidden, args.head_dim
    qkv = (args.heads + 2 * args.kv_heads) * d
    out = [("model.word_embeddings.weight", (rows, h), EMBED)]
    for layer in range(args.layers):
        p = f"model.layers.{layer}."
        out += [(p + "input_layernorm.weight", (h,), NORM),
                (p + "attention.query_key_value.weight", (qkv, h), PROJ),
                (p + "attention.query_layernorm.weight", (d,), NORM),
                (p + "attention.key_layernorm.weight", (d,), NORM),
                (p + "attention.dense.weight", (h, args.heads * d), PROJ),
                (p + "post_attention_layernorm.weight", (h,), NORM)]
        mlps = [(p + "mlp.", args.intermediate)]
        if layer >= args.first_dense:
            out += [(p + "mlp.gate.weight", (args.experts, h), PROJ),
                    (p + "mlp.gate.expert_bias", (args.experts,), EXPERT_BIAS)]
            mlps = [(f"{p}mlp.experts.{e}.", args.moe_intermediate) for e in range(args.experts)]
            if args.shared_experts:
                mlps.append((p + "mlp.shared_experts.", args.moe_intermediate * args.shared_experts))
        for x, m in mlps:
            out += [(x + "gate_proj.weight", (m, h), PROJ), (x + "up_proj.weight", (m, h), PROJ),
                    (x + "down_proj.weight", (h, m), PROJ)]
    return out + [("model.norm.weight", (h,), NORM), ("lm_head.weight", (rows, h), HEAD)]


def random_weight(rng, shape, kind):
    """Scales that keep a tiny model's activations O(1): unit-variance embeddings, projections with
    std 1/sqrt(fan_in) (unit-variance outputs for normalised inputs, so attention scores and router
    logits are O(1)), norms near 1, and a head giving logits of std LOGIT_STD."""
    x = rng.standard_normal(shape, dtype=np.float32)
    fan_in = shape[-1]
    if kind == NORM:
        return 1.0 + NORM_NOISE * x
    if kind == EMBED:
        return x
    if kind == BIAS:
        return x * np.float32(BIAS_STD)
    if kind == EXPERT_BIAS:
        return x * np.float32(EXPERT_BIAS_STD)
    if kind == HEAD:
        return x * np.float32(LOGIT_STD / np.sqrt(fan_in))
    return x * np.float32(1.0 / np.sqrt(fan_in))


def remove_checkpoint(out):
    """A previous run's checkpoint (with another --shards, or before --no-weights) would confuse loaders."""
    for stale in [*out.glob("model*.safetensors"), out / "model.safetensors.index.json"]:
        stale.unlink(missing_ok=True)


def write_weights(out, specs, rng, dtype, shards):
    if shards > len(specs):
        raise SystemExit(f"--shards {shards} exceeds the number of tensors ({len(specs)})")
    tensors = {name: random_weight(rng, shape, kind) for name, shape, kind in specs}
    # LLaDA2's expert_bias stays F32 in a checkpoint of any dtype (as the real ones keep it).
    dtypes = {name: "F32" for name, _, kind in specs if kind == EXPERT_BIAS} or None
    remove_checkpoint(out)
    if shards == 1:
        safetensors_io.write_safetensors(out / "model.safetensors", tensors, dtype, dtypes=dtypes)
        return
    names = list(tensors)
    weight_map, total = {}, 0
    for k, chunk in enumerate(np.array_split(np.arange(len(names)), shards)):
        file_name = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {names[i]: tensors[names[i]] for i in chunk}
        total += safetensors_io.write_safetensors(out / file_name, part, dtype, dtypes=dtypes)
        weight_map.update({name: file_name for name in part})
    write_json(out / "model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map})


def write_json(path, obj):
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def resized(vocab, rows, mask):
    """vocab with `rows` embedding rows and mask id `mask` where given (None: unchanged)."""
    tokens = max([*vocab.tokenizer["model"]["vocab"].values(), *(e["id"] for e in vocab.tokenizer["added_tokens"])]) + 1
    rows = vocab.rows if rows is None else rows
    mask = vocab.mask if mask is None else mask
    if rows < tokens:
        raise SystemExit(f"error: --vocab-size {rows} is below the tokenizer's {tokens} tokens")
    if not 0 <= mask < rows:
        raise SystemExit(f"error: --mask-token-id {mask} is outside the vocabulary [0, {rows})")
    return dataclasses.replace(vocab, rows=rows, mask=mask)


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.tokenizer is not None:
        try:
            vocab = tiny_tokenizer.folder_vocab(args.tokenizer)
        except ValueError as error:
            raise SystemExit(str(error)) from None
    elif args.vocab == "qwen3":
        vocab = tiny_tokenizer.qwen3_vocab()
    else:
        vocab = tiny_tokenizer.small_vocab(args.arch)
    vocab = resized(vocab, args.vocab_size, args.mask_token_id)
    st_dtype, torch_dtype = DTYPES[args.dtype]
    if args.arch == "llada":
        config, specs = llada_config(args, vocab, torch_dtype), llada_tensors(args, vocab.rows)
    elif args.arch in QWEN2_ARCHS:
        config, specs = qwen2_config(args, vocab, torch_dtype), qwen_tensors(args, vocab.rows)
    elif args.arch == "llada2_moe":
        config, specs = llada2_config(args, vocab, torch_dtype), llada2_tensors(args, vocab.rows)
    else:
        config, specs = sdar_config(args, vocab, torch_dtype), qwen_tensors(args, vocab.rows)
    write_json(out / "config.json", config)
    write_json(out / "generation_config.json", generation_config(args, vocab))
    write_json(out / "tokenizer_config.json", vocab.tokenizer_config)
    (out / "tokenizer.json").write_text(json.dumps(vocab.tokenizer, ensure_ascii=False), encoding="utf-8")
    if args.no_weights:
        remove_checkpoint(out)
        return
    rng = np.random.Generator(np.random.PCG64(args.seed))
    write_weights(out, specs, rng, st_dtype, args.shards)


if __name__ == "__main__":
    main()
