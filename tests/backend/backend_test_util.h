// Helpers of the backend tests: tensors made from and read back into host vectors through the
// backend's own upload/download (so the same tests can run a device backend), random fills, and
// NaN poisoning so an output element an op forgot to write fails the comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"

namespace jet::test {

class TensorFactory {
 public:
  explicit TensorFactory(Backend& backend) : backend_(backend) {}

  template <typename T>
  Tensor make(DType dtype, std::initializer_list<int64_t> dims, const std::vector<T>& values) {
    Tensor t = backend_.alloc_tensor(owner_, dtype, dims);
    EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
    backend_.upload(t.data, values.data(), values.size() * sizeof(T));
    return t;
  }
  Tensor f32(std::initializer_list<int64_t> dims, const std::vector<float>& values) {
    return make(DType::F32, dims, values);
  }
  Tensor i32(std::initializer_list<int64_t> dims, const std::vector<int32_t>& values) {
    return make(DType::I32, dims, values);
  }
  // An output tensor whose every element is NaN until an op writes it.
  Tensor poisoned(std::initializer_list<int64_t> dims) {
    Tensor shape_only(nullptr, DType::F32, dims);
    return f32(dims, std::vector<float>(shape_only.numel(), std::numeric_limits<float>::quiet_NaN()));
  }

  template <typename T>
  std::vector<T> read(const Tensor& t) {
    std::vector<T> out(t.nbytes() / sizeof(T));
    backend_.download(out.data(), t.data, t.nbytes());
    return out;
  }

 private:
  Backend& backend_;
  std::vector<Buffer> owner_;
};

inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Every element finite and within atol + rtol * |expected| of the expected value.
inline void expect_close(const std::vector<float>& actual, const std::vector<float>& expected, float atol, float rtol,
                         const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_TRUE(std::isfinite(actual[i])) << what << " element " << i << " is " << actual[i];
    ASSERT_NEAR(actual[i], expected[i], atol + rtol * std::fabs(expected[i])) << what << " element " << i;
  }
}

}  // namespace jet::test
