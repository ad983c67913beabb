// e4m3 conversions (fp8.h).
#include "core/fp8.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace jet {

namespace {

// Values: exponent field e (bias 7) and mantissa m; e == 0 is subnormal, m / 8 * 2^-6.
std::array<float, 256> decode_table() {
  std::array<float, 256> table{};
  for (int code = 0; code < 256; ++code) {
    const int e = (code >> 3) & 0xf, m = code & 7;
    float v = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
    if ((code & 0x7f) == 0x7f) v = NAN;
    table[code] = code & 0x80 ? -v : v;
  }
  return table;
}

}  // namespace

float e4m3_to_f32(uint8_t code) {
  static const std::array<float, 256> table = decode_table();
  return table[code];
}

uint8_t f32_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::fabs(x);
  if (a >= kE4m3Max) return sign | 0x7e;
  // Below 2^-6 the spacing is 2^-9: the code is the rounded multiple (8 rounds up to 2^-6, 0x08).
  if (a < 0x1p-6f) return sign | static_cast<uint8_t>(std::nearbyint(std::ldexp(a, 9)));
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): the leading bit is 2^(e - 1)
  const int exponent = e - 1;
  int mantissa = static_cast<int>(std::nearbyint(std::ldexp(a, 3 - exponent)));  // in [8, 16]
  int field = exponent + 7;
  if (mantissa == 16) {
    mantissa = 8;
    ++field;
  }
  return sign | static_cast<uint8_t>(field << 3 | (mantissa - 8));
}

float quantize_e4m3(const float* x, int64_t n, uint8_t* codes) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float scale = e4m3_scale(amax);
  for (int64_t i = 0; i < n; ++i) codes[i] = f32_to_e4m3(x[i] / scale);
  return scale;
}

void quantize_e4m3_matrix(const float* w, int64_t rows, int64_t cols, Fp8Scaling scaling, uint8_t* codes,
                          float* scales) {
  // Rows (or row blocks) are independent: split over threads, since quantizing a 30B model at load
  // would otherwise take minutes.
  if (scaling == Fp8Scaling::PerChannel) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) scales[r] = quantize_e4m3(w + r * cols, cols, codes + r * cols);
    return;
  }
  const int64_t col_blocks = (cols + 127) / 128;
#pragma omp parallel for schedule(static)
  for (int64_t r0 = 0; r0 < rows; r0 += 128) {
    for (int64_t c0 = 0; c0 < cols; c0 += 128) {
      const int64_t r1 = std::min(rows, r0 + 128), c1 = std::min(cols, c0 + 128);
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) amax = std::fmax(amax, std::fabs(w[r * cols + c]));
      }
      const float scale = e4m3_scale(amax);
      scales[r0 / 128 * col_blocks + c0 / 128] = scale;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) codes[r * cols + c] = f32_to_e4m3(w[r * cols + c] / scale);
      }
    }
  }
}

}  // namespace jet
