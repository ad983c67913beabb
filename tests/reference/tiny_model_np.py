"""Writes tiny random models in HF layout (config.json, generation_config.json, safetensors with
the real tensor names) for the reference's self-tests, in any of BF16 / F16 / F32 and optionally
sharded behind model.safetensors.index.json.

Small vocabulary: 48 rows; the mask is the last id (47); EOS ids are 1 and 2.
"""

import json
import os
import struct

import numpy as np

VOCAB = 48
MASK_TOKEN_ID = VOCAB - 1
EOS_TOKEN_IDS = [1, 2]
_DIMS = dict(hidden=32, layers=2, heads=4, kv_heads=2, head_dim=16, intermediate=48,
             experts=4, experts_per_tok=2, moe_intermediate=16)


def _bf16_bits(array):
    """Round-to-nearest-even fp32 -> bf16 bit patterns."""
    bits = np.asarray(array, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def encode_tensor(array, dtype_name):
    """(raw bytes, dtype name) of a float array stored as dtype_name."""
    if dtype_name == "BF16":
        return _bf16_bits(array).astype("<u2").tobytes()
    return np.asarray(array, dtype={"F16": "<f2", "F32": "<f4"}[dtype_name]).tobytes()


def write_safetensors(path, tensors, dtype_name):
    """Writes {name: float array} as one safetensors file, every tensor stored as dtype_name."""
    header, chunks, offset = {}, [], 0
    for name, array in tensors.items():
        raw = encode_tensor(array, dtype_name)
        header[name] = {"dtype": dtype_name, "shape": list(np.shape(array)),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    header_bytes = json.dumps(header).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)  # data aligned to 8 bytes, as HF does
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(header_bytes)) + header_bytes + b"".join(chunks))


def _tensor_shapes(arch):
    d = _DIMS
    hidden, q_width, kv_width = d["hidden"], d["heads"] * d["head_dim"], d["kv_heads"] * d["head_dim"]
    if arch == "llada":
        q_width = kv_width = hidden  # LLaDA: MHA with head_dim = d_model / n_heads
        shapes = {"model.transformer.wte.weight": (VOCAB, hidden),
                  "model.transformer.ln_f.weight": (hidden,),
                  "model.transformer.ff_out.weight": (VOCAB, hidden)}
        for l in range(d["layers"]):
            p = f"model.transformer.blocks.{l}."
            shapes.update({p + "attn_norm.weight": (hidden,), p + "q_proj.weight": (q_width, hidden),
                           p + "k_proj.weight": (kv_width, hidden),
                           p + "v_proj.weight": (kv_width, hidden),
                           p + "attn_out.weight": (hidden, q_width), p + "ff_norm.weight": (hidden,),
                           p + "ff_proj.weight": (d["intermediate"], hidden),
                           p + "up_proj.weight": (d["intermediate"], hidden),
                           p + "ff_out.weight": (hidden, d["intermediate"])})
        return shapes
    shapes = {"model.embed_tokens.weight": (VOCAB, hidden), "model.norm.weight": (hidden,),
              "lm_head.weight": (VOCAB, hidden)}
    for l in range(d["layers"]):
        p = f"model.layers.{l}."
        shapes.update({p + "input_layernorm.weight": (hidden,),
                       p + "self_attn.q_proj.weight": (q_width, hidden),
                       p + "self_attn.k_proj.weight": (kv_width, hidden),
                       p + "self_attn.v_proj.weight": (kv_width, hidden),
                       p + "self_attn.o_proj.weight": (hidden, q_width),
                       p + "self_attn.q_norm.weight": (d["head_dim"],),
                       p + "self_attn.k_norm.weight": (d["head_dim"],),
                       p + "post_attention_layernorm.weight": (hidden,)})
        if arch == "sdar_moe":
            shapes[p + "mlp.gate.weight"] = (d["experts"], hidden)
            for e in range(d["experts"]):
                q = f"{p}mlp.experts.{e}."
                shapes.update({q + "gate_proj.weight": (d["moe_intermediate"], hidden),
                               q + "up_proj.weight": (d["moe_intermediate"], hidden),
                               q + "down_proj.weight": (hidden, d["moe_intermediate"])})
        else:
            shapes.update({p + "mlp.gate_proj.weight": (d["intermediate"], hidden),
                           p + "mlp.up_proj.weight": (d["intermediate"], hidden),
                           p + "mlp.down_proj.weight": (hidden, d["intermediate"])})
    return shapes


def random_weights(arch, seed):
    """{name: float32 array}: norms near 1, matrices ~ N(0, 1/in) (embedding and head wider, so
    the logits are peaked enough for confidences to differ)."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in _tensor_shapes(arch).items():
        if len(shape) == 1:
            weights[name] = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            scale = 0.5 if shape[0] == VOCAB else 1.0 / np.sqrt(shape[1])
            weights[name] = scale * rng.standard_normal(shape)
        weights[name] = weights[name].astype(np.float32)
    return weights


def _config(arch):
    d = _DIMS
    if arch == "llada":
        return {"architectures": ["LLaDAModelLM"], "model_type": "llada", "d_model": d["hidden"],
                "n_layers": d["layers"], "n_heads": d["heads"], "n_kv_heads": d["heads"],
                "mlp_hidden_size": d["intermediate"], "vocab_size": VOCAB,
                "embedding_size": VOCAB, "rope": True, "rope_theta": 500000.0,
                "rms_norm_eps": 1e-5, "weight_tying": False, "attention_layer_norm": False,
                "max_sequence_length": 256, "eos_token_id": EOS_TOKEN_IDS[0],
                "mask_token_id": MASK_TOKEN_ID}
    config = {"architectures": ["SDARForCausalLM"], "model_type": "sdar",
              "hidden_size": d["hidden"], "num_hidden_layers": d["layers"],
              "num_attention_heads": d["heads"], "num_key_value_heads": d["kv_heads"],
              "head_dim": d["head_dim"], "intermediate_size": d["intermediate"],
              "vocab_size": VOCAB, "rope_theta": 1000000.0, "rope_scaling": None,
              "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "attention_bias": False,
              "max_position_embeddings": 256, "eos_token_id": EOS_TOKEN_IDS[0],
              "mask_token_id": MASK_TOKEN_ID, "block_size": 4}
    if arch == "sdar_moe":
        config.update({"architectures": ["SDARMoeForCausalLM"], "model_type": "sdar_moe",
                       "num_experts": d["experts"], "num_experts_per_tok": d["experts_per_tok"],
                       "moe_intermediate_size": d["moe_intermediate"], "norm_topk_prob": True,
                       "decoder_sparse_step": 1, "mlp_only_layers": []})
    return config


def write_tiny_model(out_dir, arch, seed, dtype_name="BF16", shards=1):
    """Creates out_dir holding a tiny `arch` model (sdar, sdar_moe or llada); returns out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as handle:
        json.dump(_config(arch), handle, indent=1)
    with open(os.path.join(out_dir, "generation_config.json"), "w", encoding="utf-8") as handle:
        json.dump({"eos_token_id": EOS_TOKEN_IDS}, handle)
    weights = random_weights(arch, seed)
    if shards == 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), weights, dtype_name)
        return out_dir
    names = list(weights)
    weight_map = {}
    for shard in range(shards):
        file_name = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        part = {name: weights[name] for name in names[shard::shards]}
        write_safetensors(os.path.join(out_dir, file_name), part, dtype_name)
        weight_map.update({name: file_name for name in part})
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w",
              encoding="utf-8") as handle:
        json.dump({"metadata": {}, "weight_map": weight_map}, handle, indent=1)
    return out_dir
