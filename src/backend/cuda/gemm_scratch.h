// Device memory our GEMM kernels (skinny_gemm.h, hopper_gemm.h) use when they split a product's
// K range across CTAs: space for fp32 partial sums and counters that say when a tile's last
// part has landed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace jet::cuda {

// partial: any contents (the cuBLASLt workspace, idle while our kernels run in its place);
// counters: all zero, and left zero by every kernel that uses them.
struct GemmScratch {
  float* partial = nullptr;
  size_t partial_bytes = 0;
  int* counters = nullptr;
  int64_t num_counters = 0;
};

}  // namespace jet::cuda
