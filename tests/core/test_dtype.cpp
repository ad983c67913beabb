// dtype conversions: bf16/f16 <-> f32 exactness on representative and edge values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/dtype.h"

using namespace jet;

TEST(DType, Bf16RoundTripsExactValues) {
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 3.140625f, 65280.0f, 1e-20f}) {
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(bf16_to_f32(f32_to_bf16(v)))), bf16_to_f32(f32_to_bf16(v)));
  }
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-2.5f)), -2.5f);
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, F16MatchesKnownEncodings) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);                   // overflow -> inf
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half round-trips
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))), h) << h;
  }
}
