"""Read and write .safetensors files with NumPy only (no torch), including bf16.

NumPy has no bfloat16, so bf16 tensors are written from float32 with round-to-nearest-even and
read back as float32 (exactly: every bf16 value is a float32 value).
"""
import json
import struct

import numpy as np

# safetensors dtype name -> (NumPy storage dtype, element size)
_STORAGE = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "I32": np.dtype("<i4"),
            "F8_E4M3": np.dtype("u1")}


def f32_to_bf16_bits(values):
    """float32 array -> uint16 bf16 bit patterns, rounded to nearest even; NaN stays a quiet NaN."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    is_nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet_nan = (bits >> np.uint32(16)) | np.uint32(0x40)
    return np.where(is_nan, quiet_nan, rounded).astype(np.uint16)


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint32) << np.uint32(16)).view(np.float32)


def _encode(array, dtype):
    if dtype == "BF16":
        return f32_to_bf16_bits(array).astype("<u2").tobytes()
    return np.ascontiguousarray(array, dtype=_STORAGE[dtype]).tobytes()


def write_safetensors(path, tensors, dtype, metadata=None, dtypes=None):
    """Writes {name: float array} to `path`, every tensor stored as `dtype` (BF16, F16 or F32)
    but those named in `dtypes` ({name: dtype}; F8_E4M3 tensors are given as their uint8 codes).

    Layout as the reference writer: header padded with spaces to a multiple of 8 bytes, tensors
    back to back in the given order, so every tensor is aligned to its element size.
    Returns the number of data bytes written.
    """
    header = {"__metadata__": metadata or {"format": "pt"}}
    blobs = []
    offset = 0
    for name, array in tensors.items():
        tensor_dtype = (dtypes or {}).get(name, dtype)
        blob = _encode(array, tensor_dtype)
        header[name] = {"dtype": tensor_dtype, "shape": list(np.shape(array)), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    return offset


def read_header(path):
    """The parsed JSON header of a safetensors file (tensor entries and __metadata__)."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(length))


def read_safetensors(path):
    """{name: float32 array} (I32 tensors stay int32)."""
    header = read_header(path)
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        data = f.read()[length:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = np.frombuffer(data[begin:end], dtype=_STORAGE[entry["dtype"]]).reshape(entry["shape"])
        if entry["dtype"] == "BF16":
            raw = bf16_bits_to_f32(raw)
        out[name] = raw.astype(np.float32) if entry["dtype"] != "I32" else raw.copy()
    return out
