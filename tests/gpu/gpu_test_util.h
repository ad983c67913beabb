// Helpers of the GPU tests. They are plain programs (the GPU machine may have no test framework):
// each check prints one PASS or FAIL line and main returns non-zero when any failed. Inputs go to
// the CPU backend (the reference, f32) and the CUDA backend (bf16) with identical values: random
// numbers are rounded to bf16 first. Outputs start as NaN on both backends, so an element an op
// does not write fails the comparison.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_factory.h"
#include "core/dtype.h"

namespace jet::gpu_test {

// The exit status CTest reads as "skipped" (tests/gpu/CMakeLists.txt): the machine has no GPU.
constexpr int kSkipWithoutDevice = 77;

// Whether to skip: true (after saying so) when no CUDA device is visible.
inline bool skip_without_device() {
  if (cuda_device_available()) return false;
  std::printf("SKIP no CUDA device\n");
  return true;
}

class Report {
 public:
  void check(bool ok, const std::string& name, const std::string& detail = "") {
    std::printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name.c_str(), detail.empty() ? "" : ": ", detail.c_str());
    std::fflush(stdout);
    failures_ += !ok;
  }
  // Runs one case; an exception fails that case only, so one broken op does not hide the rest.
  template <typename F>
  void run(const std::string& name, F&& body) {
    try {
      body();
    } catch (const std::exception& e) {
      check(false, name, std::string("threw: ") + e.what());
    }
  }
  int exit_code() const {
    std::printf("%d failure(s)\n", failures_);
    return failures_ == 0 ? 0 : 1;
  }

 private:
  int failures_ = 0;
};

inline float round_to_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }

// Uniform values in [lo, hi), each exactly representable in bf16.
inline std::vector<float> random_bf16(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = round_to_bf16(dist(rng));
  return v;
}

// A tensor on each backend.
struct Twin {
  Tensor cpu, cuda;
};

// The CPU (reference) and CUDA backends side by side, with the memory of every tensor made here.
class Twins {
 public:
  Twins() : cpu_(make_cpu_backend(0)), cuda_(make_cuda_backend()) {}

  Backend& cpu() { return *cpu_; }
  Backend& cuda() { return *cuda_; }

  // Float data: f32 on the CPU, bf16 on CUDA (values should already be bf16-exact).
  Twin floats(std::initializer_list<int64_t> dims, const std::vector<float>& values) {
    Twin t{cpu_->alloc_tensor(owner_, DType::F32, dims), cuda_->alloc_tensor(owner_, DType::BF16, dims)};
    check_count(t.cpu, values.size());
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = f32_to_bf16(values[i]);
    cpu_->upload(t.cpu.data, values.data(), values.size() * sizeof(float));
    cuda_->upload(t.cuda.data, bits.data(), bits.size() * sizeof(uint16_t));
    return t;
  }
  Twin ints(std::initializer_list<int64_t> dims, const std::vector<int32_t>& values) {
    Twin t{cpu_->alloc_tensor(owner_, DType::I32, dims), cuda_->alloc_tensor(owner_, DType::I32, dims)};
    check_count(t.cpu, values.size());
    cpu_->upload(t.cpu.data, values.data(), values.size() * sizeof(int32_t));
    cuda_->upload(t.cuda.data, values.data(), values.size() * sizeof(int32_t));
    return t;
  }
  // The same bytes on both backends (e4m3 codes, fp32 scales: types both backends share).
  Twin raw(DType dtype, std::initializer_list<int64_t> dims, const void* bytes) {
    Twin t{cpu_->alloc_tensor(owner_, dtype, dims), cuda_->alloc_tensor(owner_, dtype, dims)};
    cpu_->upload(t.cpu.data, bytes, t.cpu.nbytes());
    cuda_->upload(t.cuda.data, bytes, t.cuda.nbytes());
    return t;
  }
  // NaN everywhere; the CUDA side has `cuda_dtype` (BF16 activations, F32 logits).
  Twin poisoned(std::initializer_list<int64_t> dims, DType cuda_dtype = DType::BF16) {
    Twin t{cpu_->alloc_tensor(owner_, DType::F32, dims), cuda_->alloc_tensor(owner_, cuda_dtype, dims)};
    const std::vector<float> nan(static_cast<size_t>(t.cpu.numel()), std::numeric_limits<float>::quiet_NaN());
    cpu_->upload(t.cpu.data, nan.data(), t.cpu.nbytes());
    if (cuda_dtype == DType::F32) {
      cuda_->upload(t.cuda.data, nan.data(), t.cuda.nbytes());
    } else {
      const std::vector<uint16_t> bits(nan.size(), f32_to_bf16(nan[0]));
      cuda_->upload(t.cuda.data, bits.data(), t.cuda.nbytes());
    }
    return t;
  }
  // The batch uploaded to each backend.
  std::pair<ForwardBatch, ForwardBatch> batches(const BatchLayout& layout) {
    std::pair<ForwardBatch, ForwardBatch> b;
    b.first.host = b.second.host = layout;
    cpu_->upload_batch(b.first, owner_);
    cuda_->upload_batch(b.second, owner_);
    return b;
  }

  std::vector<float> cpu_values(const Tensor& t) { return values(*cpu_, t); }
  std::vector<float> cuda_values(const Tensor& t) { return values(*cuda_, t); }
  std::vector<int32_t> cpu_ints(const Tensor& t) { return ints(*cpu_, t); }
  std::vector<int32_t> cuda_ints(const Tensor& t) { return ints(*cuda_, t); }

 private:
  static void check_count(const Tensor& t, size_t count) {
    JET_CHECK(static_cast<size_t>(t.numel()) == count, "test data of ", count, " values for a tensor of ", t.numel());
  }
  static std::vector<float> values(Backend& be, const Tensor& t) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    if (t.dtype == DType::F32) {
      be.download(out.data(), t.data, t.nbytes());
    } else {
      JET_CHECK(t.dtype == DType::BF16, "test: cannot read a ", dtype_name(t.dtype), " tensor as floats");
      std::vector<uint16_t> bits(out.size());
      be.download(bits.data(), t.data, t.nbytes());
      for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(bits[i]);
    }
    return out;
  }
  static std::vector<int32_t> ints(Backend& be, const Tensor& t) {
    std::vector<int32_t> out(static_cast<size_t>(t.numel()));
    be.download(out.data(), t.data, t.nbytes());
    return out;
  }

  std::unique_ptr<Backend> cpu_, cuda_;
  std::vector<Buffer> owner_;
};

inline double rms(const std::vector<float>& v) {
  double sum = 0.0;
  for (float x : v) sum += double{x} * x;
  return v.empty() ? 0.0 : std::sqrt(sum / static_cast<double>(v.size()));
}

// The bf16 agreement rule: every element finite and |actual - expected| <= rtol * (|expected| +
// rms(expected)). The rms term is the absolute floor for elements that cancel to near zero
// (their rounding error is relative to the terms summed, not to the result).
inline void expect_close(Report& report, const std::string& name, const std::vector<float>& actual,
                         const std::vector<float>& expected, double rtol) {
  if (actual.size() != expected.size()) {
    report.check(false, name, "sizes " + std::to_string(actual.size()) + " vs " + std::to_string(expected.size()));
    return;
  }
  const double scale = rms(expected);
  size_t bad = 0, worst = 0;
  double worst_ratio = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double err = std::fabs(double{actual[i]} - expected[i]);
    const double allowed = rtol * (std::fabs(expected[i]) + scale);
    const double ratio = std::isfinite(actual[i]) ? err / (allowed > 0 ? allowed : 1e-30) : INFINITY;
    if (!(ratio <= 1.0)) ++bad;
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  char detail[256];
  std::snprintf(detail, sizeof detail,
                "%zu elements, %zu outside tolerance; worst [%zu] %.6g vs %.6g (%.3g of allowed)", actual.size(), bad,
                worst, actual.empty() ? 0.0 : actual[worst], expected.empty() ? 0.0 : expected[worst], worst_ratio);
  report.check(bad == 0, name, detail);
}

// expect_close's rule applied row by row (rows of `width` elements), the rms being the larger of
// the whole tensor's and the row's own: a row is one token's output, and the bf16 roundings inside
// the op that made it (an MoE's hidden activations, for one) err in proportion to that token's
// own magnitude. Passes when at most `max_bad_rows` rows have an element out of tolerance.
inline void expect_rows_close(Report& report, const std::string& name, const std::vector<float>& actual,
                              const std::vector<float>& expected, int64_t width, double rtol, int max_bad_rows) {
  if (actual.size() != expected.size() || width <= 0 || expected.size() % width != 0) {
    report.check(false, name, "sizes " + std::to_string(actual.size()) + " vs " + std::to_string(expected.size()));
    return;
  }
  const double scale = rms(expected);
  std::string bad_rows;
  int bad_count = 0;
  double worst_ratio = 0.0;
  for (size_t row = 0; row < expected.size() / width; ++row) {
    const std::vector<float> row_values(expected.begin() + row * width, expected.begin() + (row + 1) * width);
    const double row_scale = std::max(scale, rms(row_values));
    double row_worst = 0.0;
    for (size_t i = row * width; i < (row + 1) * width; ++i) {
      const double err = std::fabs(double{actual[i]} - expected[i]);
      const double allowed = rtol * (std::fabs(expected[i]) + row_scale);
      const double ratio = std::isfinite(actual[i]) ? err / (allowed > 0 ? allowed : 1e-30) : INFINITY;
      if (!(ratio <= row_worst)) row_worst = ratio;
    }
    if (!(row_worst <= 1.0)) {
      bad_rows += (bad_count++ ? ", " : "") + std::to_string(row);
    }
    if (!(row_worst <= worst_ratio)) worst_ratio = row_worst;
  }
  char detail[160];
  std::snprintf(detail, sizeof detail,
                "%zu rows, worst element at %.3g of allowed; %d rows out of tolerance (%d allowed)",
                expected.size() / width, worst_ratio, bad_count, max_bad_rows);
  report.check(bad_count <= max_bad_rows, name, detail + (bad_rows.empty() ? "" : ": rows " + bad_rows));
}

// Passes when `body` throws jet::Error (bad arguments must be rejected, not crash).
template <typename F>
void expect_error(Report& report, const std::string& name, F&& body) {
  try {
    body();
  } catch (const Error& e) {
    report.check(true, name, std::string("rejected: ") + e.what());
    return;
  }
  report.check(false, name, "accepted bad arguments");
}

}  // namespace jet::gpu_test
