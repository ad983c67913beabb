// The counter-based RNG (docs/decoding.md §6): known SplitMix64 values, values computed by the
// independent NumPy reference (tests/reference/rng_np.py), and the prefix/lane split.
#include <gtest/gtest.h>

#include <set>

#include "sampling/rng.h"

using namespace jet;

namespace {

// x with x ^ (x >> shift) == z.
uint64_t undo_xorshift(uint64_t z, int shift) {
  uint64_t x = z;
  for (int i = 0; i < 64 / shift + 1; ++i) x = z ^ (x >> shift);
  return x;
}

// The inverse of an odd number modulo 2^64 (Newton's iteration doubles the correct bits).
uint64_t inverse_mod_2_64(uint64_t a) {
  uint64_t x = a;
  for (int i = 0; i < 6; ++i) x *= 2 - a * x;
  return x;
}

uint64_t unmix64(uint64_t z) {
  z = undo_xorshift(z, 31) * inverse_mod_2_64(0x94D049BB133111EBull);
  z = undo_xorshift(z, 27) * inverse_mod_2_64(0xBF58476D1CE4E5B9ull);
  return undo_xorshift(z, 30);
}

}  // namespace

TEST(Rng, Mix64IsTheSplitMix64Finaliser) {
  EXPECT_EQ(mix64(0), 0u);
  // SplitMix64's first output for seed 0 is mix64(0 + golden gamma).
  EXPECT_EQ(mix64(0x9E3779B97F4A7C15ull), 0xE220A8397B1DCDAFull);
}

TEST(Rng, UniformMatchesTheNumpyReference) {
  // Values printed by tests/reference/rng_np.py uniform(seed, position, step, lane).
  EXPECT_EQ(uniform(0, 0, 0, 0), 0.09899374104691583);
  EXPECT_EQ(uniform(42, 17, 3, 5), 0.6414418738749069);
  EXPECT_EQ(uniform(123456789, 100, 7, kRandomStrategyLane), 0.47088165210055244);
  EXPECT_EQ(uniform(~0ull, 2147483647, 2147483647, 151935), 0.7746201291245826);
}

TEST(Rng, PrefixThenLaneEqualsUniform) {
  const uint64_t prefix = uniform_prefix(99, 1234, 56);
  for (uint64_t lane : {uint64_t{0}, uint64_t{1}, uint64_t{151935}, kRandomStrategyLane}) {
    EXPECT_EQ(uniform_lane(prefix, lane), uniform(99, 1234, 56, lane));
  }
}

TEST(Rng, DrawsAreInTheUnitIntervalAndSpread) {
  std::set<double> distinct;
  double sum = 0.0;
  constexpr int kDraws = 100000;
  for (int lane = 0; lane < kDraws; ++lane) {
    const double u = uniform(7, 3, 1, lane);
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    distinct.insert(u);
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kDraws));
  EXPECT_NEAR(sum / kDraws, 0.5, 0.005);  // std of the mean is 0.0009
  // Each counter changes the draw.
  EXPECT_NE(uniform(1, 2, 3, 4), uniform(2, 2, 3, 4));
  EXPECT_NE(uniform(1, 2, 3, 4), uniform(1, 3, 3, 4));
  EXPECT_NE(uniform(1, 2, 3, 4), uniform(1, 2, 4, 4));
  EXPECT_NE(uniform(1, 2, 3, 4), uniform(1, 2, 3, 5));
}

TEST(Rng, ExtremeHashesStayStrictlyInsideTheUnitInterval) {
  ASSERT_EQ(mix64(unmix64(0x0123456789ABCDEFull)), 0x0123456789ABCDEFull);
  // Choose the lanes whose final hash is 0 and 2^64 - 1: the draws are 2^-53 and 1 - 2^-53, so
  // -ln(-ln u) is finite for every lane.
  const uint64_t prefix = uniform_prefix(5, 6, 7);
  EXPECT_EQ(uniform_lane(prefix, unmix64(0) - prefix), 0x1.0p-53);
  EXPECT_EQ(uniform_lane(prefix, unmix64(~0ull) - prefix), 1.0 - 0x1.0p-53);
}
