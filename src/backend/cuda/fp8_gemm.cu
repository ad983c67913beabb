// The matmul_fp8 op (docs/fp8.md): out[M, N] = x[M, K] · wᵀ for an FP8 weight, x bf16. x is
// quantized to e4m3 first, with one scale per row (per-channel weights) or per row and 128
// columns (128x128 weight tiles), into scratch, by core/fp8.h's rule; then the product of
// codes runs, its fp32 sums scaled back: up to 8 rows on the weight-streaming kernel
// (skinny_gemm.h, per-channel), else on cuBLASLt's FP8 GEMMs with their scale modes
// (gemm_plans.h).
//
// cuBLASLt's 128-block modes (measured on its Hopper kernels) take x's scales as [ceil(K/128), M]
// with M fastest and M a multiple of 4, and the weight's tile scales row-major with each row
// padded to a multiple of 4 tiles. So with tiles x is quantized into round_up(M, 4) rows (the
// extra rows zero), the product of an M that is not a multiple of 4 goes to scratch and its M
// rows are copied out, and a weight whose K/128 is not a multiple of 4 has its scales re-laid
// into scratch per call (a few hundred floats).
#include <algorithm>
#include <cstdint>

#include "backend/cuda/fp8_codes.cuh"
#include "backend/cuda/gemm_plans.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/skinny_gemm.h"
#include "backend/op_checks.h"

namespace jet::cuda {

namespace {

constexpr int kPack = 8;                   // bf16 per 16-byte load
constexpr int kRowThreads = 256;           // per-row scales: one block per row
constexpr int kHeldPacks = 8;              // per thread, in registers: rows up to 16,384 columns read once
constexpr int kTileThreads = 128 / kPack;  // 128-column scales: 16 threads per group
constexpr int kTileGroupsPerBlock = 8;
constexpr int64_t kPieceAlignment = 256;

constexpr int64_t kTileRowMultiple = 4;  // cuBLASLt's 128-block modes: rows of x and tile-scale rows

int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// Stores the codes of one pack of a group whose scale is `scale` (8 bytes at `codes`).
__device__ __forceinline__ void store_codes(const BfPack<kPack>& v, float scale, uint8_t* codes) {
  uint8_t out[kPack];
#pragma unroll
  for (int i = 0; i < kPack; ++i) out[i] = e4m3_code(__bfloat162float(v.v[i]), scale);
  *reinterpret_cast<uint2*>(codes) = *reinterpret_cast<const uint2*>(out);
}

__device__ __forceinline__ float pack_amax(const BfPack<kPack>& v) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kPack; ++i) amax = fmaxf(amax, fabsf(__bfloat162float(v.v[i])));
  return amax;
}

// One block per row of x [M, K]: codes [M, K] and scales [M]. The first kHeldPacks packs of each
// thread stay in registers between the amax and the conversion, so rows up to
// kRowThreads * kHeldPacks * kPack columns are read once, all loads in flight together (at few
// rows the kernel is a few of these blocks, so its latency is what counts); longer rows read
// the rest twice.
__global__ void __launch_bounds__(kRowThreads)
    quantize_rows_kernel(const bf16* x, int64_t K, uint8_t* codes, float* scales) {
  const int64_t row = blockIdx.x;
  const bf16* src = x + row * K;
  uint8_t* dst = codes + row * K;
  constexpr int64_t kStride = int64_t{kRowThreads} * kPack;
  const int64_t first = int64_t{threadIdx.x} * kPack, rest = first + kHeldPacks * kStride;
  await_previous_kernel();
  BfPack<kPack> held[kHeldPacks];
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kHeldPacks; ++j) {
    if (first + j * kStride < K) {
      held[j] = load_pack<kPack>(src + first + j * kStride);
      amax = fmaxf(amax, pack_amax(held[j]));
    }
  }
  for (int64_t k = rest; k < K; k += kStride) amax = fmaxf(amax, pack_amax(load_pack<kPack>(src + k)));
  const float scale = e4m3_scale(block_reduce(amax, MaxOp{}, 0.0f));
#pragma unroll
  for (int j = 0; j < kHeldPacks; ++j) {
    if (first + j * kStride < K) store_codes(held[j], scale, dst + first + j * kStride);
  }
  for (int64_t k = rest; k < K; k += kStride) store_codes(load_pack<kPack>(src + k), scale, dst + k);
  if (threadIdx.x == 0) scales[row] = scale;
}

// kTileThreads threads per (row, 128-column group) of x [M, K], for `rows` >= M rows (those past
// M quantize as zeros): codes [rows, K] and scales [ceil(K/128), rows].
__global__ void __launch_bounds__(kTileThreads* kTileGroupsPerBlock)
    quantize_tiles_kernel(const bf16* x, int64_t M, int64_t rows, int64_t K, uint8_t* codes, float* scales) {
  const int64_t k_blocks = (K + 127) / 128;
  const int64_t group = int64_t{blockIdx.x} * kTileGroupsPerBlock + threadIdx.x / kTileThreads;
  const int64_t row = group / k_blocks, kb = group % k_blocks;
  const int64_t k = kb * 128 + threadIdx.x % kTileThreads * kPack;
  const bool in_codes = row < rows && k < K;  // K % 16 == 0: whole packs
  await_previous_kernel();
  BfPack<kPack> v{};
  if (in_codes && row < M) v = load_pack<kPack>(x + row * K + k);
  // Every lane takes part in the reduction; the idle ones bring 0.
  const float scale = e4m3_scale(lane_group_reduce<kTileThreads>(in_codes ? pack_amax(v) : 0.0f, MaxOp{}));
  if (!in_codes) return;
  store_codes(v, scale, codes + row * K + k);
  if (k == kb * 128) scales[kb * rows + row] = scale;
}

// The weight's tile scales [tile_rows, k_blocks] re-laid with rows of `padded` >= k_blocks.
__global__ void pad_tile_scales_kernel(const float* scales, int64_t tile_rows, int64_t k_blocks, int64_t padded,
                                       float* out) {
  await_previous_kernel();
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < tile_rows * padded;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / padded, c = i % padded;
    out[i] = c < k_blocks ? scales[r * k_blocks + c] : 0.0f;
  }
}

// Consecutive pieces of the scratch buffer, each 256-byte aligned.
class ScratchPieces {
 public:
  int64_t add(int64_t bytes) {
    const int64_t at = total_;
    total_ += round_up(bytes, kPieceAlignment);
    return at;
  }
  int64_t total() const { return total_; }

 private:
  int64_t total_ = 0;
};

}  // namespace

void CudaBackend::matmul_fp8(const Tensor& x, const Linear& w, Tensor& out) {
  const MatmulShape s = check_matmul_fp8_args(x, w, out, DType::BF16);
  const int64_t M = s.m, N = s.n, K = s.k;
  JET_CHECK(K % 16 == 0, "matmul_fp8: K = ", K, " is not a multiple of 16, which the CUDA backend's FP8 GEMMs need");
  JET_CHECK(aligned_16({x.data}), "matmul_fp8: x is not 16-byte aligned");
  if (M == 0 || N == 0) return;
  if (K == 0) {
    JET_CUDA_CHECK(cudaMemsetAsync(out.data, 0, out.nbytes(), stream_));
    return;
  }
  const bool tiles = w.scaling == Fp8Scaling::Block128;
  const int64_t k_blocks = (K + 127) / 128, tile_rows = (N + 127) / 128;
  const int64_t rows = tiles ? round_up(M, kTileRowMultiple) : M;  // of x's codes and the product
  const int64_t padded_k_blocks = round_up(k_blocks, kTileRowMultiple);
  const bool pad_w_scales = tiles && padded_k_blocks != k_blocks, out_to_scratch = rows != M;
  ScratchPieces pieces;
  const int64_t codes_at = pieces.add(rows * K);
  const int64_t x_scales_at = pieces.add((tiles ? rows * k_blocks : M) * int64_t{sizeof(float)});
  const int64_t w_scales_at = pieces.add(pad_w_scales ? tile_rows * padded_k_blocks * int64_t{sizeof(float)} : 0);
  const int64_t out_at = pieces.add(out_to_scratch ? rows * N * int64_t{sizeof(bf16)} : 0);
  auto* base = static_cast<uint8_t*>(grow_view(fp8_scratch_, DType::F8E4M3, {pieces.total()}).data);
  const Tensor codes(base + codes_at, DType::F8E4M3, {rows, K});
  auto* x_codes = base + codes_at;
  auto* x_scales = reinterpret_cast<float*>(base + x_scales_at);
  const float* w_scales = w.scale.ptr<float>();
  if (tiles) {
    const auto blocks = static_cast<unsigned>((rows * k_blocks + kTileGroupsPerBlock - 1) / kTileGroupsPerBlock);
    launch_kernel("quantize_tiles_kernel", quantize_tiles_kernel, dim3(blocks), kTileThreads * kTileGroupsPerBlock, 0,
                  stream_, x.ptr<bf16>(), M, rows, K, x_codes, x_scales);
  } else {
    launch_kernel("quantize_rows_kernel", quantize_rows_kernel, dim3(static_cast<unsigned>(M)), kRowThreads, 0, stream_,
                  x.ptr<bf16>(), K, x_codes, x_scales);
  }
  if (pad_w_scales) {
    auto* padded = reinterpret_cast<float*>(base + w_scales_at);
    launch_kernel("pad_tile_scales_kernel", pad_tile_scales_kernel, dim3(blocks_for(tile_rows * padded_k_blocks, 256)),
                  256, 0, stream_, w_scales, tile_rows, k_blocks, padded_k_blocks, padded);
    w_scales = padded;
  }

  if (!tiles && skinny_gemm_fits(codes, w.weight)) {
    const SkinnyGemmScratch skinny{static_cast<float*>(workspace_), workspace_bytes_, split_counters_,
                                   num_split_counters_};
    return skinny_gemm(codes, w.weight, out, skinny, stream_, x_scales, w_scales);
  }
  void* product = out_to_scratch ? base + out_at : out.data;
  GemmProblem problem;
  problem.m = rows;
  problem.n = N;
  problem.k = K;
  problem.in_type = CUDA_R_8F_E4M3;
  problem.w_scale_mode =
      tiles ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  problem.x_scale_mode = tiles ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  problem.align_x = operand_alignment(x_codes);
  problem.align_w = operand_alignment(w.weight.data);
  problem.align_out = operand_alignment(product);
  gemm_plans_->run(problem, x_codes, w.weight.data, product, stream_, x_scales, w_scales);
  if (out_to_scratch) {
    JET_CUDA_CHECK(cudaMemcpyAsync(out.data, product, out.nbytes(), cudaMemcpyDeviceToDevice, stream_));
  }
}

}  // namespace jet::cuda
