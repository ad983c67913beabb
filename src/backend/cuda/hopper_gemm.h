// Our Hopper GEMM (hopper_gemm.cu) for the MLP's first half: the gate and up products on wgmma
// tensor cores fed by TMA, with the SwiGLU folded into the epilogue, so gate_up never reaches memory.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/gemm_scratch.h"
#include "backend/tensor.h"

namespace jet::cuda {

// Rows from which the gate_up_swiglu op runs the kernel. Against cuBLASLt's gate_up product plus
// the swiglu op (SDAR-4B's shapes, tests/gpu/test_gemm_speed, 2026-12-01 run 13): 0.957 of the
// time at 1,024 rows and 0.884 at 2,048, but 1.047 at 512 and 1.19 at 256, where cuBLASLt's tiles
// use the GPU better than our 128 x 256 ones.
constexpr int64_t kHopperGemmMinRows = 1024;

// Whether this process can run the kernel: the library was built for sm_90a (wgmma needs the
// architecture-specific target), the device is compute capability 9.0, and JET_HOPPER_GEMM is not
// 0. Decided on the first call, which launches a probe kernel and waits for it: the backend makes
// that call when it starts, outside any CUDA graph capture.
bool hopper_gemm_available();

// Whether the product fits the kernel (bf16 x [M, K], w [N, K] and out, checked by the caller):
// available, M >= kHopperGemmMinRows, K a multiple of 8, N a multiple of 256, and x and w on
// 16-byte boundaries (TMA's requirements).
bool hopper_gemm_fits(const Tensor& x, const Tensor& w);

// Enqueues out[M, N / 2] = silu(x · w[:N/2]ᵀ) * (x · w[N/2:]ᵀ) on `stream`; the tiles of a last
// partial wave add their K parts up through `scratch`.
void hopper_gemm_swiglu(const Tensor& x, const Tensor& w, Tensor& out, const GemmScratch& scratch, cudaStream_t stream);

}  // namespace jet::cuda
