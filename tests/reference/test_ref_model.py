"""Forward pieces against direct formulas, the segment mask rule, config and weight loading."""

import dataclasses
import json
import math
import shutil

import numpy as np
import pytest

import config_np
import model_np
from model_dirs import edit_config
from model_np import ReferenceModel, block_logits, head_logits, segment_ids, shifted_block_logits


def test_rms_norm_direct_formula():
    out = model_np.rms_norm(np.array([3.0, 4.0]), np.array([1.0, 2.0]), 0.0)
    rms = math.sqrt(12.5)
    assert out.tolist() == pytest.approx([3 / rms, 8 / rms], rel=1e-15)
    with_eps = model_np.rms_norm(np.array([1.0, 1.0]), np.ones(2), 1.0)
    assert with_eps.tolist() == pytest.approx([1 / math.sqrt(2)] * 2, rel=1e-15)


def test_rope_rotates_pairs_i_and_i_plus_half():
    x = np.array([1.0, 2.0, 3.0, 4.0]).reshape(1, 1, 4)
    out = model_np.rope(x, [2], theta=100.0)[0, 0]
    # head_dim 4: pair (0, 2) rotates by 2 * 100^0 = 2, pair (1, 3) by 2 * 100^-0.5 = 0.2.
    expected = [1 * math.cos(2) - 3 * math.sin(2), 2 * math.cos(0.2) - 4 * math.sin(0.2),
                3 * math.cos(2) + 1 * math.sin(2), 4 * math.cos(0.2) + 2 * math.sin(0.2)]
    assert out.tolist() == pytest.approx(expected, rel=1e-14)
    assert model_np.rope(x, [0], theta=100.0).tolist() == x.tolist()


def test_rope_scores_depend_only_on_relative_position():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((1, 1, 8)), rng.standard_normal((1, 1, 8))

    def score(query_position, key_position):
        return float((model_np.rope(q, [query_position], 1e4) *
                      model_np.rope(k, [key_position], 1e4)).sum())

    assert score(7, 3) == pytest.approx(score(104, 100), rel=1e-12)
    assert score(7, 3) != pytest.approx(score(7, 4), rel=1e-6)


def test_attention_single_head_by_hand():
    q = np.array([[[1.0, 0.0]]])
    k = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])
    v = np.array([[[1.0, 2.0]], [[3.0, 4.0]]])
    w0 = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1)
    out = model_np.attention(q, k, v, np.array([[True, True]]))[0, 0]
    assert out.tolist() == pytest.approx([w0 * 1 + (1 - w0) * 3, w0 * 2 + (1 - w0) * 4], rel=1e-14)
    only_first = model_np.attention(q, k, v, np.array([[True, False]]))[0, 0]
    assert only_first.tolist() == [1.0, 2.0]


def test_attention_groups_query_heads_onto_kv_heads():
    q = np.zeros((1, 4, 2))  # equal scores: each head averages its kv head's values
    k = np.zeros((2, 2, 2))
    v = np.array([[[1.0, 1.0], [10.0, 10.0]], [[3.0, 3.0], [30.0, 30.0]]])
    out = model_np.attention(q, k, v, np.ones((1, 2), dtype=bool))[0]
    assert out.tolist() == [[2.0, 2.0], [2.0, 2.0], [20.0, 20.0], [20.0, 20.0]]


def test_swiglu_by_hand():
    out = model_np.swiglu(np.array([[1.0]]), np.array([[1.0]]), np.array([[2.0]]),
                          np.array([[3.0]]))
    assert float(out[0, 0]) == pytest.approx(6.0 / (1.0 + math.exp(-1.0)), rel=1e-15)


def test_moe_routing_softmax_top_k_renormalised():
    logits = np.log(np.array([[1.0, 2.0, 3.0, 4.0]]))
    experts, weights = model_np.moe_routing(logits, 2, norm_topk_prob=True)
    assert experts.tolist() == [[3, 2]]
    assert weights.tolist()[0] == pytest.approx([4 / 7, 3 / 7], rel=1e-14)
    _, raw = model_np.moe_routing(logits, 2, norm_topk_prob=False)
    assert raw.tolist()[0] == pytest.approx([0.4, 0.3], rel=1e-14)
    tied, _ = model_np.moe_routing(np.array([[1.0, 1.0, 1.0, 0.0]]), 2, True)
    assert tied.tolist() == [[0, 1]]


def test_moe_mlp_sums_weighted_experts():
    # Expert e maps x to (e + 1) * silu(x) * x through 1x1 matrices; router picks 2 and 3.
    experts = [(np.array([[1.0]]), np.array([[1.0]]), np.array([[e + 1.0]])) for e in range(4)]
    router = np.array([[0.0], [0.0], [math.log(2.0)], [math.log(6.0)]])
    x = np.array([[1.0]])  # router logits = [0, 0, ln 2, ln 6]
    silu_x_times_x = 1.0 / (1.0 + math.exp(-1.0))
    expected = (0.75 * 4 + 0.25 * 3) * silu_x_times_x
    out = model_np.moe_mlp(x, router, experts, top_k=2, norm_topk_prob=True)
    assert float(out[0, 0]) == pytest.approx(expected, rel=1e-14)


def test_segment_ids():
    assert segment_ids("sdar", 10, 4, 4).tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert segment_ids("llada", 12, 8, 4).tolist() == [0] * 8 + [1] * 4
    assert segment_ids("llada", 7, 0, 3).tolist() == [1, 1, 1, 2, 2, 2, 3]
    # Dream attends like LLaDA, Fast-dLLM v2 and LLaDA2-MoE like SDAR.
    for x in ((12, 8, 4), (7, 0, 3), (13, 4, 4)):
        assert segment_ids("dream", *x).tolist() == segment_ids("llada", *x).tolist()
        assert segment_ids("fast_dllm_v2", *x).tolist() == segment_ids("sdar", *x).tolist()
        assert segment_ids("llada2_moe", *x).tolist() == segment_ids("sdar", *x).tolist()


def test_zero_layers_leave_embedding_norm_and_head_without_shift(tiny_model_dirs):
    model = ReferenceModel.from_dir(tiny_model_dirs["sdar"])
    for layer in model.layers:  # no attention output, no MLP output: h stays the embedding
        layer["o"] = np.zeros_like(layer["o"])
        layer["mlp"] = tuple(np.zeros_like(w) for w in layer["mlp"])
    tokens = [5, 9, 3, 30, 12]
    logits = model.forward(tokens, segment_ids("sdar", 5, 0, 4))
    expected = model_np.rms_norm(model.embed[tokens], model.final_norm, 1e-6) @ model.head.T
    np.testing.assert_allclose(logits, expected, rtol=1e-13)


@pytest.mark.parametrize("arch", ["sdar", "sdar_moe", "fast_dllm_v2", "llada2_moe"])
def test_block_causal_logits_ignore_later_blocks(tiny_models, arch):
    model = tiny_models[arch]
    sequence = [3, 8, 13, 21, 34, 5, 6, 7, 40, 41, 42, 43]
    full = model.forward(sequence, segment_ids(arch, 12, 4, 4))
    alone = block_logits(model, sequence[:4], sequence[4:8], 4, 4)
    # atol: float64 rounding of a logit near zero, which summation order (the BLAS kernel a
    # matrix size takes) moves by ~1e-14.
    np.testing.assert_allclose(full[4:8], alone, rtol=1e-12, atol=1e-12)
    changed_later = sequence[:8] + [9, 9, 9, 9]
    np.testing.assert_allclose(model.forward(changed_later, segment_ids(arch, 12, 4, 4))[:8],
                               full[:8], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("arch", ["sdar", "llada", "fast_dllm_v2", "dream", "llada2_moe"])
def test_attention_is_bidirectional_inside_a_segment(tiny_models, arch):
    model = tiny_models[arch]
    sequence = [3, 8, 13, 21, 34, 5, 6, 7]
    base = block_logits(model, sequence[:4], sequence[4:], 4, 4)
    changed = block_logits(model, sequence[:4], sequence[4:7] + [11], 4, 4)
    assert not np.allclose(base[0], changed[0])  # position 4 sees position 7


def test_llada_prefill_is_bidirectional_but_sdar_prefill_is_block_causal(tiny_models):
    prompt = [3, 8, 13, 21, 34, 5, 6, 7]
    other = prompt[:7] + [11]
    for arch, prefill_sees_later_block in (("llada", True), ("sdar", False), ("dream", True),
                                           ("fast_dllm_v2", False), ("llada2_moe", False)):
        model = tiny_models[arch]
        rows = model.forward(prompt, segment_ids(arch, 8, 8, 4))[0]
        rows_other = model.forward(other, segment_ids(arch, 8, 8, 4))[0]
        assert (not np.allclose(rows, rows_other)) == prefill_sees_later_block, arch


def _json(folder, name):
    with open(f"{folder}/{name}", encoding="utf-8") as handle:
        return json.load(handle)


def test_config_reads_eos_from_generation_config_then_config(tiny_model_dirs, tmp_path):
    folder = tiny_model_dirs["sdar"]
    config, raw = config_np.load_config(folder), _json(folder, "config.json")
    assert config.family == "sdar" and config.mask_token_id == raw["mask_token_id"]
    assert list(config.eos_token_ids) == _json(folder, "generation_config.json")["eos_token_id"]
    assert (config.head_dim, config.num_heads, config.hidden_size) == (32, 4, 64)
    copy = tmp_path / "no_generation_config"
    shutil.copytree(tiny_model_dirs["llada"], copy)
    (copy / "generation_config.json").unlink()
    llada = config_np.load_config(str(copy))
    assert llada.family == "llada" and llada.rms_norm_eps == 1e-5
    assert llada.eos_token_ids == (_json(copy, "config.json")["eos_token_id"],)


def test_moe_layer_rule_follows_sparse_step_and_mlp_only_layers(tiny_model_dirs, tmp_path):
    folder = edit_config(tiny_model_dirs["sdar_moe"], tmp_path / "moe",
                         lambda c: c.update({"num_hidden_layers": 4, "decoder_sparse_step": 2, "mlp_only_layers": [3]}))
    assert config_np.load_config(folder).moe_layers == (False, True, False, False)


def test_missing_mask_token_id_falls_back_to_family_default(tiny_model_dirs, tmp_path):
    folder = edit_config(tiny_model_dirs["llada"], tmp_path / "no_mask", lambda c: c.pop("mask_token_id"))
    assert config_np.load_config(folder).mask_token_id == 126336


def test_tied_embeddings_fall_back_to_the_embedding(tiny_model_dirs, tiny_models):
    config = config_np.load_config(tiny_model_dirs["sdar"])
    tensors = model_np.safetensors_np.load_checkpoint(tiny_model_dirs["sdar"])
    del tensors["lm_head.weight"]
    with pytest.raises(ValueError, match="lm_head.weight is missing"):
        ReferenceModel(config, tensors)
    tied = ReferenceModel(dataclasses.replace(config, tie_word_embeddings=True), tensors)
    assert tied.head is tied.embed
    np.testing.assert_array_equal(tied.embed, tiny_models["sdar"].embed)


def test_bad_inputs_name_the_problem(tiny_model_dirs, tiny_models, tmp_path):
    config = config_np.load_config(tiny_model_dirs["sdar"])
    tensors = model_np.safetensors_np.load_checkpoint(tiny_model_dirs["sdar"])
    tensors["model.layers.1.self_attn.k_proj.weight"] = np.zeros((3, 64), dtype=np.float32)
    # 2 kv heads of 32 over a hidden size of 64.
    with pytest.raises(ValueError, match=r"k_proj.weight has shape \[3, 64\], expected \[64, 64\]"):
        ReferenceModel(config, tensors)
    rows = tiny_models["sdar"].embed.shape[0]
    with pytest.raises(ValueError, match=f"token id {rows} is outside"):
        tiny_models["sdar"].forward([1, rows], [0, 0])
    folder = tmp_path / "unknown"
    shutil.copytree(tiny_model_dirs["sdar"], folder)
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ValueError, match="unknown architecture"):
        config_np.load_config(str(folder))


# --- Fast-dLLM v2 and Dream: Qwen2 config keys, q/k/v biases, shifted logits -------------------

@pytest.mark.parametrize("arch, model_type, architecture", [
    ("fast_dllm_v2", "Fast_dLLM_Qwen", "Fast_dLLM_QwenForCausalLM"),
    ("dream", "Dream", "DreamModel")])
def test_qwen2_families_are_detected_by_model_type_or_architectures(tiny_model_dirs, tmp_path, arch,
                                                                    model_type, architecture):
    raw = _json(tiny_model_dirs[arch], "config.json")
    assert raw["model_type"] == model_type and raw["architectures"] == [architecture]
    config = config_np.load_config(tiny_model_dirs[arch])
    assert config.family == arch and config.qkv_bias and config.shifted_logits
    assert not config.qk_norm and config.moe_layers == (False, False)
    by_architecture = edit_config(tiny_model_dirs[arch], tmp_path / "arch",
                                   lambda c: c.pop("model_type"))
    assert config_np.load_config(by_architecture) == config
    by_model_type = edit_config(tiny_model_dirs[arch], tmp_path / "type",
                                 lambda c: c.update(architectures=["SomethingElse"]))
    assert config_np.load_config(by_model_type) == config


def test_qwen2_config_keys_and_their_defaults(tiny_model_dirs, tmp_path):
    folder = tiny_model_dirs["fast_dllm_v2"]
    raw, config = _json(folder, "config.json"), config_np.load_config(folder)
    assert "head_dim" not in raw and config.head_dim == 64 // 4  # hidden / heads
    assert (config.num_heads, config.num_kv_heads, config.hidden_size) == (4, 2, 64)
    assert config.block_size == raw["bd_size"] == 4
    assert config.mask_token_id == raw["mask_token_id"]  # the small vocabulary's mask
    assert list(config.eos_token_ids) == _json(folder, "generation_config.json")["eos_token_id"]

    def strip(c):  # what the real Fast-dLLM v2 configs lack, or leave to their defaults
        for key in ("bd_size", "mask_token_id", "tie_word_embeddings", "eos_token_id"):
            c.pop(key)
        c["num_key_value_heads"] = None
    bare = config_np.load_config(edit_config(folder, tmp_path / "bare", strip, False))
    assert (bare.block_size, bare.mask_token_id, bare.num_kv_heads) == (32, 151665, 4)
    assert bare.eos_token_ids == (151645, 151643) and bare.tie_word_embeddings is False
    no_kv_key = edit_config(folder, tmp_path / "no_kv", lambda c: c.pop("num_key_value_heads"))
    assert config_np.load_config(no_kv_key).num_kv_heads == 4
    # Fast-dLLM v2 reads head_dim where given (transformers' Qwen2 does), Dream refuses another.
    wide = edit_config(folder, tmp_path / "wide", lambda c: c.update(head_dim=32))
    assert config_np.load_config(wide).head_dim == 32
    dream_folder = tiny_model_dirs["dream"]
    dream = config_np.load_config(dream_folder)
    assert dream.block_size == 32
    assert dream.mask_token_id == _json(dream_folder, "config.json")["mask_token_id"]
    assert dream.eos_token_ids == (_json(dream_folder, "generation_config.json")["eos_token_id"],)
    bare_dream = config_np.load_config(edit_config(
        dream_folder, tmp_path / "bare_dream",
        lambda c: [c.pop(k) for k in ("mask_token_id", "eos_token_id")], False))
    assert (bare_dream.mask_token_id, bare_dream.eos_token_ids) == (151666, (151643,))
    same_head_dim = edit_config(dream_folder, tmp_path / "same", lambda c: c.update(head_dim=16))
    assert config_np.load_config(same_head_dim).head_dim == 16
    with pytest.raises(ValueError, match="head_dim 32 differs"):
        config_np.load_config(edit_config(dream_folder, tmp_path / "d32",
                                           lambda c: c.update(head_dim=32)))
    # Dream's code has q/k/v biases whatever attention_bias says.
    for value in (False, True):
        flagged = edit_config(dream_folder, tmp_path / f"bias_{value}",
                               lambda c: c.update(attention_bias=value))
        assert config_np.load_config(flagged).qkv_bias
        ReferenceModel.from_dir(flagged)
    # Default rope scaling in either spelling, and no sliding window, are accepted.
    for index, (key, value) in enumerate((("rope_scaling", {"rope_type": "default"}),
                                          ("rope_scaling", {"type": "default"}),
                                          ("use_sliding_window", False))):
        accepted = edit_config(folder, tmp_path / f"ok_{index}", lambda c: c.update({key: value}))
        assert config_np.load_config(accepted) == config


@pytest.mark.parametrize("arch", ["fast_dllm_v2", "dream"])
@pytest.mark.parametrize("key, value", [("use_sliding_window", True),
                                        ("rope_scaling", {"rope_type": "yarn", "factor": 4.0}),
                                        ("rope_scaling", {"type": "linear", "factor": 2.0}),
                                        ("hidden_act", "gelu")])
def test_qwen2_unsupported_keys_are_refused_by_name(tiny_model_dirs, tmp_path, arch, key, value):
    folder = edit_config(tiny_model_dirs[arch], tmp_path / "bad", lambda c: c.update({key: value}))
    with pytest.raises(ValueError, match=key):
        config_np.load_config(folder)


@pytest.mark.parametrize("arch", ["fast_dllm_v2", "dream"])
def test_qkv_biases_are_read_and_change_the_logits(tiny_model_dirs, tiny_models, arch):
    model = tiny_models[arch]
    tokens = [3, 8, 13, 21, 34, 5, 6, 7]
    segments = segment_ids(arch, 8, 4, 4)
    base = model.forward(tokens, segments)
    for key in ("q_bias", "k_bias", "v_bias"):
        assert np.abs(model.layers[0][key]).max() > 0.1  # the generator's biases are not zero
        saved = [layer[key] for layer in model.layers]
        for layer in model.layers:
            layer[key] = np.zeros_like(layer[key])
        try:
            changed = model.forward(tokens, segments)
        finally:
            for layer, bias in zip(model.layers, saved):
                layer[key] = bias
        # A q or k bias moves attention scores (all but a softmax-invariant part), v the values.
        assert not np.allclose(changed[1:], base[1:], rtol=1e-6), key
    config = config_np.load_config(tiny_model_dirs[arch])
    tensors = model_np.safetensors_np.load_checkpoint(tiny_model_dirs[arch])
    del tensors["model.layers.1.self_attn.v_proj.bias"]
    with pytest.raises(ValueError, match="v_proj.bias is missing"):
        ReferenceModel(config, tensors)


def test_qkv_bias_is_added_before_rope(tiny_models):
    """One layer's q by hand: (x Wq^T + bq), then RoPE at the row's position; a bias added after
    RoPE would give another q for every position but 0."""
    model = tiny_models["fast_dllm_v2"]
    layer, c = model.layers[0], model.config
    x = model_np.rms_norm(model.embed[[3, 8, 13]], layer["attn_norm"], c.rms_norm_eps)
    q = (x @ layer["q"].T + layer["q_bias"]).reshape(3, c.num_heads, c.head_dim)
    want = model_np.rope(q, [0, 1, 2], c.rope_theta)
    unbiased = (x @ layer["q"].T).reshape(3, c.num_heads, c.head_dim)
    wrong = model_np.rope(unbiased, [0, 1, 2], c.rope_theta) + \
        layer["q_bias"].reshape(c.num_heads, c.head_dim)
    assert not np.allclose(want[1:], wrong[1:])
    captured = {}
    original = model_np.rope

    def spy(values, positions, theta):
        captured.setdefault("q", values)  # the first call of the first layer rotates q
        return original(values, positions, theta)

    model_np.rope = spy
    try:
        model.forward([3, 8, 13], [0, 0, 0])
    finally:
        model_np.rope = original
    np.testing.assert_allclose(original(captured["q"], [0, 1, 2], c.rope_theta), want, rtol=1e-13)


@pytest.mark.parametrize("arch", ["fast_dllm_v2", "dream"])
def test_shifted_rows_are_the_rows_before_each_position(tiny_models, arch):
    model = tiny_models[arch]
    committed, block = [3, 8, 13, 21, 34, 5, 6, 7], [40, 41, 42, 43]
    for num_prefill in (8, 4):  # a whole-prompt prefill, and one that stops at P - B
        unshifted = block_logits(model, committed, block, num_prefill, 4)
        shifted = shifted_block_logits(model, committed, block, num_prefill, 4)
        full = model.forward(committed + block, segment_ids(arch, 12, num_prefill, 4))
        np.testing.assert_allclose(shifted[1:], unshifted[:-1], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(shifted, full[7:11], rtol=1e-12, atol=1e-12)
        # Row 0 (the head row) never sees the block: the head step's own forward gives it.
        head = head_logits(model, committed, num_prefill, 4)
        np.testing.assert_allclose(shifted[0], head, rtol=1e-12, atol=1e-12)
        other = shifted_block_logits(model, committed, [9, 9, 9, 9], num_prefill, 4)
        np.testing.assert_allclose(other[0], head, rtol=1e-12, atol=1e-12)
        assert not np.allclose(other[1:], shifted[1:])
    # With the prefill at P - B the prompt's last block is its own segment: for Dream it no
    # longer sees itself as part of the prefill, so its rows differ; block-causal ones do not.
    same = np.allclose(head_logits(model, committed, 8, 4), head_logits(model, committed, 4, 4),
                       rtol=1e-12, atol=1e-12)
    assert same == (arch == "fast_dllm_v2")
    # The first block of a prompt shorter than B starts at 0: no row before position 0.
    first = shifted_block_logits(model, [], [3, 8, 40, 41], 0, 4)
    assert np.isnan(first[0]).all()
    np.testing.assert_allclose(first[1:], block_logits(model, [], [3, 8, 40, 41], 0, 4)[:3],
                               rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="head step"):
        head_logits(model, [], 0, 4)


def test_qwen2_fp8_at_load_keeps_the_biases_in_float(tiny_model_dirs, tiny_models):
    folder = tiny_model_dirs["fast_dllm_v2"]
    tensors = model_np.safetensors_np.load_checkpoint(folder)
    biases = [name for name in tensors if name.endswith(".bias")]
    assert len(biases) == 3 * 2 and not any(model_np.is_projection(name) for name in biases)
    assert model_np.is_projection("model.layers.0.self_attn.q_proj.weight")
    fp8 = ReferenceModel.from_dir(folder, quantize_fp8=True)
    for quantized, plain in zip(fp8.layers, tiny_models["fast_dllm_v2"].layers):
        assert set(quantized["fp8"]) == {"q", "k", "v", "o", "mlp_in", "mlp_hidden"}
        for key in ("q_bias", "k_bias", "v_bias"):
            np.testing.assert_array_equal(quantized[key], plain[key])
    tokens, segments = [3, 8, 13, 21, 34], segment_ids("fast_dllm_v2", 5, 4, 4)
    float_logits = tiny_models["fast_dllm_v2"].forward(tokens, segments)
    fp8_logits = fp8.forward(tokens, segments)
    assert not np.array_equal(fp8_logits, float_logits)
    assert np.abs(fp8_logits - float_logits).max() < 0.2 * np.abs(float_logits).max()
