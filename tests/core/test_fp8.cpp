// e4m3 conversions and the FP8 scaling rule (core/fp8.h), checked against the format's definition:
// the decoded value of every code from its bit fields, and the encoder against a nearest-value
// search over all finite codes (ties to the even code).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/fp8.h"

using namespace jet;

namespace {

// The nearest finite e4m3 value of a non-negative x below the saturation point, ties to the
// code with an even mantissa field, by exhaustive search.
uint8_t nearest_code(float x) {
  int best = 0;
  double best_gap = INFINITY;
  for (int code = 0; code < 0x7f; ++code) {
    const double gap = std::fabs(double{e4m3_to_f32(static_cast<uint8_t>(code))} - x);
    if (gap < best_gap || (gap == best_gap && (code & 1) == 0)) {
      best = code;
      best_gap = gap;
    }
  }
  return static_cast<uint8_t>(best);
}

}  // namespace

TEST(Fp8, DecodesKnownCodes) {
  EXPECT_EQ(e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);    // exponent field 7 = bias
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);  // the largest finite value
  EXPECT_EQ(e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // the smallest normal
  EXPECT_EQ(e4m3_to_f32(0x3d), 1.625f);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xff)));
  EXPECT_TRUE(std::signbit(e4m3_to_f32(0x80)));  // -0
}

TEST(Fp8, EveryFiniteCodeRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) == 0x7f) continue;
    ASSERT_EQ(f32_to_e4m3(e4m3_to_f32(static_cast<uint8_t>(code))), code) << code;
  }
}

TEST(Fp8, EncodesToTheNearestValueWithTiesToEven) {
  std::mt19937 rng(3);
  std::vector<float> xs;
  for (int i = 0; i < 20000; ++i)
    xs.push_back(
        std::ldexp(std::uniform_real_distribution<float>(1, 2)(rng), std::uniform_int_distribution<int>(-12, 8)(rng)));
  // Midpoints between neighbouring codes are the ties.
  for (int code = 0; code < 0x7e; ++code) {
    xs.push_back((e4m3_to_f32(static_cast<uint8_t>(code)) + e4m3_to_f32(static_cast<uint8_t>(code + 1))) / 2);
  }
  for (float x : xs) {
    if (x >= kE4m3Max) continue;
    ASSERT_EQ(f32_to_e4m3(x), nearest_code(x)) << x;
    ASSERT_EQ(f32_to_e4m3(-x), nearest_code(x) | 0x80) << -x;
  }
  EXPECT_EQ(f32_to_e4m3(0.5f * (1.0f + 1.125f)), 0x38);  // 1.0625 ties to 1.0 (even mantissa 0)
}

TEST(Fp8, SaturatesAndKeepsNaN) {
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(1e30f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -11)), 0x00);  // a quarter of the smallest subnormal
}

TEST(Fp8, ScaleMapsTheLargestMagnitudeOnto448) {
  const std::vector<float> x = {0.5f, -3.0f, 1.25f, 0.0f};
  std::vector<uint8_t> codes(x.size());
  const float scale = quantize_e4m3(x.data(), static_cast<int64_t>(x.size()), codes.data());
  EXPECT_EQ(scale, 3.0f / 448.0f);
  EXPECT_EQ(codes[1], 0xfe);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(e4m3_to_f32(codes[i]) * scale, x[i], std::fabs(x[i]) / 16);
  const std::vector<float> zeros(3, 0.0f);
  EXPECT_EQ(quantize_e4m3(zeros.data(), 3, codes.data()), 1.0f);
  EXPECT_EQ(codes[0], 0x00);
}

TEST(Fp8, ConvertsToF32ThroughTheDtypeTable) {
  const uint8_t codes[] = {0x38, 0xfe, 0x01};
  float out[3];
  convert_to_f32(DType::F8E4M3, codes, out, 3);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -448.0f);
  EXPECT_EQ(out[2], std::ldexp(1.0f, -9));
  EXPECT_EQ(dtype_size(DType::F8E4M3), 1u);
  EXPECT_EQ(dtype_name(DType::F8E4M3), "F8_E4M3");
}
