"""Reads HF safetensors checkpoints (one file, or shards listed by model.safetensors.index.json)
into float32 NumPy arrays, as the engine converts every weight to fp32 before computing (FP8
e4m3 tensors to their codes' values, fp8_np.decode).

File layout: 8-byte little-endian header length N, N bytes of JSON
({name: {dtype, shape, data_offsets: [begin, end]}, optional "__metadata__"}), then the data;
offsets are relative to the first byte after the header.
"""

import json
import os
import struct

import numpy as np

import fp8_np

_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "F8_E4M3": np.dtype("u1")}
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


def _to_float32(raw, dtype_name):
    if dtype_name == "BF16":
        # bf16 is the top half of an fp32: widen the bits, no rounding involved.
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if dtype_name == "F8_E4M3":
        return fp8_np.decode(raw).astype(np.float32)
    return raw.astype(np.float32)


def read_safetensors(path):
    """{tensor name: float32 array} for every tensor of one .safetensors file."""
    with open(path, "rb") as handle:
        blob = handle.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: {len(blob)} bytes, too short for a safetensors header")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ValueError(f"{path}: header length {header_len} exceeds the file size {len(blob)}")
    try:
        header = json.loads(blob[8:8 + header_len])
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: header is not valid JSON ({error})") from error
    data = memoryview(blob)[8 + header_len:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype_name = entry.get("dtype")
        if dtype_name not in _DTYPES:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {dtype_name!r}")
        shape = [int(d) for d in entry["shape"]]
        begin, end = (int(x) for x in entry["data_offsets"])
        expected = int(np.prod(shape, dtype=np.int64)) * _DTYPES[dtype_name].itemsize
        if not 0 <= begin <= end <= len(data) or end - begin != expected:
            raise ValueError(f"{path}: tensor {name} has data_offsets [{begin}, {end}] but needs "
                             f"{expected} bytes inside a data section of {len(data)} bytes")
        raw = np.frombuffer(data[begin:end], dtype=_DTYPES[dtype_name]).reshape(shape)
        tensors[name] = _to_float32(raw, dtype_name)
    return tensors


def load_checkpoint(model_dir):
    """All tensors of a HF model folder, resolving shards through the index when present."""
    index_path = os.path.join(model_dir, INDEX_FILE)
    if not os.path.exists(index_path):
        return read_safetensors(os.path.join(model_dir, SINGLE_FILE))
    with open(index_path, encoding="utf-8") as handle:
        weight_map = json.load(handle)["weight_map"]
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        for name, array in read_safetensors(os.path.join(model_dir, shard)).items():
            if weight_map.get(name) == shard:
                tensors[name] = array
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise ValueError(f"{index_path}: tensors listed but not found in their shard: "
                         f"{', '.join(missing[:5])}")
    return tensors
