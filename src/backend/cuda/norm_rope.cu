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

// How qk_norm_rope lays a token's heads over a block's lanes. A head is kLanes lanes; a lane
// holds kPacks P-element accesses of each half of it, at i = P * sub + kLanes * P * k (sub its
// place in the group, k < kPacks), and its rotation pairs (i, i + hd / 2) meet in the lane. A
// warp holds 32 / kLanes heads at once and kSteps such sets, all loaded before the first is used.
// Blocks have kWarps warps, kMinBlocks of them resident per multiprocessor (the register budget).
template <int P_, int kLanes_, int kPacks_, int kSteps_, int kWarps_, int kMinBlocks_>
struct RopeLayout {
  static constexpr int P = P_, kLanes = kLanes_, kPacks = kPacks_, kSteps = kSteps_, kWarps = kWarps_;
  static constexpr int kGroups = 32 / kLanes;  // heads a warp holds at once
  static constexpr int kHeadsPerBlock = kWarps * kGroups * kSteps;
  static constexpr int kThreads = 32 * kWarps, kMinBlocks = kMinBlocks_;
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0);
};
// 16-byte accesses, 8 lanes a head of 128: a block of 6 warps takes SDAR's 48 heads of a token (2
// a lane), and 5 blocks (64 registers a thread, no spills) fit a multiprocessor.
using WideRope = RopeLayout<8, 8, 1, 2, 6, 5>;
// A warp a head, 2 or 1 elements an access, heads of up to 128 or 512: the other head sizes.
using PairRope = RopeLayout<2, 32, 1, 6, 8, 4>;
using LongPairRope = RopeLayout<2, 32, 4, 2, 8, 2>;
using SingleRope = RopeLayout<1, 32, 2, 6, 8, 2>;
using LongSingleRope = RopeLayout<1, 32, 8, 2, 8, 2>;

// Block (x, y, z) = heads [x * H, (x + 1) * H) of new token y of sequence z (q, k, then v heads),
// H = L::kHeadsPerBlock: for SDAR's 48 heads of 128, one block per token, each lane holding 8
// elements of each half of 2 heads in 16-byte accesses (WideRope). (A warp a head with 2-element
// accesses spent about 190 instructions a head a warp and reached a third of the bandwidth.) q is
// written back in place; k and v go to the token's
// cache slot, so no separate kernel copies them there. The token's position, angles and cache
// slot and the norm weights (as floats in shared memory) are ready before the wait for the
// previous kernel: they read only the batch layout and the weights. (That wait rarely hides
// anything: the previous kernel is a GEMM whose CTAs hold the multiprocessors to its end.)
template <typename L>
__global__ void __launch_bounds__(L::kThreads, L::kMinBlocks)
    qk_norm_rope_kernel(bf16* qkv, const bf16* bias, const bf16* q_norm, const bf16* k_norm, CacheSlots cache,
                        float eps, int nh, int nkv, int hd, RopeFrequencies freqs) {
  constexpr int P = L::P, kLanes = L::kLanes, kPacks = L::kPacks, kSteps = L::kSteps;
  __shared__ float sin_of[kMaxRopeHalf], cos_of[kMaxRopeHalf], q_weight[2 * kMaxRopeHalf], k_weight[2 * kMaxRopeHalf];
  const int seq = blockIdx.z;
  const int64_t t = int64_t{cache.seq_starts[seq]} + blockIdx.y;
  if (t >= cache.seq_starts[seq + 1]) return;  // the whole block: the sequence has fewer new tokens
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, half = hd / 2;
  const int sub = lane % kLanes, heads = nh + 2 * nkv;
  const int64_t width = int64_t{heads} * hd;
  // Head of step s: warp-major within a step, so a step covers consecutive heads.
  const int head0 = blockIdx.x * L::kHeadsPerBlock + warp * L::kGroups + lane / kLanes;
  auto head_of = [&](int s) { return head0 + s * L::kWarps * L::kGroups; };
  auto index_of = [&](int k) { return P * sub + kLanes * P * k; };
  const int position = cache.positions[t];
  const int64_t slot = paged_slot(cache.page_table, cache.max_pages, cache.page_size, seq, position);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    sincosf(static_cast<float>(position) * freqs.inv_freq[i], &sin_of[i], &cos_of[i]);
  }
  for (int i = threadIdx.x; i < hd; i += blockDim.x) {  // unread where the model has no norm
    if (q_norm) q_weight[i] = __bfloat162float(q_norm[i]);
    if (k_norm) k_weight[i] = __bfloat162float(k_norm[i]);
  }
  await_previous_kernel();

  // The heads as bf16 (half the registers of floats); what lies past the last head or half is 0.
  BfPack<P> x1[kSteps][kPacks] = {}, x2[kSteps][kPacks] = {};
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int h = head_of(s);
    const bf16* head = qkv + t * width + int64_t{h} * hd;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int i = index_of(k);
      if (h >= heads || i >= half) break;
      x1[s][k] = load_pack<P>(head + i);
      x2[s][k] = load_pack<P>(head + i + half);
    }
  }
  if (bias) {  // each sum rounded to bf16, as the output of a biased projection is
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int h = head_of(s);
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        const int i = index_of(k);
        if (h >= heads || i >= half) break;
        const BfPack<P> b1 = load_pack<P>(bias + int64_t{h} * hd + i),
                        b2 = load_pack<P>(bias + int64_t{h} * hd + i + half);
#pragma unroll
        for (int e = 0; e < P; ++e) {
          x1[s][k].v[e] = __float2bfloat16(__bfloat162float(x1[s][k].v[e]) + __bfloat162float(b1.v[e]));
          x2[s][k].v[e] = __float2bfloat16(__bfloat162float(x2[s][k].v[e]) + __bfloat162float(b2.v[e]));
        }
      }
    }
  }
  float sum_squares[kSteps] = {};
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
#pragma unroll
      for (int e = 0; e < P; ++e) {
        const float v1 = __bfloat162float(x1[s][k].v[e]), v2 = __bfloat162float(x2[s][k].v[e]);
        sum_squares[s] += v1 * v1 + v2 * v2;
      }
    }
    sum_squares[s] = lane_group_sum<kLanes>(sum_squares[s]);  // every lane takes part
  }
  __syncthreads();  // the angles and weights

#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int h = head_of(s);
    if (h >= heads) break;  // later steps hold later heads
    const bool is_q = h < nh, is_v = h >= nh + nkv;
    bf16* dst = is_q ? qkv + t * width + int64_t{h} * hd
                     : (is_v ? cache.v_cache : cache.k_cache) + (slot * nkv + (h - nh) % nkv) * hd;
    const bool normed = is_q ? q_norm != nullptr : !is_v && k_norm != nullptr;
    const float scale = normed ? 1.0f / sqrtf(sum_squares[s] / static_cast<float>(hd) + eps) : 1.0f;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int i = index_of(k);
      if (i >= half) break;
      if (is_v) {  // v is copied as it is
        store_pack<P>(dst + i, x1[s][k]);
        store_pack<P>(dst + i + half, x2[s][k]);
        continue;
      }
      BfPack<P> a, b;
#pragma unroll
      for (int e = 0; e < P; ++e) {
        float v1 = __bfloat162float(x1[s][k].v[e]) * scale, v2 = __bfloat162float(x2[s][k].v[e]) * scale;
        if (normed) {
          const float* weight = is_q ? q_weight : k_weight;
          v1 *= weight[i + e];
          v2 *= weight[i + e + half];
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

// A partial RoPE (LLaDA2: the first rotary_dim of each head's dimensions rotate, pairing i with
// i + rotary_dim / 2; the rest pass), with the bias and norms of qk_norm_rope_kernel: a warp a
// head, the head staged in shared memory so that a lane may read its pair from another lane.
// Grid as qk_norm_rope_kernel's, kPartialWarps heads a block.
constexpr int kPartialWarps = 8;

__global__ void __launch_bounds__(32 * kPartialWarps)
    partial_rope_kernel(bf16* qkv, const bf16* bias, const bf16* q_norm, const bf16* k_norm, CacheSlots cache,
                        float eps, int nh, int nkv, int hd, int rotary_dim, RopeFrequencies freqs) {
  __shared__ float head_of_warp[kPartialWarps][2 * kMaxRopeHalf];
  const int seq = blockIdx.z;
  const int64_t t = int64_t{cache.seq_starts[seq]} + blockIdx.y;
  if (t >= cache.seq_starts[seq + 1]) return;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, heads = nh + 2 * nkv;
  const int h = blockIdx.x * kPartialWarps + warp;
  await_previous_kernel();
  if (h >= heads) return;  // the whole warp
  const int64_t width = int64_t{heads} * hd;
  const int position = cache.positions[t];
  const int64_t slot = paged_slot(cache.page_table, cache.max_pages, cache.page_size, seq, position);
  const bool is_q = h < nh, is_v = h >= nh + nkv;
  const bf16* src = qkv + t * width + int64_t{h} * hd;
  float* x = head_of_warp[warp];
  float sum_squares = 0.0f;
  for (int i = lane; i < hd; i += 32) {
    float v = __bfloat162float(src[i]);
    if (bias) v = __bfloat162float(__float2bfloat16(v + __bfloat162float(bias[int64_t{h} * hd + i])));
    x[i] = v;
    sum_squares += v * v;
  }
  sum_squares = warp_sum(sum_squares);
  const bf16* norm = is_q ? q_norm : (is_v ? nullptr : k_norm);
  const float scale = norm ? 1.0f / sqrtf(sum_squares / static_cast<float>(hd) + eps) : 1.0f;
  if (norm) {
    for (int i = lane; i < hd; i += 32) x[i] *= scale * __bfloat162float(norm[i]);
  }
  __syncwarp();
  bf16* dst = is_q ? qkv + t * width + int64_t{h} * hd
                   : (is_v ? cache.v_cache : cache.k_cache) + (slot * nkv + (h - nh) % nkv) * hd;
  const int half = rotary_dim / 2;
  for (int i = lane; i < hd; i += 32) {
    float v = x[i];
    if (!is_v && i < rotary_dim) {
      const int j = i < half ? i : i - half;
      float sin_a, cos_a;
      sincosf(static_cast<float>(position) * freqs.inv_freq[j], &sin_a, &cos_a);
      v = i < half ? x[i] * cos_a - x[i + half] * sin_a : x[i] * cos_a + x[i - half] * sin_a;
    }
    dst[i] = __float2bfloat16(v);
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

void CudaBackend::qk_norm_rope(Tensor& qkv, const Tensor& bias, const Tensor& q_norm, const Tensor& k_norm, float eps,
                               const ForwardBatch& batch, float rope_theta, int nh, int nkv, int hd, Tensor& k_cache,
                               Tensor& v_cache, int page_size, int rotary_dim) {
  const PagedBatchShape shape =
      check_qk_norm_rope_args(qkv, bias, q_norm, k_norm, batch, nh, nkv, hd, k_cache, v_cache, page_size, DType::BF16);
  JET_CHECK(hd / 2 <= kMaxRopeHalf, "qk_norm_rope: head_dim ", hd, " exceeds the CUDA backend's limit of ",
            2 * kMaxRopeHalf);
  const int rot = rotary_dim == 0 ? hd : rotary_dim;
  JET_CHECK(rot >= 2 && rot <= hd && rot % 2 == 0, "qk_norm_rope: rotary_dim ", rotary_dim,
            " must be even and in [2, head_dim = ", hd, "] (or 0: all of it)");
  if (shape.tokens == 0) return;
  const BatchLayout& layout = batch.host;
  const int max_new = shape.longest_new;
  JET_CHECK(max_new <= 65535, "qk_norm_rope: ", max_new, " new tokens in one sequence exceed the grid's limit");

  RopeFrequencies freqs{};
  for (int i = 0; i < rot / 2; ++i) freqs.inv_freq[i] = 1.0f / std::pow(rope_theta, static_cast<float>(2 * i) / rot);
  const CacheSlots cache{k_cache.ptr<bf16>(),
                         v_cache.ptr<bf16>(),
                         batch.positions.ptr<int32_t>(),
                         batch.seq_starts.ptr<int32_t>(),
                         batch.page_table.ptr<int32_t>(),
                         layout.max_pages,
                         page_size};
  // The layout: WideRope when every half-head starts on a 16-byte boundary (in qkv and the cache
  // rows; the norm weights are read an element at a time) and hd is 128 (SDAR, LLaDA), else a
  // warp a head, with pairs of elements per access when the halves start on 4-byte boundaries.
  const bool wide = hd == 128 && aligned_16({qkv.data, bias.data, k_cache.data, v_cache.data});
  const bool pairs = hd % 4 == 0 && aligned_16({qkv.data, bias.data, k_cache.data, v_cache.data});
  const bool short_heads = hd <= 128;
  const auto launch = [&]<typename L>(L) {
    const dim3 grid(static_cast<unsigned>((nh + 2 * nkv + L::kHeadsPerBlock - 1) / L::kHeadsPerBlock),
                    static_cast<unsigned>(max_new), static_cast<unsigned>(layout.num_seqs));
    launch_kernel("qk_norm_rope_kernel", qk_norm_rope_kernel<L>, grid, L::kThreads, 0, stream_, qkv.ptr<bf16>(),
                  bias.ptr<bf16>(), q_norm.ptr<bf16>(), k_norm.ptr<bf16>(), cache, eps, nh, nkv, hd, freqs);
  };
  if (rot < hd) {
    const dim3 grid(static_cast<unsigned>((nh + 2 * nkv + kPartialWarps - 1) / kPartialWarps),
                    static_cast<unsigned>(max_new), static_cast<unsigned>(layout.num_seqs));
    launch_kernel("partial_rope_kernel", partial_rope_kernel, grid, 32 * kPartialWarps, 0, stream_, qkv.ptr<bf16>(),
                  bias.ptr<bf16>(), q_norm.ptr<bf16>(), k_norm.ptr<bf16>(), cache, eps, nh, nkv, hd, rot, freqs);
    return;
  }
  if (wide) return launch(WideRope{});
  if (pairs) return short_heads ? launch(PairRope{}) : launch(LongPairRope{});
  short_heads ? launch(SingleRope{}) : launch(LongSingleRope{});
}

}  // namespace jet::cuda
