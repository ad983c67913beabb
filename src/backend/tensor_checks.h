// check_tensor: the argument validation every backend op starts with, so a wrong shape from a
// caller becomes a jet::Error naming the op and tensor (the same message on every backend)
// instead of an out-of-bounds access.
#pragma once

#include <initializer_list>

#include "backend/tensor.h"

namespace jet {

// Throws jet::Error naming the op and the tensor unless t has this dtype and shape (a -1 entry
// in dims matches any size).
void check_tensor(const Tensor& t, const char* op, const char* name, DType dtype, std::initializer_list<int64_t> dims);

}  // namespace jet
