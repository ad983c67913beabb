// Mixture-of-experts FFN on the device, with no host synchronisation (so it records into CUDA
// graphs): fp32 router logits through the matmul op; one warp per token takes the softmax and
// the top-k (ties to the lower expert id, optional renormalisation), or LLaDA2's biased,
// group-limited sigmoid routing; one CTA sorts the routes by
// expert and cuts each expert's rows into tiles; the tokens' rows are gathered into that order
// for the copy engine; the grouped gate/up (with SwiGLU) and down GEMMs (expert_gemm.cuh) run
// over the tiles; a shared expert runs through the dense ops; each token sums its experts'
// weighted outputs in rank order (the CPU op's order) and the shared expert's. FP8 experts
// quantize their A rows first (x's gathered, then hidden; docs/fp8.md) and run the same GEMMs on
// e4m3 codes; an FP8 shared expert runs through matmul_fp8. Weights that hold
// a run of the experts (expert parallelism) sort and run only their routes; the others add
// nothing. Scratch lives in a buffer of the backend that grows to the largest call; tokens are
// taken in chunks so that it stays bounded.
#include <algorithm>
#include <cfloat>
#include <type_traits>

#include "backend/cuda/expert_gemm.cuh"
#include "backend/cuda/fp8_codes.cuh"
#include "backend/cuda/kernel_util.cuh"
#include "backend/op_checks.h"

namespace jet::cuda {

namespace {

using moe_detail::ExpertGemmArgs;
using moe_detail::ExpertGemmMaps;
using moe_detail::ExpertTiles;
using moe_detail::Operands;
using moe_detail::Product;

constexpr int kRouteThreads = 256;
constexpr int kSortThreads = 1024;
// Routes per chunk: a chunk's scratch is about routes * (2 I + 4 H) bytes.
constexpr int64_t kMaxChunkRoutes = 32768;
// Router probabilities per chunk (fp32 [tokens, E]).
constexpr int64_t kMaxChunkProbs = int64_t{1} << 24;

// Warp-strided loops: every lane of a warp sees the same work item, so warp shuffles stay legal.
__device__ __forceinline__ int64_t global_warp() { return (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; }
__device__ __forceinline__ int64_t warps_in_grid() { return int64_t{gridDim.x} * blockDim.x / 32; }

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The routing of MoeRouting on the device.
struct RouteParams {
  int E, top_k;
  bool sigmoid, renormalize;
  const float* bias;  // [E] or null (sigmoid only)
  int n_group, topk_group;
  float scaling;
};

// The warp's best (key, expert) over e = lane, lane + 32, ... < E where key_of(e) is finite
// (ties: the lower expert); E when none is.
template <typename KeyOf>
__device__ int warp_best(int E, KeyOf key_of, float& best) {
  const int lane = threadIdx.x % 32;
  best = -INFINITY;
  int best_e = E;
  for (int e = lane; e < E; e += 32) {
    const float key = key_of(e);
    if (key > best) {  // strict: the lower id wins a tie within the lane
      best = key;
      best_e = e;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, best, offset);
    const int other_e = __shfl_xor_sync(0xffffffffu, best_e, offset);
    if (other > best || (other == best && other_e < best_e)) {
      best = other;
      best_e = other_e;
    }
  }
  return best_e;
}

// One warp routes one token by LLaDA2's rule (MoeRouting::Score::Sigmoid): p [E] holds the router
// logits and is overwritten with the sigmoid scores, then with -inf at each chosen expert. The
// bias only ranks; groups of E / n_group score the sum of their two best biased scores, and the
// top_k come from the topk_group best groups (n_group <= 32: a lane holds a group).
__device__ void route_token_sigmoid(float* p, const RouteParams& r, int32_t* experts, float* weights) {
  const int lane = threadIdx.x % 32;
  for (int e = lane; e < r.E; e += 32) p[e] = 1.0f / (1.0f + expf(-p[e]));
  __syncwarp();
  const auto biased = [&](int e) { return p[e] + (r.bias ? r.bias[e] : 0.0f); };
  const int group_size = r.E / r.n_group;
  float group_score = -INFINITY;
  if (lane < r.n_group) {
    float first = -INFINITY, second = -INFINITY;
    for (int e = lane * group_size; e < (lane + 1) * group_size; ++e) {
      const float b = biased(e);
      if (b > first) {
        second = first;
        first = b;
      } else if (b > second) {
        second = b;
      }
    }
    group_score = group_size > 1 ? first + second : first;
  }
  uint32_t kept = 0;  // bit g: group g holds candidates
  for (int k = 0; k < r.topk_group; ++k) {
    float best = 0.0f;
    const int g = warp_best(
        32, [&](int e) { return e == lane && !((kept >> e) & 1u) ? group_score : -INFINITY; }, best);
    if (g < 32) kept |= 1u << g;
  }
  float chosen = 0.0f;
  for (int k = 0; k < r.top_k; ++k) {
    float best = 0.0f;
    int best_e = warp_best(
        r.E, [&](int e) { return (kept >> (e / group_size)) & 1u ? biased(e) : -INFINITY; }, best);
    float score = NAN;  // only NaN logits leave nothing to choose: keep the id in range, the weight NaN
    if (best_e == r.E) {
      best_e = 0;
    } else {
      score = p[best_e];
    }
    chosen += score;
    __syncwarp();
    if (lane == 0) {
      experts[k] = best_e;
      weights[k] = score;
      p[best_e] = -INFINITY;  // never chosen again
    }
    __syncwarp();
  }
  for (int k = lane; k < r.top_k; k += 32) {
    weights[k] = (r.renormalize ? weights[k] / (chosen + 1e-20f) : weights[k]) * r.scaling;
  }
}

// One warp routes one token: p [E] holds the router logits and is overwritten with the softmax,
// then with -inf at each chosen expert; experts/weights [top_k] receive the choices in rank order.
__device__ void route_token(float* p, const RouteParams& r, int32_t* experts, float* weights) {
  const int lane = threadIdx.x % 32;
  float max_logit = -FLT_MAX;
  for (int e = lane; e < r.E; e += 32) max_logit = fmaxf(max_logit, p[e]);
  max_logit = warp_max(max_logit);
  float sum = 0.0f;
  for (int e = lane; e < r.E; e += 32) {
    p[e] = expf(p[e] - max_logit);
    sum += p[e];
  }
  sum = warp_sum(sum);
  for (int e = lane; e < r.E; e += 32) p[e] /= sum;
  __syncwarp();

  float chosen = 0.0f;
  for (int k = 0; k < r.top_k; ++k) {
    float best = 0.0f;
    int best_e = warp_best(
        r.E, [&](int e) { return p[e]; }, best);
    if (best_e == r.E) {  // only NaN logits leave nothing to choose: keep the id in range, the weight NaN
      best_e = 0;
      best = NAN;
    }
    chosen += best;
    __syncwarp();
    if (lane == 0) {
      experts[k] = best_e;
      weights[k] = best;
      p[best_e] = -INFINITY;  // never chosen again
    }
    __syncwarp();
  }
  for (int k = lane; k < r.top_k; k += 32) weights[k] = (r.renormalize ? weights[k] / chosen : weights[k]) * r.scaling;
}

__global__ void route_kernel(float* probs, int64_t T, RouteParams r, int32_t* experts, float* weights) {
  await_previous_kernel();
  for (int64_t t = global_warp(); t < T; t += warps_in_grid()) {
    if (r.sigmoid) {
      route_token_sigmoid(probs + t * r.E, r, experts + t * r.top_k, weights + t * r.top_k);
    } else {
      route_token(probs + t * r.E, r, experts + t * r.top_k, weights + t * r.top_k);
    }
  }
}

// Exclusive prefix sum over the block (kSortThreads threads, all taking part); `total` gets the sum.
__device__ int block_exclusive_scan(int v, int* total) {
  __shared__ int warp_totals[kSortThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int inclusive = v;
  for (int offset = 1; offset < 32; offset *= 2) {
    const int other = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int w = warp_totals[lane];
    for (int offset = 1; offset < 32; offset *= 2) {
      const int other = __shfl_up_sync(0xffffffffu, w, offset);
      if (lane >= offset) w += other;
    }
    warp_totals[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  const int before = (warp > 0 ? warp_totals[warp - 1] : 0) + inclusive - v;
  *total = warp_totals[kSortThreads / 32 - 1];
  __syncthreads();  // warp_totals is reused by the next call
  return before;
}

// Scratch of the sort, on the device.
struct SortScratch {
  int32_t* counts;      // [E]
  int32_t* rank;        // [routes]: the route's place among its expert's routes
  int32_t* row_begin;   // [E]: the expert's first sorted row
  int32_t* tile_begin;  // [E]: the expert's first tile
};

// The held expert (of E held from expert0 on) of a route's expert id, or -1 when not held.
__device__ __forceinline__ int held_expert(int32_t expert, int expert0, int E) {
  const int e = expert - expert0;
  return e >= 0 && e < E ? e : -1;
}

// One CTA: counts the routes of each held expert, places every route of them in expert order
// (sorted[row] = route; the rows past them get route 0, so every row names a route) and writes
// the tiles of at most rows_per_tile rows each.
__global__ void __launch_bounds__(kSortThreads)
    sort_routes_kernel(const int32_t* experts, int routes, int expert0, int E, int rows_per_tile, SortScratch s,
                       int32_t* sorted, ExpertTiles tiles) {
  await_previous_kernel();
  const int tid = threadIdx.x;
  for (int e = tid; e < E; e += kSortThreads) s.counts[e] = 0;
  __syncthreads();
  for (int r = tid; r < routes; r += kSortThreads) {
    const int e = held_expert(experts[r], expert0, E);
    s.rank[r] = e < 0 ? -1 : atomicAdd(&s.counts[e], 1);
  }
  __syncthreads();

  // Thread tid owns experts [first, last): its sums, scanned over the block, give their offsets.
  const int per_thread = (E + kSortThreads - 1) / kSortThreads;
  const int first = min(E, tid * per_thread), last = min(E, first + per_thread);
  int my_rows = 0, my_tiles = 0;
  for (int e = first; e < last; ++e) {
    my_rows += s.counts[e];
    my_tiles += (s.counts[e] + rows_per_tile - 1) / rows_per_tile;
  }
  int total_rows = 0, total_tiles = 0;
  int row = block_exclusive_scan(my_rows, &total_rows);
  int tile = block_exclusive_scan(my_tiles, &total_tiles);
  for (int e = first; e < last; ++e) {
    s.row_begin[e] = row;
    s.tile_begin[e] = tile;
    row += s.counts[e];
    tile += (s.counts[e] + rows_per_tile - 1) / rows_per_tile;
  }
  if (tid == 0) *tiles.count = total_tiles;
  __syncthreads();

  for (int r = tid; r < routes; r += kSortThreads) {
    const int e = held_expert(experts[r], expert0, E);
    if (e >= 0) sorted[s.row_begin[e] + s.rank[r]] = r;
  }
  for (int row = total_rows + tid; row < routes; row += kSortThreads) sorted[row] = 0;
  for (int e = tid; e < E; e += kSortThreads) {
    const int begin = s.row_begin[e], end = begin + s.counts[e];
    for (int t = s.tile_begin[e], b = begin; b < end; ++t, b += rows_per_tile) {
      tiles.expert[t] = e;
      tiles.begin[t] = b;
      tiles.end[t] = min(end, b + rows_per_tile);
    }
  }
}

// gathered[row] = x[the token of route sorted[row]], 16 bytes a lane: gate/up's A rows in the
// order the tensor-map copies read them. (uint4, not BfPack: unrolled, the compiler split the
// pack's stores into 2-byte ones.)
__global__ void gather_sorted_rows_kernel(const bf16* x, const int32_t* sorted, int64_t routes, int top_k, int64_t H,
                                          bf16* gathered) {
  await_previous_kernel();
  const int lane = threadIdx.x % 32;
  for (int64_t row = global_warp(); row < routes; row += warps_in_grid()) {
    const uint4* src = reinterpret_cast<const uint4*>(x + int64_t{sorted[row] / top_k} * H);
    uint4* dst = reinterpret_cast<uint4*>(gathered + row * H);
    for (int64_t j = lane; j < H / 8; j += 32) dst[j] = src[j];
  }
}

__device__ __forceinline__ float as_float(float v) { return v; }
__device__ __forceinline__ float as_float(bf16 v) { return __bfloat162float(v); }

// codes[row] = source row `row` in e4m3 (with `sorted`: x's row of the token of route
// sorted[row], so gate/up's FP8 A rows come out in sorted order), one warp a row, with one scale
// per row or, `per_block`, per 128 columns, by core/fp8.h's rule: scales [rows] or
// [rows, ceil(K/128)]. Sources: x (bf16) and FP8 experts' hidden activations (fp32).
template <typename Source>
__global__ void quantize_rows_kernel(const Source* src, const int32_t* sorted, int top_k, int64_t rows, int64_t K,
                                     bool per_block, uint8_t* codes, float* scales) {
  await_previous_kernel();
  const int lane = threadIdx.x % 32;
  const int64_t group = per_block ? 128 : K, groups = per_block ? (K + 127) / 128 : 1;
  for (int64_t row = global_warp(); row < rows; row += warps_in_grid()) {
    const Source* from = src + (sorted ? int64_t{sorted[row] / top_k} : row) * K;
    uint8_t* to = codes + row * K;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t k0 = g * group, k1 = min(K, k0 + group);
      float amax = 0.0f;
      for (int64_t k = k0 + lane; k < k1; k += 32) amax = fmaxf(amax, fabsf(as_float(from[k])));
      amax = warp_max(amax);
      const float scale = e4m3_scale(amax);
      for (int64_t k = k0 + lane; k < k1; k += 32) to[k] = e4m3_code(as_float(from[k]), scale);
      if (lane == 0) scales[row * groups + g] = scale;
    }
  }
}

// act[t, i] = silu(gate) * up of the shared expert's gate_up [T, 2S] (fp32, or bf16 from FP8
// GEMMs), rounded to bf16 once, as the routed experts' hidden activations are.
template <typename In>
__global__ void shared_swiglu_kernel(const In* gate_up, int64_t T, int64_t S, bf16* act) {
  await_previous_kernel();
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < T * S; k += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = k / S, i = k % S;
    const float g = as_float(gate_up[t * 2 * S + i]), u = as_float(gate_up[t * 2 * S + S + i]);
    act[k] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
  }
}

// out[t, j] = Σ_k route_out[t * top_k + k, j] over the routes to held experts, in rank order,
// plus shared[t, j] (the shared expert's output: fp32, or bf16 from FP8 GEMMs) when given.
template <int kPack, typename Shared>
__global__ void combine_kernel(const float* route_out, const int32_t* experts, int expert0, int held, int64_t T,
                               int top_k, int64_t H, const Shared* shared, bf16* out) {
  await_previous_kernel();
  const int64_t packs = H / kPack;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < T * packs;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / packs, j = (i % packs) * kPack;
    float sum[kPack] = {};
    if (shared) {
      for (int e = 0; e < kPack; ++e) sum[e] = as_float(shared[t * H + j + e]);
    }
    for (int k = 0; k < top_k; ++k) {
      if (held_expert(experts[t * top_k + k], expert0, held) < 0) continue;
      const float* src = route_out + (t * top_k + k) * H + j;
      if constexpr (kPack == 4) {
        const float4 v = *reinterpret_cast<const float4*>(src);
        sum[0] += v.x, sum[1] += v.y, sum[2] += v.z, sum[3] += v.w;
      } else {
        sum[0] += src[0];
      }
    }
    if constexpr (kPack == 4) {
      *reinterpret_cast<uint2*>(out + t * H + j) = make_uint2(pack_bf16(sum[0], sum[1]), pack_bf16(sum[2], sum[3]));
    } else {
      out[t * H + j] = __float2bfloat16(sum[0]);
    }
  }
}

// Rows per expert tile: at small counts about twice an expert's usual share of the routes, so
// that most experts take one tile and their weights are read once (a part-full tile costs
// products, not bytes, and the bytes bind there). The 64-row kernel keeps two CTAs on a
// multiprocessor; once an expert averages more than about 48 routes, the 128-row one, which
// reads each expert's weights half as often, is ahead (bench/moe_op_bench).
int rows_per_tile(int64_t routes, int64_t experts) {
  const int64_t average = (routes + experts - 1) / experts;
  if (average <= 6) return 16;
  if (average <= 14) return 32;
  if (average <= 48) return 64;
  return 128;
}

// The most tiles any routing of `routes` can make: Σ_e ceil(count_e / rows) <= routes / rows +
// (experts with a route).
int64_t max_tiles_for(int64_t routes, int rows, int64_t experts) { return routes / rows + std::min(experts, routes); }

template <int kRows, Product kProduct, Operands kOperands, bool kTma>
void launch_expert_gemm(const ExpertGemmArgs& args, const ExpertGemmMaps& maps, int max_tiles, cudaStream_t stream) {
  using Shape = moe_detail::TileShape<kRows>;
  constexpr size_t shared = Shape::kSharedBytes;
  auto* kernel = moe_detail::expert_gemm_kernel<kRows, kProduct, kOperands, kTma>;
  // The CTAs that fit on the GPU at once: the persistent kernel's grid, at most one per item.
  static const int64_t resident = [&] {
    JET_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int{shared}));
    int per_multiprocessor = 0;
    JET_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel, Shape::kThreads, shared));
    return int64_t{std::max(1, per_multiprocessor)} * multiprocessor_count();
  }();
  const int64_t items = int64_t{max_tiles} * args.col_blocks;
  JET_CHECK(items < (int64_t{1} << 31), "moe: ", items, " expert GEMM work items are more than an int holds");
  const int64_t ctas = std::min(items, resident);
  launch_kernel("expert_gemm_kernel", kernel, dim3(static_cast<unsigned>(ctas)), dim3(Shape::kThreads), shared, stream,
                args, maps);
}

template <Product kProduct, Operands kOperands, bool kTma>
void launch_expert_gemm(int rows, const ExpertGemmArgs& args, const ExpertGemmMaps& maps, int max_tiles,
                        cudaStream_t stream) {
  switch (rows) {
    case 16:
      return launch_expert_gemm<16, kProduct, kOperands, kTma>(args, maps, max_tiles, stream);
    case 32:
      return launch_expert_gemm<32, kProduct, kOperands, kTma>(args, maps, max_tiles, stream);
    case 64:
      return launch_expert_gemm<64, kProduct, kOperands, kTma>(args, maps, max_tiles, stream);
    default:
      return launch_expert_gemm<128, kProduct, kOperands, kTma>(args, maps, max_tiles, stream);
  }
}

template <Product kProduct, Operands kOperands>
void launch_expert_gemm(bool tma, int rows, const ExpertGemmArgs& args, const ExpertGemmMaps& maps, int max_tiles,
                        cudaStream_t stream) {
  if (tma) return launch_expert_gemm<kProduct, kOperands, true>(rows, args, maps, max_tiles, stream);
  launch_expert_gemm<kProduct, kOperands, false>(rows, args, maps, max_tiles, stream);
}

// With `tma` the maps describe A (in sorted order) and the weights; without, they are unused.
template <Product kProduct>
void launch_expert_gemm(Operands operands, bool tma, int rows, const ExpertGemmArgs& args, const ExpertGemmMaps& maps,
                        int max_tiles, cudaStream_t stream) {
  switch (operands) {
    case Operands::Bf16:
      return launch_expert_gemm<kProduct, Operands::Bf16>(tma, rows, args, maps, max_tiles, stream);
    case Operands::Fp8PerChannel:
      return launch_expert_gemm<kProduct, Operands::Fp8PerChannel>(tma, rows, args, maps, max_tiles, stream);
    case Operands::Fp8Block128:
      return launch_expert_gemm<kProduct, Operands::Fp8Block128>(tma, rows, args, maps, max_tiles, stream);
  }
}

// The operands of a product with weights `w`.
Operands operands_of(const Linear& w) {
  if (!w.fp8()) return Operands::Bf16;
  return w.scaling == Fp8Scaling::Block128 ? Operands::Fp8Block128 : Operands::Fp8PerChannel;
}

// Scale columns of an A row of width K under `operands`.
int64_t scale_columns(Operands operands, int64_t K) { return operands == Operands::Fp8Block128 ? (K + 127) / 128 : 1; }

// Successive 256-byte-aligned views of one scratch allocation at `base`.
class ScratchCarver {
 public:
  explicit ScratchCarver(uintptr_t base) : base_(base) {}
  template <typename T>
  T* take(int64_t count) {
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += (static_cast<size_t>(count) * sizeof(T) + 255) / 256 * 256;
    return p;
  }
  size_t used() const { return used_; }

 private:
  uintptr_t base_;
  size_t used_ = 0;
};

// The shapes that size one chunk's scratch.
struct ChunkShape {
  int64_t tokens, top_k, E, H, I, max_tiles;
  bool tma;
  Operands gate_up, down;
  int64_t S;  // the shared expert's width (0: none)
};

// Where one chunk's scratch goes; with base 0 it only counts the bytes.
struct ChunkScratch {
  float* probs;
  int32_t* experts;
  float* weights;
  SortScratch sort;
  int32_t* sorted;
  ExpertTiles tiles;
  void* gathered;         // gate/up's A [routes, H] in sorted order: bf16 with the copy engine, FP8 codes
  float* x_scales;        // FP8: their scales
  void* hidden;           // bf16; fp32 for FP8 experts
  uint8_t* hidden_codes;  // FP8: down's A, hidden's codes
  float* hidden_scales;
  float* route_out;
  float* shared_gate_up;  // the shared expert's products, fp32 (bf16 from FP8 GEMMs)
  bf16* shared_hidden;
  float* shared_out;  // its output, in fp32 until the combine rounds the sum (bf16 from FP8 GEMMs)
  size_t bytes;

  ChunkScratch(uintptr_t base, const ChunkShape& c) {
    ScratchCarver carve(base);
    const int64_t routes = c.tokens * c.top_k, H = c.H, I = c.I, S = c.S;
    const bool fp8 = c.gate_up != Operands::Bf16;
    probs = carve.take<float>(c.tokens * c.E);
    experts = carve.take<int32_t>(routes);
    weights = carve.take<float>(routes);
    sort = {carve.take<int32_t>(c.E), carve.take<int32_t>(routes), carve.take<int32_t>(c.E), carve.take<int32_t>(c.E)};
    sorted = carve.take<int32_t>(routes);
    tiles = {carve.take<int32_t>(1), carve.take<int32_t>(c.max_tiles), carve.take<int32_t>(c.max_tiles),
             carve.take<int32_t>(c.max_tiles)};
    gathered = carve.take<uint8_t>(fp8 ? routes * H : c.tma ? routes * H * static_cast<int64_t>(sizeof(bf16)) : 0);
    x_scales = carve.take<float>(fp8 ? routes * scale_columns(c.gate_up, H) : 0);
    hidden = carve.take<uint8_t>(routes * I * static_cast<int64_t>(fp8 ? sizeof(float) : sizeof(bf16)));
    hidden_codes = carve.take<uint8_t>(fp8 ? routes * I : 0);
    hidden_scales = carve.take<float>(fp8 ? routes * scale_columns(c.down, I) : 0);
    route_out = carve.take<float>(routes * H);
    shared_gate_up = carve.take<float>(c.tokens * 2 * S);
    shared_hidden = carve.take<bf16>(c.tokens * S);
    shared_out = carve.take<float>(S > 0 ? c.tokens * H : 0);
    bytes = carve.used();
  }
};

// The combine of a chunk, 4 columns a thread where the output rows allow.
template <typename Shared>
void launch_combine(const ChunkScratch& s, int expert0, int held, int64_t tokens, int top_k, int64_t H,
                    const Shared* shared, bf16* out, cudaStream_t stream) {
  if (H % 4 == 0 && reinterpret_cast<uintptr_t>(out) % 8 == 0) {  // 4 bf16 stored as one 8-byte word
    launch_kernel("combine_kernel", combine_kernel<4, Shared>, blocks_for(tokens * H / 4, 256), 256, 0, stream,
                  static_cast<const float*>(s.route_out), static_cast<const int32_t*>(s.experts), expert0, held, tokens,
                  top_k, H, shared, out);
  } else {
    launch_kernel("combine_kernel", combine_kernel<1, Shared>, blocks_for(tokens * H, 256), 256, 0, stream,
                  static_cast<const float*>(s.route_out), static_cast<const int32_t*>(s.experts), expert0, held, tokens,
                  top_k, H, shared, out);
  }
}

}  // namespace

void CudaBackend::moe(const Tensor& x, const MoeWeights& w, Tensor& out) {
  JET_CHECK(w.routing.n_group <= 32, "moe: ", w.routing.n_group,
            " expert groups; the cuda backend routes at most 32 (a lane a group)");
  const MoeShape shape = check_moe_args(x, w, out, DType::BF16);
  const int64_t T = shape.tokens, H = shape.hidden, E = shape.experts, I = shape.inter;
  const int64_t held = shape.held;
  const int expert0 = static_cast<int>(shape.expert0);
  const int top_k = shape.top_k;
  const Operands gate_up_ops = operands_of(w.gate_up), down_ops = operands_of(w.down);
  const bool fp8 = gate_up_ops != Operands::Bf16;
  // An item's 64 up rows start at row I + 64 c of the expert: one 128x128 tile when 64 divides I.
  JET_CHECK(gate_up_ops != Operands::Fp8Block128 || I % 64 == 0, "moe: FP8 experts with 128x128 weight tiles need ",
            "an expert width that is a multiple of 64 on the cuda backend (", I, ")");
  if (T == 0) return;

  const int64_t chunk_tokens = std::max<int64_t>(1, std::min({T, kMaxChunkRoutes / top_k, kMaxChunkProbs / E}));
  const int64_t chunk_routes = chunk_tokens * top_k;
  const int rows = rows_per_tile(chunk_routes, E);
  const int64_t max_tiles = max_tiles_for(chunk_routes, rows, held);
  // The copy engine needs rows of a multiple of 16 bytes; odd widths take the element-wise copies.
  const int64_t row_multiple = fp8 ? 16 : 8;
  const bool tma =
      H % row_multiple == 0 && I % row_multiple == 0 && aligned_16({x.data, w.gate_up.weight.data, w.down.weight.data});
  const int64_t S = w.shared_down.weight.data ? w.shared_down.weight.dim(1) : 0;
  const ChunkShape chunk{chunk_tokens, top_k, E, H, I, max_tiles, tma, gate_up_ops, down_ops, S};
  const ChunkScratch sizes(0, chunk);
  const Tensor raw = grow_view(moe_scratch_, DType::I32, {static_cast<int64_t>(sizes.bytes / sizeof(int32_t))});
  const ChunkScratch s(reinterpret_cast<uintptr_t>(raw.data), chunk);
  const int element_bytes = fp8 ? 1 : 2;

  // The shared expert, into its own scratch: through the matmul op its products and output in
  // fp32 and its activations rounded once, as the routed experts' are; FP8 through matmul_fp8,
  // whose outputs are bf16 (`Product`). The combine adds it.
  auto shared_expert_and_combine = [&](const Tensor& x_chunk, bf16* out_chunk, auto product_type) {
    using Product = decltype(product_type);
    constexpr bool kFp8 = std::is_same_v<Product, bf16>;
    const int64_t tokens = x_chunk.dim(0);
    const DType product = kFp8 ? DType::BF16 : DType::F32;
    Tensor gate_up(s.shared_gate_up, product, {tokens, 2 * S}), act(s.shared_hidden, DType::BF16, {tokens, S});
    Tensor shared_out(s.shared_out, product, {tokens, H});
    auto project = [&](const Tensor& in, const Linear& weight, Tensor& result) {
      if constexpr (kFp8) {
        matmul_fp8(in, weight, result);
      } else {
        matmul(in, weight.weight, result);
      }
    };
    project(x_chunk, w.shared_gate_up, gate_up);
    launch_kernel("shared_swiglu_kernel", shared_swiglu_kernel<Product>, blocks_for(tokens * S, 256), 256, 0, stream_,
                  gate_up.ptr<Product>(), tokens, S, s.shared_hidden);
    project(act, w.shared_down, shared_out);
    launch_combine<Product>(s, expert0, static_cast<int>(held), tokens, top_k, H, shared_out.ptr<Product>(), out_chunk,
                            stream_);
  };

  for (int64_t t0 = 0; t0 < T; t0 += chunk_tokens) {
    const int64_t tokens = std::min(chunk_tokens, T - t0), routes = tokens * top_k;
    const Tensor x_chunk = x.rows(t0, t0 + tokens);
    Tensor probs(s.probs, DType::F32, {tokens, E});
    matmul(x_chunk, w.router, probs);
    const RouteParams route{static_cast<int>(E),
                            top_k,
                            w.routing.score == MoeRouting::Score::Sigmoid,
                            w.routing.renormalize,
                            w.routing.bias.ptr<float>(),
                            w.routing.n_group,
                            w.routing.topk_group,
                            w.routing.scaling};
    launch_kernel("route_kernel", route_kernel, blocks_for(tokens * 32, kRouteThreads), kRouteThreads, 0, stream_,
                  s.probs, tokens, route, s.experts, s.weights);
    launch_kernel("sort_routes_kernel", sort_routes_kernel, 1, kSortThreads, 0, stream_, s.experts,
                  static_cast<int>(routes), expert0, static_cast<int>(held), rows, s.sort, s.sorted, s.tiles);

    ExpertGemmArgs args{};
    args.sorted = s.sorted;
    args.route_weights = s.weights;
    args.hidden = s.hidden;
    args.route_out = s.route_out;
    args.tiles = s.tiles;
    args.top_k = top_k;
    args.hidden_size = H;
    args.inter = I;
    const int tiles = static_cast<int>(max_tiles_for(routes, rows, held));
    ExpertGemmMaps maps{};

    args.a = x_chunk.data;
    args.w = w.gate_up.weight.data;
    args.w_scales = w.gate_up.scale.ptr<float>();
    args.col_blocks = static_cast<int>((I + moe_detail::kHiddenCols - 1) / moe_detail::kHiddenCols);
    if (fp8) {
      launch_kernel("quantize_rows_kernel", quantize_rows_kernel<bf16>, blocks_for(routes * 32, 256), 256, 0, stream_,
                    x_chunk.ptr<bf16>(), static_cast<const int32_t*>(s.sorted), top_k, routes, H,
                    gate_up_ops == Operands::Fp8Block128, static_cast<uint8_t*>(s.gathered), s.x_scales);
      args.a = s.gathered;
      args.a_scales = s.x_scales;
    } else if (tma) {
      launch_kernel("gather_sorted_rows_kernel", gather_sorted_rows_kernel, blocks_for(routes * 32, 256), 256, 0,
                    stream_, x_chunk.ptr<bf16>(), static_cast<const int32_t*>(s.sorted), routes, top_k, H,
                    static_cast<bf16*>(s.gathered));
      args.a = s.gathered;
    }
    if (tma) {
      maps.a = tensor_map(args.a, routes, H, element_bytes, rows);
      maps.w = tensor_map(args.w, held * 2 * I, H, element_bytes, moe_detail::kWeightBoxRows);
    }
    launch_expert_gemm<Product::GateUp>(gate_up_ops, tma, rows, args, maps, tiles, stream_);

    args.a = s.hidden;
    args.w = w.down.weight.data;
    args.w_scales = w.down.scale.ptr<float>();
    args.col_blocks = static_cast<int>((H + moe_detail::kWeightRows - 1) / moe_detail::kWeightRows);
    if (fp8) {
      launch_kernel("quantize_rows_kernel", quantize_rows_kernel<float>, blocks_for(routes * 32, 256), 256, 0, stream_,
                    static_cast<const float*>(s.hidden), static_cast<const int32_t*>(nullptr), top_k, routes, I,
                    down_ops == Operands::Fp8Block128, s.hidden_codes, s.hidden_scales);
      args.a = s.hidden_codes;
      args.a_scales = s.hidden_scales;
    }
    if (tma) {
      maps.a = tensor_map(args.a, routes, I, element_bytes, rows);
      maps.w = tensor_map(args.w, held * H, I, element_bytes, moe_detail::kWeightBoxRows);
    }
    launch_expert_gemm<Product::Down>(down_ops, tma, rows, args, maps, tiles, stream_);

    bf16* out_chunk = out.ptr<bf16>() + t0 * H;
    if (!w.shared_down.weight.data) {
      launch_combine<float>(s, expert0, static_cast<int>(held), tokens, top_k, H, nullptr, out_chunk, stream_);
    } else if (w.shared_down.fp8()) {
      shared_expert_and_combine(x_chunk, out_chunk, bf16{});
    } else {
      shared_expert_and_combine(x_chunk, out_chunk, float{});
    }
  }
}

}  // namespace jet::cuda
