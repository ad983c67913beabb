// The host side of tma.cuh: encoding a matrix's tensor map through the driver's
// cuTensorMapEncodeTiled, found at run time through the runtime (so nothing links libcuda).
#include "backend/cuda/tma.cuh"

#include "core/error.h"

namespace jet::cuda {

namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encoder() {
  static const EncodeTiled encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found),
          "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    JET_CHECK(found == cudaDriverEntryPointSuccess && fn != nullptr,
              "the CUDA driver does not provide cuTensorMapEncodeTiled (a Hopper driver is needed)");
    return reinterpret_cast<EncodeTiled>(fn);
  }();
  return encode;
}

}  // namespace

CUtensorMap tensor_map(const void* base, int64_t rows, int64_t cols, int element_bytes, int box_rows) {
  JET_CHECK(element_bytes == 1 || element_bytes == 2, "tensor map: ", element_bytes, "-byte elements");
  JET_CHECK((cols * element_bytes) % 16 == 0 && reinterpret_cast<uintptr_t>(base) % 16 == 0,
            "tensor map: rows must be 16-byte aligned (", cols, " columns of ", element_bytes, " bytes)");
  JET_CHECK(box_rows >= 1 && box_rows <= 256, "tensor map: a box of ", box_rows, " rows is outside [1, 256]");
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t row_stride[1] = {static_cast<cuuint64_t>(cols) * element_bytes};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kTmaBoxBytes / element_bytes), static_cast<cuuint32_t>(box_rows)},
                   element_strides[2] = {1, 1};
  const CUtensorMapDataType type =
      element_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  // L2 promotion of 256 bytes: a box row is 128 bytes, and the next k stage reads the next 128.
  const CUresult status = encoder()(&map, type, 2, const_cast<void*>(base), dims, row_stride, box, element_strides,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  JET_CHECK(status == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(status), ") for a [",
            rows, ", ", cols, "] matrix of ", element_bytes, "-byte elements with boxes of ", box_rows, " rows");
  return map;
}

}  // namespace jet::cuda
