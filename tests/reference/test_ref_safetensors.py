"""safetensors reader: dtype conversions (exact), shards through the index, malformed files."""

import json
import struct

import numpy as np
import pytest

import safetensors_np
import tiny_model_np


def write_raw(path, header, data):
    header_bytes = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(header_bytes)) + header_bytes + data)


def test_bf16_bits_widen_to_the_exact_float32():
    # 0x3FC0 = 1.5, 0xC000 = -2, 0x3F81 = 1 + 2^-7, 0x0001 = smallest bf16 subnormal 2^-133.
    bits = np.array([0x3FC0, 0xC000, 0x3F81, 0x0001], dtype="<u2")
    expected = [1.5, -2.0, 1.0 + 2 ** -7, 2.0 ** -133]
    assert safetensors_np._to_float32(bits, "BF16").tolist() == expected


def test_round_trip_of_every_supported_dtype(tmp_path):
    values = np.array([[0.5, -1.25, 3.0], [1e-3, 65504.0, -0.0]], dtype=np.float32)
    for dtype_name, stored in (("F32", values), ("F16", values.astype(np.float16)),
                               ("BF16", values)):
        path = tmp_path / f"{dtype_name}.safetensors"
        tiny_model_np.write_safetensors(path, {"x": values}, dtype_name)
        read = safetensors_np.read_safetensors(path)["x"]
        assert read.dtype == np.float32 and read.shape == (2, 3)
        if dtype_name == "BF16":
            bits = tiny_model_np._bf16_bits(values).astype(np.uint32) << 16
            np.testing.assert_array_equal(read, bits.view(np.float32))
        else:
            np.testing.assert_array_equal(read, stored.astype(np.float32))


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


def test_sharded_checkpoint_equals_single_file(tmp_path):
    single = tiny_model_np.write_tiny_model(str(tmp_path / "single"), "sdar", seed=3)
    sharded = tiny_model_np.write_tiny_model(str(tmp_path / "sharded"), "sdar", seed=3, shards=3)
    one, many = safetensors_np.load_checkpoint(single), safetensors_np.load_checkpoint(sharded)
    assert sorted(one) == sorted(many)
    for name in one:
        np.testing.assert_array_equal(one[name], many[name])


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


def test_index_naming_a_tensor_its_shard_lacks_is_rejected(tmp_path):
    folder = tiny_model_np.write_tiny_model(str(tmp_path / "m"), "llada", seed=1, shards=2)
    index_path = tmp_path / "m" / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    index["weight_map"]["model.transformer.extra.weight"] = "model-00001-of-00002.safetensors"
    index_path.write_text(json.dumps(index))
    with pytest.raises(ValueError, match="model.transformer.extra.weight"):
        safetensors_np.load_checkpoint(folder)
