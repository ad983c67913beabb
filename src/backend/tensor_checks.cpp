// check_tensor (backend/tensor_checks.h) and the shape strings of its messages.
#include "backend/tensor_checks.h"

#include <string>

#include "core/error.h"

namespace jet {

namespace {

std::string shape_string(const Tensor& t) {
  std::string s = "[";
  for (int i = 0; i < t.ndim; ++i) s += str(i ? ", " : "", t.shape[i]);
  return s + "]";
}

std::string expected_string(std::initializer_list<int64_t> dims) {
  std::string s = "[";
  bool first = true;
  for (int64_t d : dims) {
    s += str(first ? "" : ", ", d < 0 ? std::string("*") : std::to_string(d));
    first = false;
  }
  return s + "]";
}

}  // namespace

void check_tensor(const Tensor& t, const char* op, const char* name, DType dtype, std::initializer_list<int64_t> dims) {
  JET_CHECK(t.data != nullptr || t.numel() == 0, op, ": tensor ", name, " has no data");
  JET_CHECK(t.dtype == dtype, op, ": tensor ", name, " is ", dtype_name(t.dtype), ", expected ", dtype_name(dtype));
  bool matches = t.ndim == static_cast<int>(dims.size());
  int i = 0;
  for (int64_t d : dims) {
    if (matches && d >= 0 && t.shape[i] != d) matches = false;
    ++i;
  }
  JET_CHECK(matches, op, ": tensor ", name, " has shape ", shape_string(t), ", expected ", expected_string(dims));
}

}  // namespace jet
