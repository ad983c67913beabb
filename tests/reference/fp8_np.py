"""FP8 e4m3 as the engine runs it (docs/fp8.md), written from the format's definition.

e4m3 (float8_e4m3fn): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits, no infinity, NaN at
0x7f / 0xff, largest finite 448. A group of values (a weight row, a 128x128 weight tile, an
activation row or its 128-column slices) is scaled by scale = amax / 448 (1 for an all-zero
group) and stored as the nearest e4m3 value of x / scale, ties to the even code, saturating at
±448; it reads back as code * scale. The engine computes amax / 448 and x / scale in fp32, as
here. A product with an FP8 weight quantizes its input activations the same way, dynamically,
and multiplies the read-back values (exact: code products fit fp32).
"""

import numpy as np

MAX = 448.0


def _code_values():
    """The value of each code 0..255 from its bit fields."""
    codes = np.arange(256)
    exponent, mantissa = (codes >> 3) & 0xF, codes & 7
    values = np.where(exponent == 0, mantissa / 8.0 * 2.0 ** -6, (1 + mantissa / 8.0) * 2.0 ** (exponent - 7.0))
    values = np.where(codes & 0x80, -values, values)
    values[(codes & 0x7F) == 0x7F] = np.nan
    return values


CODE_VALUES = _code_values()
_POSITIVE = CODE_VALUES[:0x7F]  # codes 0..126: 0 .. 448, increasing


def decode(codes):
    """Values of uint8 e4m3 codes."""
    return CODE_VALUES[np.asarray(codes, dtype=np.uint8)]


def round_to_e4m3(x):
    """The nearest e4m3 value of each element (ties to the even code), saturated to ±448."""
    x = np.asarray(x, dtype=np.float64)
    magnitude = np.minimum(np.abs(x), MAX)
    upper = np.clip(np.searchsorted(_POSITIVE, magnitude, side="left"), 1, len(_POSITIVE) - 1)
    lower = upper - 1
    below, above = _POSITIVE[lower], _POSITIVE[upper]
    gap_below, gap_above = magnitude - below, above - magnitude
    pick_upper = (gap_above < gap_below) | ((gap_above == gap_below) & (upper % 2 == 0))
    rounded = np.where(pick_upper, above, below)
    return np.where(np.isnan(x), np.nan, np.copysign(rounded, x))


def _scale(amax):
    amax = np.asarray(amax, dtype=np.float32)
    return np.where(amax > 0, amax / np.float32(MAX), np.float32(1.0)).astype(np.float32)


def fake_quantize(x, group=None):
    """x [rows, cols] read back after quantization with one scale per row (group None), per row
    and `group` columns, or one for the whole tensor (group "tensor": not what the engine does,
    for benchmarks of that choice)."""
    x = np.asarray(x, dtype=np.float32)
    if group == "tensor":
        scale = _scale(np.abs(x).max())
        return round_to_e4m3(x / scale) * scale
    rows, cols = x.shape
    group = group or max(cols, 1)
    out = np.empty(x.shape, dtype=np.float64)
    for begin in range(0, cols, group):
        part = x[:, begin:begin + group]
        scale = _scale(np.abs(part).max(axis=1, keepdims=True))
        out[:, begin:begin + group] = round_to_e4m3(part / scale) * scale
    return out


def quantize_weight_codes(w, block=None):
    """The codes (uint8) and scales of fake_quantize_weight, for writing FP8 checkpoints:
    scales [N] per row, or [ceil(N/block), ceil(K/block)] per tile."""
    w = np.asarray(w, dtype=np.float32)
    n, k = w.shape
    if block is None:
        scales = _scale(np.abs(w).max(axis=1))
        values = round_to_e4m3(w / scales[:, None])
    else:
        scales = np.empty(((n + block - 1) // block, (k + block - 1) // block), dtype=np.float32)
        values = np.empty(w.shape)
        for i, r in enumerate(range(0, n, block)):
            for j, c in enumerate(range(0, k, block)):
                tile = w[r:r + block, c:c + block]
                scales[i, j] = _scale(np.abs(tile).max())
                values[r:r + block, c:c + block] = round_to_e4m3(tile / scales[i, j])
    return encode_values(values), scales


def fake_quantize_weight(w, block=None):
    """A weight [N, K] read back after quantization per output row (block None) or per
    block x block tile."""
    codes, scales = quantize_weight_codes(w, block)
    return dequantize(decode(codes), scales, block)


def encode_values(values):
    """Codes of values that are e4m3 values already (round_to_e4m3's output)."""
    values = np.asarray(values, dtype=np.float64)
    codes = np.searchsorted(_POSITIVE, np.abs(values)).astype(np.uint8)
    return np.where(np.signbit(values), codes | 0x80, codes).astype(np.uint8)


def dequantize(values, scale, block=None):
    """A checkpoint's e4m3 weight [N, K] (its codes' values, decode()) as floats: value * scale,
    the scale per tensor ([] or [1]), per row ([N] or [N, 1]) or per block x block tile
    ([ceil(N/block), ceil(K/block)])."""
    values = np.asarray(values, dtype=np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    if block is not None:
        expanded = np.repeat(np.repeat(scale, block, axis=0), block, axis=1)
        return values * expanded[:values.shape[0], :values.shape[1]]
    if scale.size == 1:
        return values * scale.reshape(())
    return values * scale.reshape(-1, 1)
