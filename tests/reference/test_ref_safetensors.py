"""safetensors reader: dtype conversions (exact), shards through the index, malformed files."""

import json
import struct

import numpy as np
import pytest

import safetensors_np


def write_raw(path, header, data):
    header_bytes = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(header_bytes)) + header_bytes + data)


def test_every_supported_dtype_reads_back_exactly(tmp_path):
    # bf16 0x3FC0 = 1.5, 0xC000 = -2, 0x3F81 = 1 + 2^-7, 0x0001 = smallest subnormal 2^-133.
    bf16 = np.array([0x3FC0, 0xC000, 0x3F81, 0x0001], dtype="<u2").tobytes()
    f16 = np.array([0.5, -65504.0, 2.0 ** -24], dtype="<f2").tobytes()
    f32 = np.array([[1e-30, -3.25]], dtype="<f4").tobytes()
    header = {"b": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]},
              "h": {"dtype": "F16", "shape": [3], "data_offsets": [8, 14]},
              "f": {"dtype": "F32", "shape": [1, 2], "data_offsets": [14, 22]}}
    write_raw(tmp_path / "all.safetensors", header, bf16 + f16 + f32)
    tensors = safetensors_np.read_safetensors(tmp_path / "all.safetensors")
    assert all(t.dtype == np.float32 for t in tensors.values())
    assert tensors["b"].tolist() == [[1.5, -2.0], [1.0 + 2 ** -7, 2.0 ** -133]]
    assert tensors["h"].tolist() == [0.5, -65504.0, 2.0 ** -24]
    assert tensors["f"].tolist() == [[float(np.float32(1e-30)), -3.25]]


def test_metadata_entry_is_skipped_and_offsets_are_honoured(tmp_path):
    data = np.array([7.0], dtype="<f4").tobytes() + np.array([1.0, 2.0], dtype="<f4").tobytes()
    header = {"__metadata__": {"format": "pt"},
              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
              "a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}
    write_raw(tmp_path / "m.safetensors", header, data)
    tensors = safetensors_np.read_safetensors(tmp_path / "m.safetensors")
    assert sorted(tensors) == ["a", "b"]
    assert tensors["a"].shape == () and float(tensors["a"]) == 7.0
    assert tensors["b"].tolist() == [1.0, 2.0]


def test_sharded_checkpoint_equals_single_file(make_model):
    one = safetensors_np.load_checkpoint(make_model("sdar_moe", seed=3))
    many = safetensors_np.load_checkpoint(make_model("sdar_moe", "--shards", "3", seed=3))
    assert sorted(one) == sorted(many)
    for name in one:
        np.testing.assert_array_equal(one[name], many[name])


def test_half_precision_checkpoints_round_the_float32_weights(make_model):
    # Same seed, same fp32 draws: bf16 keeps 8 significant bits, f16 11, so rounding to nearest
    # errs by at most 2^-8 and 2^-11 relative for normal numbers.
    exact = safetensors_np.load_checkpoint(make_model("llada", "--dtype", "f32", seed=4))
    for dtype, bound in (("bf16", 2.0 ** -8), ("f16", 2.0 ** -11)):
        rounded = safetensors_np.load_checkpoint(make_model("llada", "--dtype", dtype, seed=4))
        for name, value in exact.items():
            normal = np.abs(value) > 1e-4  # away from f16's subnormal range
            error = np.abs(rounded[name] - value)[normal] / np.abs(value)[normal]
            assert error.max(initial=0.0) <= bound, (dtype, name)
        assert any(not np.array_equal(rounded[n], exact[n]) for n in exact)


@pytest.mark.parametrize("header, data, message", [
    ({"w": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8, "unsupported dtype"),
    ({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, "data_offsets"),
    ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8, "data_offsets"),
])
def test_malformed_entries_name_the_tensor(tmp_path, header, data, message):
    path = tmp_path / "bad.safetensors"
    write_raw(path, header, data)
    with pytest.raises(ValueError, match=f"tensor w .*{message}"):
        safetensors_np.read_safetensors(path)


def test_truncated_files_are_rejected(tmp_path):
    short = tmp_path / "short.safetensors"
    short.write_bytes(b"\x01\x02")
    with pytest.raises(ValueError, match="too short"):
        safetensors_np.read_safetensors(short)
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(ValueError, match="exceeds the file size"):
        safetensors_np.read_safetensors(cut)


def test_index_naming_a_tensor_its_shard_lacks_is_rejected(make_model):
    folder = make_model("llada", "--shards", "2", seed=1)
    index_path = f"{folder}/model.safetensors.index.json"
    with open(index_path, encoding="utf-8") as handle:
        index = json.load(handle)
    index["weight_map"]["model.transformer.extra.weight"] = "model-00001-of-00002.safetensors"
    with open(index_path, "w", encoding="utf-8") as handle:
        json.dump(index, handle)
    with pytest.raises(ValueError, match="model.transformer.extra.weight"):
        safetensors_np.load_checkpoint(folder)
