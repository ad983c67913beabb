// Helpers of the FP8 op tests: the FP8 rule written out element by element (core/fp8.h's
// conversions, its scale rule and docs/fp8.md's groups), and FP8 weights as backend tensors.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend_test_util.h"
#include "core/fp8.h"

namespace jet::test {

// x [rows, cols] read back after quantization with one scale per row and `group` columns.
inline std::vector<float> fake_quantize_rows(const std::vector<float>& x, int64_t rows, int64_t cols, int64_t group) {
  std::vector<float> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c0 = 0; c0 < cols; c0 += group) {
      const int64_t c1 = std::min(cols, c0 + group);
      float amax = 0.0f;
      for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x[r * cols + c]));
      const float scale = e4m3_scale(amax);
      for (int64_t c = c0; c < c1; ++c) out[r * cols + c] = e4m3_to_f32(f32_to_e4m3(x[r * cols + c] / scale)) * scale;
    }
  }
  return out;
}

// One [rows, cols] weight quantized by quantize_e4m3_matrix, and its values read back.
struct Fp8Host {
  std::vector<uint8_t> codes;
  std::vector<float> scales, values;
};

inline Fp8Host quantize_host(const std::vector<float>& w, int64_t rows, int64_t cols, Fp8Scaling scaling) {
  Fp8Host q{std::vector<uint8_t>(w.size()), std::vector<float>(fp8_scale_count(scaling, rows, cols)),
            std::vector<float>(w.size())};
  quantize_e4m3_matrix(w.data(), rows, cols, scaling, q.codes.data(), q.scales.data());
  const int64_t col_blocks = (cols + 127) / 128;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float scale = scaling == Fp8Scaling::PerChannel ? q.scales[r] : q.scales[r / 128 * col_blocks + c / 128];
      q.values[r * cols + c] = e4m3_to_f32(q.codes[r * cols + c]) * scale;
    }
  }
  return q;
}

// The activation group of a scaling: whole rows, or 128 columns.
inline int64_t activation_group(Fp8Scaling scaling, int64_t cols) {
  return scaling == Fp8Scaling::Block128 ? 128 : std::max<int64_t>(cols, 1);
}

}  // namespace jet::test
