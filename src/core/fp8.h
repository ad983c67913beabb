// FP8 e4m3 (the float8_e4m3fn of PyTorch and safetensors' F8_E4M3): the conversions and the
// scaling rule every FP8 path follows (docs/fp8.md). The CUDA kernels convert with the hardware's
// round-to-nearest-even, saturating conversion, which this definition matches.
#pragma once

#include <cstdint>

namespace jet {

// The largest finite e4m3 value; the format has no infinity, and 0x7f / 0xff are NaN.
inline constexpr float kE4m3Max = 448.0f;

// Rounds to the nearest e4m3 value (ties to even), saturating to ±448; NaN stays NaN.
uint8_t f32_to_e4m3(float x);
float e4m3_to_f32(uint8_t code);

// The scale of a group of values whose largest magnitude is `amax`: the group is stored as
// e4m3(x / scale) and read back as code * scale, so its largest value lands on ±448. An all-zero
// group gets scale 1. constexpr, so that the CUDA kernels call it too.
constexpr float e4m3_scale(float amax) { return amax > 0.0f ? amax / kE4m3Max : 1.0f; }

// Quantizes n values with one scale: codes[i] = e4m3(x[i] / scale); returns the scale.
float quantize_e4m3(const float* x, int64_t n, uint8_t* codes);

// How the fp32 scales of an FP8 weight [N, K] map onto it (docs/fp8.md).
enum class Fp8Scaling : int32_t {
  PerChannel,  // scale [N]: one per output row; activations get one scale per row
  Block128,    // scale [ceil(N/128), ceil(K/128)]: one per 128x128 tile; activations one per
               // row and 128 columns (the DeepSeek / Qwen3-FP8 layout)
};

// Scales of a weight [rows, cols] under `scaling`.
inline int64_t fp8_scale_count(Fp8Scaling scaling, int64_t rows, int64_t cols) {
  return scaling == Fp8Scaling::PerChannel ? rows : (rows + 127) / 128 * ((cols + 127) / 128);
}

// Quantizes a row-major weight [rows, cols]: codes [rows, cols] and fp8_scale_count scales, each
// group (a row, or a 128x128 tile) scaled by the rule above.
void quantize_e4m3_matrix(const float* w, int64_t rows, int64_t cols, Fp8Scaling scaling, uint8_t* codes,
                          float* scales);

}  // namespace jet
