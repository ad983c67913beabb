"""LLaDA2-MoE (model_type llada2_moe, the BailingMoeV2 network): config detection, defaults and
refusals; the group-limited sigmoid router on hand-made scores; partial RoPE; the fused q/k/v, the
dense first layers, the shared expert and the expert bias in the loaded tiny model; FP8."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

import config_np
import fp8_np
import model_np
import safetensors_np
from model_dirs import edit_config
from model_np import ReferenceModel, group_limited_routing, partial_rope, segment_ids

ARCH = "llada2_moe"
TOKENS = [3, 8, 13, 21, 34, 5, 6, 7, 40, 41, 42, 43]


def _json(folder, name):
    with open(f"{folder}/{name}", encoding="utf-8") as handle:
        return json.load(handle)


def _stored_dtypes(folder):
    """{tensor name: safetensors dtype} over the folder's checkpoint files."""
    dtypes = {}
    for path in sorted(Path(folder).glob("*.safetensors")):
        raw = path.read_bytes()
        length = int.from_bytes(raw[:8], "little")
        dtypes.update({k: v["dtype"] for k, v in json.loads(raw[8:8 + length]).items()
                       if k != "__metadata__"})
    return dtypes


def _logit(p):
    """The router logit whose sigmoid is p."""
    p = np.asarray(p, dtype=np.float64)
    return np.log(p / (1.0 - p))


# --- config.json -------------------------------------------------------------------------------

def test_detected_by_model_type_or_architectures(tiny_model_dirs, tmp_path):
    folder = tiny_model_dirs[ARCH]
    raw = _json(folder, "config.json")
    assert raw["model_type"] == "llada2_moe" and raw["architectures"] == ["LLaDA2MoeModelLM"]
    config = config_np.load_config(folder)
    assert config.family == ARCH
    by_architecture = edit_config(folder, tmp_path / "arch", lambda c: c.pop("model_type"))
    assert config_np.load_config(by_architecture) == config
    by_model_type = edit_config(folder, tmp_path / "type",
                                 lambda c: c.update(architectures=["SomethingElse"]))
    assert config_np.load_config(by_model_type) == config


def test_tiny_config_is_read_key_by_key(tiny_model_dirs):
    folder = tiny_model_dirs[ARCH]
    raw, c = _json(folder, "config.json"), config_np.load_config(folder)
    assert (c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim) == (64, 2, 4, 2, 32)
    assert (c.rotary_dim, c.intermediate_size, c.moe_intermediate_size) == (16, 128, 32)
    assert (c.num_experts, c.num_experts_per_tok, c.n_group, c.topk_group) == (8, 2, 4, 2)
    assert (c.num_shared_experts, c.routed_scaling_factor, c.router) == (1, 2.5, "sigmoid")
    assert c.moe_layers == (False, True)  # first_k_dense_replace 1
    assert c.qk_norm and c.expert_bias and c.norm_topk_prob
    assert not c.qkv_bias and not c.shifted_logits and not c.tie_word_embeddings
    assert (c.rope_theta, c.rms_norm_eps) == (raw["rope_theta"], raw["rms_norm_eps"])
    assert c.block_size == raw["block_size"] == 4 and c.mask_token_id == raw["mask_token_id"]
    assert c.max_positions == raw["max_position_embeddings"]
    assert c.eos_token_ids == (_json(folder, "generation_config.json")["eos_token_id"],)
    for key in ("score_function", "use_qkv_bias", "use_bias", "using_split_qkv_in_self_attention",
                "norm_topk_prob", "partial_rotary_factor", "moe_router_enable_expert_bias"):
        assert key in raw, key  # the generator writes the keys the real configs have


def test_defaults_of_absent_keys(tiny_model_dirs, tmp_path):
    absent = ("num_key_value_heads", "head_dim", "tie_word_embeddings", "first_k_dense_replace",
              "n_group", "topk_group", "routed_scaling_factor", "partial_rotary_factor",
              "use_qk_norm", "moe_router_enable_expert_bias", "block_size", "mask_token_id",
              "eos_token_id", "score_function", "norm_topk_prob", "rope_scaling", "hidden_act",
              "use_bias", "use_qkv_bias", "using_split_qkv_in_self_attention")

    def strip(config):
        for key in absent:
            config.pop(key)
        config["num_shared_experts"] = None
    bare = config_np.load_config(edit_config(tiny_model_dirs[ARCH], tmp_path / "bare", strip, False))
    assert (bare.num_kv_heads, bare.head_dim, bare.rotary_dim) == (4, 16, 16)  # heads, hidden / heads
    assert bare.tie_word_embeddings is False and bare.moe_layers == (True, True)
    assert (bare.n_group, bare.topk_group, bare.routed_scaling_factor) == (1, 1, 1.0)
    assert bare.qk_norm and bare.expert_bias and bare.num_shared_experts == 0
    assert (bare.block_size, bare.mask_token_id, bare.eos_token_ids) == (32, 156895, (156892,))
    zero_shared = edit_config(tiny_model_dirs[ARCH], tmp_path / "zero",
                               lambda c: c.update(num_shared_experts=0, num_key_value_heads=None))
    zero = config_np.load_config(zero_shared)
    assert zero.num_shared_experts == 0 and zero.num_kv_heads == 4


@pytest.mark.parametrize("key, value", [
    ("score_function", "softmax"), ("use_qkv_bias", True), ("use_bias", True),
    ("hidden_act", "gelu"), ("rope_scaling", {"rope_type": "yarn", "factor": 4.0}),
    ("rope_scaling", {"type": "linear", "factor": 2.0}),
    ("using_split_qkv_in_self_attention", True), ("norm_topk_prob", False),
    ("n_group", 3),                 # 8 experts in 3 groups
    ("topk_group", 5),              # more groups kept than the 4 there are
    ("num_experts_per_tok", 5),     # 2 groups of 2 kept: at most 4 experts
    ("partial_rotary_factor", 0.3), # int(32 * 0.3) = 9, odd
    ("partial_rotary_factor", 0.01),  # 0 rotated dims
    ("rotary_dim", 8),              # head_dim 32 * 0.5 = 16
])
def test_unsupported_keys_are_refused_by_name(tiny_model_dirs, tmp_path, key, value):
    folder = edit_config(tiny_model_dirs[ARCH], tmp_path / "bad", lambda c: c.update({key: value}))
    with pytest.raises(ValueError, match=key):
        config_np.load_config(folder)


@pytest.mark.parametrize("key, value", [
    ("score_function", "sigmoid"), ("use_qkv_bias", False), ("use_bias", False),
    ("norm_topk_prob", True), ("rope_scaling", {"rope_type": "default"}),
    ("rope_scaling", {"type": "default"}), ("rotary_dim", 16), ("hidden_act", "silu"),
    ("using_split_qkv_in_self_attention", False)])
def test_supported_values_are_accepted(tiny_model_dirs, tmp_path, key, value):
    folder = edit_config(tiny_model_dirs[ARCH], tmp_path / "ok", lambda c: c.update({key: value}))
    assert config_np.load_config(folder) == config_np.load_config(tiny_model_dirs[ARCH])


def test_missing_required_key_is_named(tiny_model_dirs, tmp_path):
    for key in ("num_experts", "moe_intermediate_size", "intermediate_size"):
        folder = edit_config(tiny_model_dirs[ARCH], tmp_path / key, lambda c: c.pop(key))
        with pytest.raises(ValueError, match=f"missing key '{key}'"):
            config_np.load_config(folder)
    # Without a dense layer the dense width is not needed.
    all_moe = edit_config(tiny_model_dirs[ARCH], tmp_path / "all_moe",
                           lambda c: [c.pop("intermediate_size"), c.update(first_k_dense_replace=0)])
    assert config_np.load_config(all_moe).moe_layers == (True, True)


# --- the router ----------------------------------------------------------------------------------

def test_groups_are_scored_by_their_two_best_experts_with_ties_to_the_lower_group():
    # 8 experts in 4 groups of 2. Groups 0, 1 and 2 tie at 0.7 + 0.3 (the same values, so the
    # sums are equal bit for bit); topk_group 2 keeps groups 0 and 1, so expert 4 (0.7) is out.
    # Experts 0 and 3 tie at 0.7: both chosen, the lower id first.
    logits = _logit([[0.7, 0.3, 0.3, 0.7, 0.7, 0.3, 0.1, 0.2]])
    experts, weights = group_limited_routing(logits, 2, 4, 2)
    assert experts.tolist() == [[0, 3]]
    assert weights[0].tolist() == pytest.approx([0.5, 0.5], rel=1e-14)
    # The best single expert (0.95) is in group 0 (sum 1.0); group 1 sums 1.2 and wins alone.
    logits = _logit([[0.95, 0.05, 0.6, 0.6, 0.1, 0.1, 0.2, 0.3]])
    experts, _ = group_limited_routing(logits, 2, 4, 1)
    assert experts.tolist() == [[2, 3]]
    # With two groups kept, group 0 joins and its 0.95 comes first.
    experts, _ = group_limited_routing(logits, 2, 4, 2)
    assert experts.tolist() == [[0, 2]]


def test_groups_of_one_expert_are_scored_by_that_expert():
    scores = np.array([[0.2, 0.9, 0.4, 0.8]])
    experts, _ = group_limited_routing(_logit(scores), 2, 4, 2)
    assert experts.tolist() == [[1, 3]]
    experts, _ = group_limited_routing(_logit(scores), 1, 4, 1)
    assert experts.tolist() == [[1]]


def test_expert_bias_changes_the_selection_but_not_the_weights():
    scores = np.array([[0.6, 0.5, 0.4, 0.3]])
    plain, plain_weights = group_limited_routing(_logit(scores), 2, 1, 1)
    assert plain.tolist() == [[0, 1]]
    assert plain_weights[0].tolist() == pytest.approx([0.6 / 1.1, 0.5 / 1.1], rel=1e-14)
    bias = np.array([0.0, 0.0, 0.3, 0.0])  # biased: 0.6, 0.5, 0.7, 0.3
    biased, biased_weights = group_limited_routing(_logit(scores), 2, 1, 1, bias)
    assert biased.tolist() == [[2, 0]]
    # weights from the unbiased scores 0.4 and 0.6
    assert biased_weights[0].tolist() == pytest.approx([0.4, 0.6], rel=1e-14)
    # The bias also moves a group's score: group 1 (0.5 + 0.4 -> 0.5 + 0.7) overtakes group 0.
    grouped, _ = group_limited_routing(_logit([[0.6, 0.5, 0.5, 0.4]]), 1, 2, 1,
                                       np.array([0.0, 0.0, 0.0, 0.3]))
    assert grouped.tolist() == [[3]]


def test_weights_are_normalised_for_top_k_above_one_then_scaled():
    scores = np.array([[0.2, 0.9, 0.4, 0.8], [0.5, 0.1, 0.3, 0.6]])
    _, weights = group_limited_routing(_logit(scores), 2, 1, 1, routed_scaling_factor=2.5)
    np.testing.assert_allclose(weights.sum(axis=-1), [2.5, 2.5], rtol=1e-14)
    np.testing.assert_allclose(weights, [[2.5 * 0.9 / 1.7, 2.5 * 0.8 / 1.7],
                                         [2.5 * 0.6 / 1.1, 2.5 * 0.5 / 1.1]], rtol=1e-14)
    # top_k 1: the chosen expert's sigmoid score itself, not 1, times the factor
    experts, weights = group_limited_routing(_logit(scores), 1, 1, 1, routed_scaling_factor=2.5)
    assert experts.tolist() == [[1], [3]]
    np.testing.assert_allclose(weights, [[2.5 * 0.9], [2.5 * 0.6]], rtol=1e-14)


def test_one_group_or_all_groups_kept_is_plain_top_k_of_the_biased_scores():
    rng = np.random.default_rng(5)
    logits, bias = rng.standard_normal((50, 8)), 0.1 * rng.standard_normal(8)
    scores = 1.0 / (1.0 + np.exp(-logits))
    want = np.argsort(-(scores + bias), axis=-1, kind="stable")[:, :3]
    for n_group, topk_group in ((1, 1), (4, 4), (8, 8), (2, 2)):
        experts, weights = group_limited_routing(logits, 3, n_group, topk_group, bias, 1.5)
        np.testing.assert_array_equal(experts, want)
        chosen = np.take_along_axis(scores, want, axis=-1)
        np.testing.assert_allclose(weights, 1.5 * chosen / chosen.sum(-1, keepdims=True), rtol=1e-14)
    # Fewer groups kept than there are: some rows route elsewhere, always within kept groups.
    experts, _ = group_limited_routing(logits, 3, 4, 2, bias)
    assert (experts != want).any()
    biased = (scores + bias).reshape(50, 4, 2)
    group_scores = biased.sum(-1)  # groups of 2: the sum of both
    for row in range(50):
        kept = set(np.argsort(-group_scores[row], kind="stable")[:2].tolist())
        assert {int(e) // 2 for e in experts[row]} <= kept


def test_bad_groupings_are_refused():
    with pytest.raises(ValueError):
        group_limited_routing(np.zeros((1, 8)), 2, 3, 1)
    with pytest.raises(ValueError):
        group_limited_routing(np.zeros((1, 8)), 2, 4, 5)
    with pytest.raises(ValueError):
        group_limited_routing(np.zeros((1, 8)), 5, 4, 2)


# --- partial RoPE ---------------------------------------------------------------------------------

def test_partial_rope_rotates_only_the_leading_dims_within_themselves():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3, 32))
    positions = [0, 1, 7, 100, 4000]
    out = partial_rope(x, positions, 600000.0, 16)
    np.testing.assert_array_equal(out[..., 16:], x[..., 16:])
    np.testing.assert_array_equal(out[0], x[0])  # position 0: no rotation
    for t, p in enumerate(positions):  # dim i < 8 pairs with i + 8 at angle p * theta^(-2i/16)
        for i in range(8):
            angle = p * 600000.0 ** (-2.0 * i / 16)
            a, b = x[t, :, i], x[t, :, i + 8]
            np.testing.assert_allclose(out[t, :, i], a * math.cos(angle) - b * math.sin(angle),
                                       rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(out[t, :, i + 8], b * math.cos(angle) + a * math.sin(angle),
                                       rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(partial_rope(x, positions, 1e6, 32), model_np.rope(x, positions, 1e6))
    # not the full-width rope's frequencies on the leading dims
    assert not np.allclose(out[..., :16], model_np.rope(x, positions, 600000.0)[..., :16])


def test_the_model_rotates_rotary_dim_dims(tiny_models):
    model = tiny_models[ARCH]
    captured = []
    original = model_np.partial_rope

    def spy(values, positions, theta, rotary_dim):
        captured.append(rotary_dim)
        return original(values, positions, theta, rotary_dim)

    model_np.partial_rope = spy
    try:
        base = model.forward(TOKENS[:6], [0] * 6)
    finally:
        model_np.partial_rope = original
    assert captured == [16] * 4  # q and k of both layers
    saved = model.config  # the same model with full RoPE computes other logits
    model.config = dataclasses.replace(saved, rotary_dim=None)
    try:
        assert not np.allclose(model.forward(TOKENS[:6], [0] * 6), base)
    finally:
        model.config = saved


# --- the loaded tiny model ------------------------------------------------------------------------

def test_fused_qkv_rows_are_q_then_k_then_v(tiny_model_dirs, tiny_models):
    tensors = safetensors_np.load_checkpoint(tiny_model_dirs[ARCH])
    for index, layer in enumerate(tiny_models[ARCH].layers):
        fused = tensors[f"model.layers.{index}.attention.query_key_value.weight"].astype(np.float64)
        assert fused.shape == ((4 + 2 * 2) * 32, 64)
        np.testing.assert_array_equal(layer["q"], fused[:128])
        np.testing.assert_array_equal(layer["k"], fused[128:192])
        np.testing.assert_array_equal(layer["v"], fused[192:])
        np.testing.assert_array_equal(
            layer["o"], tensors[f"model.layers.{index}.attention.dense.weight"].astype(np.float64))
        np.testing.assert_array_equal(
            layer["q_norm"], tensors[f"model.layers.{index}.attention.query_layernorm.weight"])


def _one_layer_by_hand(model, tensors, x_tokens):
    """Layer 0 of the tiny model from the raw tensors, written out: fused q/k/v split, q/k norms,
    partial RoPE of 16 of 32 dims, GQA attention over the whole (one-segment) sequence, dense, then
    the dense SwiGLU MLP."""
    p, eps, theta = "model.layers.0.", 1e-6, 600000.0
    w = {k[len(p):]: v.astype(np.float64) for k, v in tensors.items() if k.startswith(p)}
    h = tensors["model.word_embeddings.weight"].astype(np.float64)[x_tokens]
    x = model_np.rms_norm(h, w["input_layernorm.weight"], eps)
    qkv = (x @ w["attention.query_key_value.weight"].T).reshape(len(x_tokens), 8, 32)
    q, k, v = qkv[:, :4], qkv[:, 4:6], qkv[:, 6:]
    q = model_np.rms_norm(q, w["attention.query_layernorm.weight"], eps)
    k = model_np.rms_norm(k, w["attention.key_layernorm.weight"], eps)
    q = np.concatenate([model_np.rope(q[..., :16], range(len(x_tokens)), theta), q[..., 16:]], -1)
    k = np.concatenate([model_np.rope(k[..., :16], range(len(x_tokens)), theta), k[..., 16:]], -1)
    out = np.zeros_like(q)
    for head in range(4):
        scores = q[:, head] @ k[:, head // 2].T / math.sqrt(32)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        out[:, head] = (probs / probs.sum(-1, keepdims=True)) @ v[:, head // 2]
    h = h + out.reshape(len(x_tokens), 128) @ w["attention.dense.weight"].T
    x = model_np.rms_norm(h, w["post_attention_layernorm.weight"], eps)
    gate, up, down = (w[f"mlp.{n}_proj.weight"] for n in ("gate", "up", "down"))
    assert gate.shape == (128, 64)  # intermediate_size, not the experts' width
    return h + (model_np.silu(x @ gate.T) * (x @ up.T)) @ down.T


def test_dense_first_layer_by_hand(tiny_model_dirs, tiny_models):
    model = tiny_models[ARCH]
    tensors = safetensors_np.load_checkpoint(tiny_model_dirs[ARCH])
    assert "mlp" in model.layers[0] and "experts" not in model.layers[0]
    assert "experts" in model.layers[1] and "mlp" not in model.layers[1]
    states = []
    model.forward(TOKENS, [0] * len(TOKENS), hidden_states=states)
    np.testing.assert_allclose(states[0], _one_layer_by_hand(model, tensors, TOKENS), rtol=1e-12,
                               atol=1e-12)


def test_first_k_dense_replace_decides_which_tensors_are_read(tiny_model_dirs, tmp_path):
    none_dense = edit_config(tiny_model_dirs[ARCH], tmp_path / "none",
                              lambda c: c.update(first_k_dense_replace=0))
    with pytest.raises(ValueError, match="model.layers.0.mlp.gate.weight is missing"):
        ReferenceModel.from_dir(none_dense)
    all_dense = edit_config(tiny_model_dirs[ARCH], tmp_path / "all",
                             lambda c: c.update(first_k_dense_replace=2))
    with pytest.raises(ValueError, match="model.layers.1.mlp.gate_proj.weight is missing"):
        ReferenceModel.from_dir(all_dense)


def test_moe_layer_by_hand_with_the_shared_expert_added(tiny_models):
    model, c = tiny_models[ARCH], tiny_models[ARCH].config
    layer = model.layers[1]
    rng = np.random.default_rng(3)
    x = model_np.rms_norm(rng.standard_normal((20, 64)), 1.0, 1e-6)
    got = model._mlp_block(layer, x)
    chosen, weights = group_limited_routing(x @ layer["router"].T, 2, 4, 2, layer["expert_bias"], 2.5)
    want = np.zeros_like(x)
    for row in range(20):
        for e, weight in zip(chosen[row], weights[row]):
            want[row] += weight * model_np.swiglu(x[row:row + 1], *layer["experts"][e])[0]
    shared = model_np.swiglu(x, *layer["shared"])
    assert layer["shared"][0].shape == (c.moe_intermediate_size * c.num_shared_experts, 64)
    np.testing.assert_allclose(got, want + shared, rtol=1e-12, atol=1e-12)
    assert np.abs(shared).max() > 0.1 * np.abs(want).max()  # it matters
    np.testing.assert_allclose(weights.sum(-1), 2.5, rtol=1e-12)


def test_without_shared_experts_or_expert_bias_those_tensors_are_not_read(tiny_model_dirs,
                                                                          tiny_models, tmp_path):
    config = config_np.load_config(tiny_model_dirs[ARCH])
    tensors = safetensors_np.load_checkpoint(tiny_model_dirs[ARCH])
    base = tiny_models[ARCH].forward(TOKENS, segment_ids(ARCH, 12, 8, 4))
    for flag, name in ((dict(num_shared_experts=0), "mlp.shared_experts.gate_proj.weight"),
                       (dict(expert_bias=False), "mlp.gate.expert_bias")):
        with pytest.raises(ValueError, match=name):
            ReferenceModel(config, {k: v for k, v in tensors.items() if not k.endswith(name)})
        model = ReferenceModel(dataclasses.replace(config, **flag),
                               {k: v for k, v in tensors.items() if not k.endswith(name)})
        assert ("shared" if "shared" in name else "expert_bias") not in model.layers[1]
        assert not np.allclose(model.forward(TOKENS, segment_ids(ARCH, 12, 8, 4)), base), flag


def test_without_qk_norm_the_norm_tensors_are_not_read(tiny_model_dirs, tmp_path):
    folder = edit_config(tiny_model_dirs[ARCH], tmp_path / "no_qk", lambda c: c.update(use_qk_norm=False))
    config = config_np.load_config(folder)
    assert not config.qk_norm
    tensors = {k: v for k, v in safetensors_np.load_checkpoint(folder).items()
               if not k.endswith(("query_layernorm.weight", "key_layernorm.weight"))}
    model = ReferenceModel(config, tensors)
    assert "q_norm" not in model.layers[0]


def test_generator_expert_bias_is_float32_nonzero_and_changes_some_routes(tiny_model_dirs, tiny_models):
    dtypes = _stored_dtypes(tiny_model_dirs[ARCH])
    assert dtypes["model.layers.1.mlp.gate.expert_bias"] == "F32"
    assert dtypes["model.layers.1.mlp.gate.weight"] == "BF16"
    bias = tiny_models[ARCH].layers[1]["expert_bias"]
    assert 0.03 < bias.std() < 0.3 and np.all(bias != 0)
    assert bias.astype(np.float32).astype(np.float64).tolist() == bias.tolist()
    captured = []
    original = model_np.group_limited_routing

    def spy(logits, *args):
        captured.append(logits)
        return original(logits, *args)

    model_np.group_limited_routing = spy
    try:
        tiny_models[ARCH].forward(list(range(3, 67)), segment_ids(ARCH, 64, 32, 4))
    finally:
        model_np.group_limited_routing = original
    (logits,) = captured
    with_bias, _ = original(logits, 2, 4, 2, bias, 2.5)
    without, _ = original(logits, 2, 4, 2, None, 2.5)
    changed = np.mean([set(a) != set(b) for a, b in zip(with_bias.tolist(), without.tolist())])
    assert 0.0 < changed < 0.8, changed  # some tokens routed elsewhere, not all


def test_generator_float32_expert_bias_in_every_dtype_and_shard(make_model):
    for extra in (["--dtype", "f16"], ["--shards", "3"]):
        folder = make_model(ARCH, *extra, seed=2)
        dtypes = _stored_dtypes(folder)
        assert dtypes["model.layers.1.mlp.gate.expert_bias"] == "F32"
        assert {d for k, d in dtypes.items() if not k.endswith("expert_bias")} == \
            {"F16" if "--dtype" in extra else "BF16"}
        ReferenceModel.from_dir(folder).forward(TOKENS[:5], [0] * 5)
        # embedding, head, final norm; 6 attention-side tensors a layer; a dense MLP (3); a
        # router and its bias, 8 experts and a shared expert of 3 each
        assert len(dtypes) == 3 + 2 * 6 + 3 + 2 + 8 * 3 + 3


# --- FP8 ------------------------------------------------------------------------------------------

def test_is_projection_covers_the_new_names():
    p = "model.layers.3."
    for name in ("attention.query_key_value.weight", "attention.dense.weight", "mlp.gate_proj.weight",
                 "mlp.up_proj.weight", "mlp.down_proj.weight", "mlp.experts.7.gate_proj.weight",
                 "mlp.experts.0.down_proj.weight", "mlp.shared_experts.up_proj.weight",
                 "mlp.shared_experts.down_proj.weight"):
        assert model_np.is_projection(p + name), name
    for name in ("mlp.gate.weight", "mlp.gate.expert_bias", "attention.query_layernorm.weight",
                 "attention.key_layernorm.weight", "input_layernorm.weight",
                 "post_attention_layernorm.weight"):
        assert not model_np.is_projection(p + name), name
    for name in ("model.word_embeddings.weight", "lm_head.weight", "model.norm.weight"):
        assert not model_np.is_projection(name), name


def test_fp8_at_load_and_from_a_block_checkpoint(tiny_model_dirs, tiny_models):
    folder = tiny_model_dirs[ARCH]
    plain = tiny_models[ARCH]
    segments = segment_ids(ARCH, 12, 8, 4)
    float_logits = plain.forward(TOKENS, segments)
    fp8 = ReferenceModel.from_dir(folder, quantize_fp8=True)
    for quantized, original in zip(fp8.layers, plain.layers):
        assert set(quantized["fp8"]) == {"q", "k", "v", "o", "mlp_in", "mlp_hidden"}
        for key in ("attn_norm", "mlp_norm", "q_norm", "k_norm", "router", "expert_bias"):
            if key in original:
                np.testing.assert_array_equal(quantized[key], original[key])
        assert not np.array_equal(quantized["q"], original["q"])
    # quantized per row at load: the fused matrix's rows are the split q / k / v rows
    tensors = safetensors_np.load_checkpoint(folder)
    fused = tensors["model.layers.0.attention.query_key_value.weight"]
    np.testing.assert_array_equal(fp8.layers[0]["k"], fp8_np.fake_quantize_weight(fused)[128:192])
    fp8_logits = fp8.forward(TOKENS, segments)
    assert not np.array_equal(fp8_logits, float_logits)
    assert np.abs(fp8_logits - float_logits).max() < 0.2 * np.abs(float_logits).max()
    block = {}
    for name, array in tensors.items():
        if model_np.is_projection(name):
            codes, scale = fp8_np.quantize_weight_codes(array, block=128)
            block[name] = fp8_np.decode(codes).astype(np.float32)
            block[name[:-len("weight")] + "weight_scale_inv"] = scale
        else:
            block[name] = array
    blocked = ReferenceModel(plain.config, block)
    assert set(blocked.layers[1]["fp8"].values()) == {128}
    block_logits = blocked.forward(TOKENS, segments)
    assert np.abs(block_logits - float_logits).max() < 0.2 * np.abs(float_logits).max()
