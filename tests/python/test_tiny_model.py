"""tools/make_tiny_model.py: deterministic output, the tensor names and shapes of each family (spelled
out here independently of the generator, from reference/models.md), tokenizer files that agree with
the config, and `jetengine inspect` accepting every tiny model."""
import json
import subprocess
import sys
from pathlib import Path

import jinja2
import numpy as np
import pytest
from jet_test_utils import REPO, make_tiny_model, run_cli

sys.path.insert(0, str(REPO / "tools"))
import safetensors_io  # noqa: E402

GENERATOR = REPO / "tools" / "make_tiny_model.py"
ARCHS = ("sdar", "sdar_moe", "llada")


def header_shapes(model_dir):
    """{name: shape} over all shards of a tiny model."""
    shapes = {}
    for path in sorted(Path(model_dir).glob("*.safetensors")):
        header = safetensors_io.read_header(path)
        shapes.update({k: v["shape"] for k, v in header.items() if k != "__metadata__"})
    return shapes


def expected_shapes(arch, rows, layers=2, h=64, heads=4, kv=2, d=16, inter=128, experts=8, moe_inter=32):
    if arch == "llada":
        kv = heads
        shapes = {"model.transformer.wte.weight": [rows, h], "model.transformer.ln_f.weight": [h],
                  "model.transformer.ff_out.weight": [rows, h]}
        for i in range(layers):
            b = f"model.transformer.blocks.{i}."
            shapes.update({b + "attn_norm.weight": [h], b + "q_proj.weight": [h, h], b + "k_proj.weight": [kv * d, h],
                           b + "v_proj.weight": [kv * d, h], b + "attn_out.weight": [h, h], b + "ff_norm.weight": [h],
                           b + "ff_proj.weight": [inter, h], b + "up_proj.weight": [inter, h],
                           b + "ff_out.weight": [h, inter]})
        return shapes
    shapes = {"model.embed_tokens.weight": [rows, h], "model.norm.weight": [h], "lm_head.weight": [rows, h]}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
                       p + "self_attn.q_proj.weight": [heads * d, h], p + "self_attn.k_proj.weight": [kv * d, h],
                       p + "self_attn.v_proj.weight": [kv * d, h], p + "self_attn.o_proj.weight": [h, heads * d],
                       p + "self_attn.q_norm.weight": [d], p + "self_attn.k_norm.weight": [d]})
        if arch == "sdar_moe":
            shapes[p + "mlp.gate.weight"] = [experts, h]
            for e in range(experts):
                x = f"{p}mlp.experts.{e}."
                shapes.update({x + "gate_proj.weight": [moe_inter, h], x + "up_proj.weight": [moe_inter, h],
                               x + "down_proj.weight": [h, moe_inter]})
        else:
            shapes.update({p + "mlp.gate_proj.weight": [inter, h], p + "mlp.up_proj.weight": [inter, h],
                           p + "mlp.down_proj.weight": [h, inter]})
    return shapes


def added_ids(model_dir):
    tokenizer = json.loads((Path(model_dir) / "tokenizer.json").read_text())
    return {t["content"]: t["id"] for t in tokenizer["added_tokens"]}


def files_of(model_dir):
    return {p.name: p.read_bytes() for p in sorted(Path(model_dir).iterdir())}


@pytest.mark.parametrize("arch", ARCHS)
def test_same_seed_gives_identical_files(tmp_path, arch):
    assert files_of(make_tiny_model(arch, tmp_path / "a", 3)) == files_of(make_tiny_model(arch, tmp_path / "b", 3))


def test_different_seeds_give_different_weights_only(tmp_path):
    a, b = files_of(make_tiny_model("sdar", tmp_path / "a", 1)), files_of(make_tiny_model("sdar", tmp_path / "b", 2))
    assert a["model.safetensors"] != b["model.safetensors"]
    assert {k: v for k, v in a.items() if k != "model.safetensors"} == {
        k: v for k, v in b.items() if k != "model.safetensors"}


@pytest.mark.parametrize("arch", ARCHS)
def test_tensor_names_and_shapes(tmp_path, arch):
    out = make_tiny_model(arch, tmp_path / arch, 1)
    config = json.loads((out / "config.json").read_text())
    rows = config["vocab_size"]
    assert header_shapes(out) == expected_shapes(arch, rows)


def test_custom_dimensions(tmp_path):
    out = make_tiny_model("sdar_moe", tmp_path / "m", 1, "--layers", "3", "--hidden", "32", "--heads", "8",
                          "--kv-heads", "4", "--head-dim", "8", "--experts", "4", "--top-k", "1",
                          "--moe-intermediate", "16")
    rows = json.loads((out / "config.json").read_text())["vocab_size"]
    assert header_shapes(out) == expected_shapes("sdar_moe", rows, 3, 32, 8, 4, 8, 128, 4, 16)


def test_sdar_config_keys_and_special_ids(tmp_path):
    out = make_tiny_model("sdar", tmp_path / "m", 1, "--block-size", "8")
    config = json.loads((out / "config.json").read_text())
    ids = added_ids(out)
    assert config["model_type"] == "sdar" and config["architectures"] == ["SDARForCausalLM"]
    assert config["block_size"] == 8
    assert config["mask_token_id"] == ids["<|MASK|>"]
    assert config["eos_token_id"] == config["bos_token_id"] == ids["<|endoftext|>"]
    assert config["attention_bias"] is False and config["rope_scaling"] is None
    assert config["vocab_size"] % 64 == 0 and config["vocab_size"] >= max(ids.values()) + 1
    generation = json.loads((out / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [ids["<|im_end|>"], ids["<|endoftext|>"]]


def test_llada_config_keys_and_special_ids(tmp_path):
    out = make_tiny_model("llada", tmp_path / "m", 1)
    config = json.loads((out / "config.json").read_text())
    ids = added_ids(out)
    assert config["model_type"] == "llada" and config["architectures"] == ["LLaDAModelLM"]
    assert config["n_kv_heads"] == config["n_heads"] == 4
    assert config["embedding_size"] == config["vocab_size"]
    assert config["mask_token_id"] == ids["<|mdm_mask|>"]
    assert config["eos_token_id"] == config["pad_token_id"] == ids["<|endoftext|>"]
    assert "block_size" not in config  # LLaDA configs have none
    generation = json.loads((out / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [ids["<|endoftext|>"], ids["<|eot_id|>"]]


def test_vocab_size_and_mask_token_id_give_a_real_models_ids(tmp_path):
    # LLaDA-8B's rows and mask with the small tokenizer (benchmarks of its shapes).
    out = make_tiny_model("llada", tmp_path / "m", 1, "--vocab-size", "126464", "--mask-token-id", "126336",
                          "--layers", "1", "--no-weights")
    config = json.loads((out / "config.json").read_text())
    assert config["vocab_size"] == config["embedding_size"] == 126464 and config["mask_token_id"] == 126336
    assert not list(out.glob("*.safetensors"))
    # The engine takes them, with random weights of those shapes.
    bench = run_cli(["bench", "--model", out, "--load-format", "dummy", "--device", "cpu", "--kv-cache-mb", "16",
                     "--block-length", "8", "--batches", "1", "--prompt-len", "4", "--max-tokens", "4"])
    assert bench.returncode == 0, bench.stderr
    for extra, message in ((["--vocab-size", "100"], "--vocab-size 100 is below the tokenizer's"),
                           (["--mask-token-id", "-1"], "--mask-token-id -1 is outside the vocabulary"),
                           (["--vocab-size", "640", "--mask-token-id", "640"],
                            "--mask-token-id 640 is outside the vocabulary [0, 640)")):
        result = subprocess.run(["/usr/bin/python3", str(GENERATOR), "--arch", "llada", "--out", str(tmp_path / "x"),
                                 *extra], capture_output=True, text=True)
        assert result.returncode == 1 and "error: " + message in result.stderr, extra


def test_qwen3_vocabulary_adds_the_sdar_mask(tmp_path):
    out = make_tiny_model("sdar", tmp_path / "m", 1, "--vocab", "qwen3", "--layers", "1")
    config = json.loads((out / "config.json").read_text())
    assert config["vocab_size"] == 151936 and config["mask_token_id"] == 151669
    tokenizer = json.loads((out / "tokenizer.json").read_text())
    assert tokenizer["added_tokens"][-1] == {"id": 151669, "content": "<|MASK|>", "single_word": False,
                                             "lstrip": False, "rstrip": False, "normalized": False, "special": False}
    assert len(tokenizer["model"]["vocab"]) == 151643
    tokenizer_config = json.loads((out / "tokenizer_config.json").read_text())
    assert tokenizer_config["mask_token"] == "<|MASK|>"
    assert tokenizer_config["added_tokens_decoder"]["151669"]["content"] == "<|MASK|>"


def render_chat(model_dir, text):
    config = json.loads((Path(model_dir) / "tokenizer_config.json").read_text())
    template = jinja2.Environment().from_string(config["chat_template"])
    return template.render(messages=[{"role": "user", "content": text}], add_generation_prompt=True,
                           bos_token=config["bos_token"])


def test_chat_templates(tmp_path):
    assert render_chat(make_tiny_model("sdar", tmp_path / "s", 1), "Hi") == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert render_chat(make_tiny_model("llada", tmp_path / "l", 1), " Hi ") == (
        "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n")


def test_small_tokenizer_is_byte_level_bpe(tmp_path):
    tokenizer = json.loads((make_tiny_model("sdar", tmp_path / "m", 1) / "tokenizer.json").read_text())
    model = tokenizer["model"]
    assert model["type"] == "BPE" and len(model["merges"]) == 300
    assert sorted(model["vocab"].values()) == list(range(len(model["vocab"])))
    for a, b in model["merges"]:  # every merge joins two tokens already in the vocabulary
        assert a in model["vocab"] and b in model["vocab"] and a + b in model["vocab"]
    assert tokenizer["pre_tokenizer"]["pretokenizers"][1]["type"] == "ByteLevel"


def test_sharded_checkpoint_index(tmp_path):
    out = make_tiny_model("llada", tmp_path / "m", 1, "--shards", "3", "--dtype", "f32")
    index = json.loads((out / "model.safetensors.index.json").read_text())
    shards = sorted(p.name for p in out.glob("*.safetensors"))
    assert shards == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    assert set(index["weight_map"].values()) == set(shards)
    assert set(index["weight_map"]) == set(header_shapes(out))
    data_bytes = sum(4 * int(np.prod(s)) for s in header_shapes(out).values())
    assert index["metadata"]["total_size"] == data_bytes


def test_weight_scales(tmp_path):
    out = make_tiny_model("sdar", tmp_path / "m", 1, "--dtype", "f32")
    weights = safetensors_io.read_safetensors(out / "model.safetensors")
    assert abs(weights["model.norm.weight"].mean() - 1.0) < 0.05
    assert abs(weights["model.layers.0.mlp.up_proj.weight"].std() - 1 / np.sqrt(64)) < 0.01
    assert abs(weights["model.embed_tokens.weight"].std() - 1.0) < 0.05
    assert abs(weights["lm_head.weight"].std() - 2 / np.sqrt(64)) < 0.01


def test_bf16_rounds_to_nearest_even():
    values = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, 65504.0, np.inf, np.nan], dtype=np.float32)
    bits = safetensors_io.f32_to_bf16_bits(values)
    assert list(bits[:6]) == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x4780, 0x7F80]
    assert np.isnan(safetensors_io.bf16_bits_to_f32(bits[6:]))[0]


def test_bf16_file_round_trip(tmp_path):
    x = np.array([[0.1, -3.0], [1e-3, 7.25]], dtype=np.float32)
    safetensors_io.write_safetensors(tmp_path / "x.safetensors", {"x": x}, "BF16")
    back = safetensors_io.read_safetensors(tmp_path / "x.safetensors")["x"]
    assert np.array_equal(back, safetensors_io.bf16_bits_to_f32(safetensors_io.f32_to_bf16_bits(x)))
    assert np.allclose(back, x, rtol=2**-8)


def test_rejects_inconsistent_arguments(tmp_path):
    for extra in (["--heads", "4", "--kv-heads", "3"], ["--top-k", "9"], ["--block-size", "8"]):
        arch = "llada" if extra[0] == "--block-size" else "sdar_moe"
        result = subprocess.run(["/usr/bin/python3", str(GENERATOR), "--arch", arch, "--out", str(tmp_path / "x"),
                                 *extra], capture_output=True, text=True)
        assert result.returncode == 2 and "error:" in result.stderr, extra


@pytest.mark.parametrize("arch", ARCHS)
def test_inspect_accepts_every_tiny_model(tmp_path, arch):
    out = make_tiny_model(arch, tmp_path / arch, 1, "--shards", "2")
    text = run_cli(["inspect", "--model", out])
    assert text.returncode == 0, text.stderr
    assert "weights: OK" in text.stdout and "tokenizer: OK" in text.stdout
    listing = run_cli(["inspect", "--model", out, "--json"])
    assert listing.returncode == 0, listing.stderr
    report = json.loads(listing.stdout)
    assert report["model_type"] == arch and report["weights_ok"] and report["shards"] == 2
    assert report["parameters"] == sum(int(np.prod(s)) for s in header_shapes(out).values())


def test_inspect_reports_a_broken_tokenizer_and_chat_template(tmp_path):
    out = make_tiny_model("sdar", tmp_path / "m", 1)
    (out / "chat_template.jinja").write_text("{% if %}")
    result = run_cli(["inspect", "--model", out])
    assert result.returncode == 1
    assert "weights: OK" in result.stdout and "tokenizer: OK" in result.stdout
    assert "chat template: " in result.stdout and "syntax error" in result.stdout
    (out / "chat_template.jinja").unlink()
    (out / "tokenizer.json").write_text('{"model": {')
    result = run_cli(["inspect", "--model", out, "--json"])
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["weights_ok"] and not report["tokenizer_ok"] and "not valid JSON" in report["tokenizer"]


def test_inspect_reports_a_missing_tensor(tmp_path):
    out = make_tiny_model("sdar", tmp_path / "m", 1)
    tensors = safetensors_io.read_safetensors(out / "model.safetensors")
    del tensors["model.layers.1.self_attn.k_norm.weight"]
    safetensors_io.write_safetensors(out / "model.safetensors", tensors, "BF16")
    result = run_cli(["inspect", "--model", out])
    assert result.returncode == 1
    assert "missing tensor 'model.layers.1.self_attn.k_norm.weight' (expected shape [16])" in result.stdout
