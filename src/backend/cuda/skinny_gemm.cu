// The matmul op for a few rows (M <= 8: batch 1 decoding), where the product is a pass over the
// weights: out[M, N] = x[M, K] · w[N, K]ᵀ, of bf16 operands, or of e4m3 codes whose fp32 scales
// (one per x row and one per w row) multiply each finished sum (matmul_fp8).
//
// One CTA of 8 warps owns 16 output columns (two mma n-tiles of 8 weight rows) and all M rows;
// its warps take the 32-wide chunks of K in turn and reduce their partial sums through shared
// memory at the end (two n-tiles per warp halve the x re-reads per weight byte; more would leave
// the 2,560-column products with fewer CTAs than multiprocessors). Each chunk is two bf16 mma.sync
// m16n8k16 (fp32 accumulate, the A operand's rows 8..15 zero) per n-tile whose B operand comes
// straight from one 16-byte load of a weight row per thread: the sum over k does not depend on its
// order, so the k index is permuted alike in A and B. Lane (g = lane / 4, c = lane % 4) loads
// elements [8c, 8c + 8) of the chunk for weight row g of each n-tile and for x row g; the first mma
// takes elements 8c..8c+3 where the PTX layout has k = 2c, 2c+1, 2c+8, 2c+9, the second 8c+4..8c+7.
// Several chunks' loads are issued before their mmas, so each thread keeps 128 bytes of weights in
// flight. At 9 to 16 rows the x rows g + 8 double the loads per weight byte and cuBLASLt is faster.
// Products with few columns (2,560: 160 CTAs on 132 multiprocessors) also split K across CTAs,
// as many as fill the GPU's waves (kernel_util.cuh): each split writes its fp32 partial sums to
// scratch, and the CTA that finishes a column tile last (a counter per tile, reset by that CTA,
// so the counters are zero between launches and inside CUDA graph replays) adds the splits in
// order, so the result does not depend on which CTA finished first.
#include "backend/cuda/skinny_gemm.h"

#include <algorithm>
#include <cstdint>

#include "backend/cuda/kernel_util.cuh"

namespace jet::cuda {

namespace {

constexpr int kWarps = 8;  // kTiles * 128 <= 256 threads reduce the partial sums
constexpr int kTiles = 2;  // mma n-tiles of 8 output columns (weight rows) per CTA
constexpr int kCols = 8 * kTiles;
constexpr int kInFlight = 4;    // chunks loaded per warp before their mmas
constexpr int kLoadBytes = 16;  // per lane and operand row: one uint4

// The operand element types: 16-byte loads of `kPerLoad` elements, chunks of 4 lanes' loads, and
// the mma that takes half a load's elements of x row g (a0, a2) and weight row g (b0, b1):
// acc[16x8] += a[16 x k] * b[k x 8] with a's rows 8..15 zero (the PTX fragment layouts).
struct Bf16Operands {
  static constexpr int kPerLoad = kLoadBytes / 2;
  static constexpr bool kScaled = false;
  __device__ static void mma(float (&acc)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
  }
};
struct E4m3Operands {
  static constexpr int kPerLoad = kLoadBytes;
  static constexpr bool kScaled = true;  // by x_scales[row] * w_scales[col]
  __device__ static void mma(float (&acc)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
  }
};

// 16 bytes at p, or zeros when !valid; weights are read once, so they bypass L1.
__device__ __forceinline__ uint4 load_weights(const uint8_t* p, bool valid) {
  return valid ? __ldcs(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}
__device__ __forceinline__ uint4 load_x(const uint8_t* p, bool valid) {
  return valid ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}

__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(bf16* p, float v) { *p = __float2bfloat16_rn(v); }

struct Params {
  const uint8_t* x;       // [M, K] elements
  const uint8_t* w;       // [N, K] elements
  const float* x_scales;  // [M] (e4m3 operands), else null
  const float* w_scales;  // [N] (e4m3 operands), else null
  void* out;              // [M, N], bf16 or fp32
  float* partial;         // [splits, M, N] when splits > 1
  int* counters;          // one per column tile, zero
  int M, N, K, splits, chunks_per_split;
};

template <typename Operands, typename Out>
__global__ void __launch_bounds__(kWarps * 32) skinny_gemm_kernel(const Params p) {
  constexpr int kPerLoad = Operands::kPerLoad, kChunk = 4 * kPerLoad;  // k elements per warp step
  constexpr int kElementBytes = kLoadBytes / kPerLoad;
  const uint8_t* __restrict__ x = p.x;
  const uint8_t* __restrict__ w = p.w;
  const int M = p.M, N = p.N, K = p.K, split = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int col0 = blockIdx.x * kCols;
  const bool x_ok = g < M;
  const uint8_t* x_row = x + (int64_t{x_ok ? g : 0} * K + kPerLoad * c) * kElementBytes;
  const uint8_t* w_rows[kTiles];
  bool row_ok[kTiles];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    const int n = col0 + 8 * t + g;
    row_ok[t] = n < N;
    w_rows[t] = w + (int64_t{row_ok[t] ? n : 0} * K + kPerLoad * c) * kElementBytes;
  }
  const int chunk_begin = split * p.chunks_per_split;
  const int chunk_end = min(chunk_begin + p.chunks_per_split, (K + kChunk - 1) / kChunk);
  await_previous_kernel();

  float acc[kTiles][4] = {};
  for (int first = chunk_begin + warp; first < chunk_end; first += kWarps * kInFlight) {
    uint4 wv[kInFlight][kTiles], xv[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int k = (first + u * kWarps) * kChunk;
      const bool in_k = first + u * kWarps < chunk_end && k + kPerLoad * c < K;  // whole loads (fits)
      const int64_t at = int64_t{k} * kElementBytes;
#pragma unroll
      for (int t = 0; t < kTiles; ++t) wv[u][t] = load_weights(w_rows[t] + at, in_k && row_ok[t]);
      xv[u] = load_x(x_row + at, in_k && x_ok);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        Operands::mma(acc[t], xv[u].x, xv[u].y, wv[u][t].x, wv[u][t].y);
        Operands::mma(acc[t], xv[u].z, xv[u].w, wv[u][t].z, wv[u][t].w);
      }
    }
  }

  // acc[t] holds out row g (and the zero rows g + 8), columns 2c and 2c + 1 of n-tile t.
  __shared__ float warp_sums[kWarps][kTiles][32][4];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) warp_sums[warp][t][lane][e] = acc[t][e];
  }
  __syncthreads();
  static_assert(kTiles * 32 * 4 == kWarps * 32, "one output element per thread");
  const int t = threadIdx.x / 128, src_lane = threadIdx.x / 4 % 32, e = threadIdx.x % 4;
  float sum = 0.0f;
#pragma unroll
  for (int v = 0; v < kWarps; ++v) sum += warp_sums[v][t][src_lane][e];
  const int row = src_lane / 4 + (e >= 2 ? 8 : 0);  // rows 8..15 are the A operand's zero rows
  const int col = col0 + 8 * t + 2 * (src_lane % 4) + (e & 1);
  const bool in_out = row < M && col < N;
  const int64_t at = int64_t{row} * N + col;
  if (p.splits > 1) {
    if (in_out) p.partial[split * int64_t{M} * N + at] = sum;
    __threadfence();  // this split's sums are visible before the counter says so
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
      last = atomicAdd(&p.counters[blockIdx.x], 1) == p.splits - 1;
      if (last) p.counters[blockIdx.x] = 0;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    sum = 0.0f;
    for (int s = 0; s < p.splits; ++s) {
      if (in_out) sum += __ldcg(p.partial + s * int64_t{M} * N + at);
    }
  }
  if constexpr (Operands::kScaled) {
    if (in_out) sum *= p.x_scales[row] * p.w_scales[col];
  }
  if (in_out) store(static_cast<Out*>(p.out) + at, sum);
}

template <typename Operands, typename Out>
int resident_ctas_per_sm() {
  static const int count = [] {
    int n = 0;
    JET_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, skinny_gemm_kernel<Operands, Out>, kWarps * 32, 0));
    return std::max(n, 1);
  }();
  return count;
}

template <typename Operands, typename Out>
void launch(Params p, const SkinnyGemmScratch& scratch, cudaStream_t stream) {
  const int64_t tiles = (int64_t{p.N} + kCols - 1) / kCols;
  const int chunk = 4 * Operands::kPerLoad;
  const int chunks = (p.K + chunk - 1) / chunk;
  // Split K only while the column tiles alone leave the memory system short of loads in flight
  // (under 4 waves), into splits of at least one chunk per warp.
  const int64_t slots = int64_t{multiprocessor_count()} * resident_ctas_per_sm<Operands, Out>();
  const int64_t partial_bytes = int64_t{p.M} * p.N * sizeof(float);
  const int64_t max_splits = std::min<int64_t>(
      {chunks / kWarps, int64_t(scratch.partial_bytes) / partial_bytes, tiles <= scratch.num_counters ? 8 : 1});
  p.splits = tiles >= 4 * slots ? 1 : splits_for_wave_fill(tiles, slots, std::max<int64_t>(max_splits, 1));
  p.chunks_per_split = (chunks + p.splits - 1) / p.splits;
  p.partial = scratch.partial;
  p.counters = scratch.counters;
  launch_kernel("skinny_gemm_kernel", skinny_gemm_kernel<Operands, Out>, dim3(static_cast<unsigned>(tiles), p.splits),
                kWarps * 32, 0, stream, p);
}

template <typename Operands>
void launch_for_output(const Params& p, const Tensor& out, const SkinnyGemmScratch& scratch, cudaStream_t stream) {
  if (out.dtype == DType::F32) {
    launch<Operands, float>(p, scratch, stream);
  } else {
    launch<Operands, bf16>(p, scratch, stream);
  }
}

}  // namespace

bool skinny_gemm_fits(const Tensor& x, const Tensor& w) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  const int64_t per_load = kLoadBytes / static_cast<int64_t>(dtype_size(x.dtype));
  return M >= 1 && M <= kSkinnyGemmMaxRows && K <= INT32_MAX && N <= INT32_MAX && K % per_load == 0 &&
         aligned_16({x.data, w.data});
}

void skinny_gemm(const Tensor& x, const Tensor& w, Tensor& out, const SkinnyGemmScratch& scratch, cudaStream_t stream,
                 const float* x_scales, const float* w_scales) {
  Params p{};
  p.x = static_cast<const uint8_t*>(x.data);
  p.w = static_cast<const uint8_t*>(w.data);
  p.x_scales = x_scales;
  p.w_scales = w_scales;
  p.out = out.data;
  p.M = static_cast<int>(x.dim(0));
  p.K = static_cast<int>(x.dim(1));
  p.N = static_cast<int>(w.dim(0));
  if (x.dtype == DType::F8E4M3) {
    launch_for_output<E4m3Operands>(p, out, scratch, stream);
  } else {
    launch_for_output<Bf16Operands>(p, out, scratch, stream);
  }
}

}  // namespace jet::cuda
