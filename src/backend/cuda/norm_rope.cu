// Normalisation and rotary embedding on bf16 activations: rmsnorm, add_rmsnorm (the residual
// stream stays bf16 as in HF: residual = bf16(residual + x)) and qk_norm_rope (per-head RMSNorm
// of q and k, then NeoX rotate-half RoPE; k and v are stored into the paged K/V cache).
// Statistics, the weight multiply and the rotation run in fp32 with one rounding to bf16 at the
// end, as SDAR's fused RMSNorm does (models.md §1.3).
#include <algorithm>
#include <cmath>

#include "backend/cuda/kernel_util.cuh"
#include "backend/op_checks.h"

namespace jet::cuda {

namespace {

constexpr int kNormThreads = 256;  // rows read one element at a time
constexpr int kRopeWarps = 8;
// Rotation pairs each lane of qk_norm_rope holds in registers: heads of up to 128 hold 2 per lane,
// so a warp takes 8 heads at once (64 per block); heads of 512 hold 8, a warp takes 2.
constexpr int kRopeSlots = 16;
// Rotary frequencies travel as a kernel parameter (computed on the host exactly as the CPU op
// does, so both backends rotate by bit-identical angles); this bounds head_dim at 512.
constexpr int kMaxRopeHalf = 256;

struct RopeFrequencies {
  float inv_freq[kMaxRopeHalf];
};

// This thread's share of Σx² over the block's row, N elements per access.
template <int N>
__device__ float sum_squares_of(const bf16* x, int64_t H) {
  float sum_squares = 0.0f;
  for (int64_t i = int64_t{threadIdx.x} * N; i < H; i += int64_t{blockDim.x} * N) {
    const BfPack<N> xs = load_pack<N>(x + i);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float v = __bfloat162float(xs.v[j]);
      sum_squares += v * v;
    }
  }
  return sum_squares;
}

// out = x / sqrt(mean(x²) + eps) * w for the block's row, given each thread's share of Σx² (over
// the same elements it touches here). Each thread reads and writes the same elements, so out may
// alias x.
template <int N>
__device__ void write_normed_row(const bf16* x, const bf16* w, float sum_squares, float eps, int64_t H, bf16* out) {
  const float scale = 1.0f / sqrtf(block_sum(sum_squares) / static_cast<float>(H) + eps);
  for (int64_t i = int64_t{threadIdx.x} * N; i < H; i += int64_t{blockDim.x} * N) {
    const BfPack<N> xs = load_pack<N>(x + i), ws = load_pack<N>(w + i);
    BfPack<N> result;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      result.v[j] = __float2bfloat16(__bfloat162float(xs.v[j]) * scale * __bfloat162float(ws.v[j]));
    }
    store_pack<N>(out + i, result);
  }
}

template <int N>
__global__ void rmsnorm_kernel(const bf16* x, const bf16* w, float eps, int64_t H, bf16* out) {
  await_previous_kernel();
  const int64_t t = blockIdx.x;
  write_normed_row<N>(x + t * H, w, sum_squares_of<N>(x + t * H, H), eps, H, out + t * H);
}

// residual = bf16(residual + x), then out = rmsnorm(residual). Σ of the rounded sums' squares is
// taken as they are made, and the thread that rounds an element is the one that reads it back,
// so no barrier is needed between the two passes.
template <int N>
__global__ void add_rmsnorm_kernel(bf16* residual, const bf16* x, const bf16* w, float eps, int64_t H, bf16* out) {
  await_previous_kernel();
  const int64_t t = blockIdx.x;
  bf16* row = residual + t * H;
  float sum_squares = 0.0f;
  for (int64_t i = int64_t{threadIdx.x} * N; i < H; i += int64_t{blockDim.x} * N) {
    const BfPack<N> rs = load_pack<N>(row + i), xs = load_pack<N>(x + t * H + i);
    BfPack<N> sum;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      sum.v[j] = __float2bfloat16(__bfloat162float(rs.v[j]) + __bfloat162float(xs.v[j]));
      const float v = __bfloat162float(sum.v[j]);
      sum_squares += v * v;
    }
    store_pack<N>(row + i, sum);
  }
  write_normed_row<N>(row, w, sum_squares, eps, H, out + t * H);
}

// Threads of a row kernel moving 8 elements per access: one pack each where the row allows
// (a multiple of 32, at most 1024, as block_sum needs).
int norm_threads_for_packs(int64_t H) {
  const int64_t packs = H / 8;
  return static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(32, (packs + 31) / 32 * 32)));
}

// Where qk_norm_rope puts each token's k and v: its (sequence, position) slot of the paged cache.
struct CacheSlots {
  bf16* k_cache;  // [pages, page_size, nkv, hd]
  bf16* v_cache;
  const int32_t* positions;
  const int32_t* seq_starts;
  const int32_t* page_table;  // [sequences, max_pages]
  int max_pages, page_size;
};

// Block (x, y, z) = heads [x * H, (x + 1) * H), H = kRopeWarps * kHeadsPerWarp, of new token y of
// sequence z (q, k, then v heads): for SDAR's 48 heads of 128, one block per token. Warp w takes
// heads w, w + kRopeWarps, ... and loads all of them before using the first: one warp per head
// left the kernel three waves of short latency chains (12 us at 512 tokens, 2026-12-01 run 14);
// a few heads per warp fit one wave with every load in flight. A lane owns P consecutive
// rotation pairs (i, i + hd/2), i = P * lane + 32 * P * k, read once into registers as P-element
// accesses (P = 2 when hd/2 is even) and used for both the norm and the rotation. q is written
// back in place; k and v go to the token's cache slot, so no separate kernel copies them there.
// What depends only on the batch layout (the token, its position, its rotation angles, its cache
// slot) is done before waiting for the previous kernel: the layout was uploaded before the
// forward began, so it overlaps the previous kernel's tail.
template <int P, int kPairs>  // kPairs: rotation pairs a lane holds per head, at most
__global__ void qk_norm_rope_kernel(bf16* qkv, const bf16* q_norm, const bf16* k_norm, CacheSlots cache, float eps,
                                    int nh, int nkv, int hd, RopeFrequencies freqs) {
  constexpr int kHeadsPerWarp = kRopeSlots / kPairs;
  __shared__ float sin_of[kMaxRopeHalf], cos_of[kMaxRopeHalf];
  const int seq = blockIdx.z;
  const int64_t t = int64_t{cache.seq_starts[seq]} + blockIdx.y;
  if (t >= cache.seq_starts[seq + 1]) return;  // the whole block: the sequence has fewer new tokens
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, half = hd / 2;
  const int position = cache.positions[t];
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    sincosf(static_cast<float>(position) * freqs.inv_freq[i], &sin_of[i], &cos_of[i]);
  }
  const int64_t slot = paged_slot(cache.page_table, cache.max_pages, cache.page_size, seq, position);
  await_previous_kernel();

  const int heads = nh + 2 * nkv;
  const int64_t width = int64_t{heads} * hd;
  const int first_head = blockIdx.x * kRopeWarps * kHeadsPerWarp + warp;
  float x1[kHeadsPerWarp][kPairs], x2[kHeadsPerWarp][kPairs], sum_squares[kHeadsPerWarp] = {};
#pragma unroll
  for (int j = 0; j < kHeadsPerWarp; ++j) {
    const int h = first_head + j * kRopeWarps;
    if (h >= heads) break;
    const bf16* head = qkv + t * width + int64_t{h} * hd;
#pragma unroll
    for (int k = 0; k < kPairs / P; ++k) {
      const int i = P * lane + 32 * P * k;
      if (i >= half) break;
      const BfPack<P> a = load_pack<P>(head + i), b = load_pack<P>(head + i + half);
#pragma unroll
      for (int e = 0; e < P; ++e) {
        x1[j][P * k + e] = __bfloat162float(a.v[e]);
        x2[j][P * k + e] = __bfloat162float(b.v[e]);
        sum_squares[j] += x1[j][P * k + e] * x1[j][P * k + e] + x2[j][P * k + e] * x2[j][P * k + e];
      }
    }
  }
  __syncthreads();  // the angles

#pragma unroll
  for (int j = 0; j < kHeadsPerWarp; ++j) {
    const int h = first_head + j * kRopeWarps;
    if (h >= heads) break;
    const bool is_q = h < nh, is_v = h >= nh + nkv;
    bf16* dst = is_q ? qkv + t * width + int64_t{h} * hd
                     : (is_v ? cache.v_cache : cache.k_cache) + (slot * nkv + (h - nh) % nkv) * hd;
    const bf16* norm = is_q ? q_norm : is_v ? nullptr : k_norm;
    const float scale = norm ? 1.0f / sqrtf(warp_sum(sum_squares[j]) / static_cast<float>(hd) + eps) : 1.0f;
#pragma unroll
    for (int k = 0; k < kPairs / P; ++k) {
      const int i = P * lane + 32 * P * k;
      if (i >= half) break;
      BfPack<P> a, b;
#pragma unroll
      for (int e = 0; e < P; ++e) {
        if (is_v) {  // v is copied as it is (bf16 -> fp32 -> bf16 is exact)
          a.v[e] = __float2bfloat16(x1[j][P * k + e]);
          b.v[e] = __float2bfloat16(x2[j][P * k + e]);
          continue;
        }
        float v1 = x1[j][P * k + e] * scale, v2 = x2[j][P * k + e] * scale;
        if (norm) {
          v1 *= __bfloat162float(norm[i + e]);
          v2 *= __bfloat162float(norm[i + e + half]);
        }
        const float sin_a = sin_of[i + e], cos_a = cos_of[i + e];
        a.v[e] = __float2bfloat16(v1 * cos_a - v2 * sin_a);
        b.v[e] = __float2bfloat16(v2 * cos_a + v1 * sin_a);
      }
      store_pack<P>(dst + i, a);
      store_pack<P>(dst + i + half, b);
    }
  }
}

}  // namespace

void CudaBackend::rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  const RowsShape shape = check_rmsnorm_args(x, w, out, DType::BF16);
  const int64_t T = shape.rows, H = shape.width;
  if (T == 0) return;
  const auto blocks = static_cast<unsigned>(T);
  const bool packs = packs_of_8(H, {x.data, w.data, out.data});
  launch_kernel("rmsnorm_kernel", packs ? rmsnorm_kernel<8> : rmsnorm_kernel<1>, blocks,
                packs ? norm_threads_for_packs(H) : kNormThreads, 0, stream_, x.ptr<bf16>(), w.ptr<bf16>(), eps, H,
                out.ptr<bf16>());
}

void CudaBackend::add_rmsnorm(Tensor& residual, const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  const RowsShape shape = check_add_rmsnorm_args(residual, x, w, out, DType::BF16);
  const int64_t T = shape.rows, H = shape.width;
  if (T == 0) return;
  const auto blocks = static_cast<unsigned>(T);
  const bool packs = packs_of_8(H, {residual.data, x.data, w.data, out.data});
  launch_kernel("add_rmsnorm_kernel", packs ? add_rmsnorm_kernel<8> : add_rmsnorm_kernel<1>, blocks,
                packs ? norm_threads_for_packs(H) : kNormThreads, 0, stream_, residual.ptr<bf16>(), x.ptr<bf16>(),
                w.ptr<bf16>(), eps, H, out.ptr<bf16>());
}

void CudaBackend::qk_norm_rope(Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                               const ForwardBatch& batch, float rope_theta, int nh, int nkv, int hd, Tensor& k_cache,
                               Tensor& v_cache, int page_size) {
  const PagedBatchShape shape =
      check_qk_norm_rope_args(qkv, q_norm, k_norm, batch, nh, nkv, hd, k_cache, v_cache, page_size, DType::BF16);
  JET_CHECK(hd / 2 <= kMaxRopeHalf, "qk_norm_rope: head_dim ", hd, " exceeds the CUDA backend's limit of ",
            2 * kMaxRopeHalf);
  if (shape.tokens == 0) return;
  const BatchLayout& layout = batch.host;
  const int max_new = shape.longest_new;
  JET_CHECK(max_new <= 65535, "qk_norm_rope: ", max_new, " new tokens in one sequence exceed the grid's limit");

  RopeFrequencies freqs{};
  for (int i = 0; i < hd / 2; ++i) freqs.inv_freq[i] = 1.0f / std::pow(rope_theta, static_cast<float>(2 * i) / hd);
  const CacheSlots cache{k_cache.ptr<bf16>(),
                         v_cache.ptr<bf16>(),
                         batch.positions.ptr<int32_t>(),
                         batch.seq_starts.ptr<int32_t>(),
                         batch.page_table.ptr<int32_t>(),
                         layout.max_pages,
                         page_size};
  // Pairs of elements per access when both halves of every head start on 4-byte boundaries, in
  // qkv and in the cache rows alike (heads are hd elements apart in both).
  const bool pairs = hd % 4 == 0 && aligned_16({qkv.data, k_cache.data, v_cache.data});
  const bool short_heads = hd <= 128;  // at most 2 rotation pairs per lane
  auto* kernel = pairs ? (short_heads ? qk_norm_rope_kernel<2, 2> : qk_norm_rope_kernel<2, 8>)
                       : (short_heads ? qk_norm_rope_kernel<1, 2> : qk_norm_rope_kernel<1, 8>);
  const int heads_per_block = kRopeWarps * (kRopeSlots / (short_heads ? 2 : 8));
  const dim3 grid(static_cast<unsigned>((nh + 2 * nkv + heads_per_block - 1) / heads_per_block),
                  static_cast<unsigned>(max_new), static_cast<unsigned>(layout.num_seqs));
  launch_kernel("qk_norm_rope_kernel", kernel, grid, 32 * kRopeWarps, 0, stream_, qkv.ptr<bf16>(), q_norm.ptr<bf16>(),
                k_norm.ptr<bf16>(), cache, eps, nh, nkv, hd, freqs);
}

}  // namespace jet::cuda
