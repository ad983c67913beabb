// Tensor: a non-owning, contiguous, row-major view of backend memory (host memory on the CPU
// backend, device memory on CUDA), and Buffer: the owning allocation it usually points into.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>

#include "core/dtype.h"
#include "core/error.h"

namespace jet {

constexpr int kMaxDims = 4;

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};

  Tensor() = default;
  Tensor(void* ptr, DType type, std::initializer_list<int64_t> dims) : data(ptr), dtype(type) {
    JET_ASSERT(dims.size() <= kMaxDims);
    for (int64_t d : dims) shape[ndim++] = d;
  }

  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
  // Rows [begin, end) of the first dimension, as a view.
  Tensor rows(int64_t begin, int64_t end) const {
    JET_ASSERT(ndim >= 1 && begin >= 0 && begin <= end && end <= shape[0]);
    Tensor t = *this;
    t.shape[0] = end - begin;
    t.data = static_cast<char*>(data) + static_cast<size_t>(begin) * (nbytes() / (shape[0] ? shape[0] : 1));
    return t;
  }
};

// Owning allocation from a backend; frees itself through the deleter the backend gave it.
class Buffer {
 public:
  Buffer() = default;
  Buffer(void* ptr, size_t bytes, std::function<void(void*)> deleter) : ptr_(ptr, std::move(deleter)), bytes_(bytes) {}

  void* data() const { return ptr_.get(); }
  size_t bytes() const { return bytes_; }
  // A tensor view over the start of this buffer.
  Tensor view(DType dtype, std::initializer_list<int64_t> dims) const {
    Tensor t(ptr_.get(), dtype, dims);
    JET_ASSERT(t.nbytes() <= bytes_, "view of ", t.nbytes(), " bytes over a buffer of ", bytes_);
    return t;
  }

 private:
  std::unique_ptr<void, std::function<void(void*)>> ptr_{nullptr, [](void*) {}};
  size_t bytes_ = 0;
};

}  // namespace jet
