// The grouped expert GEMMs of the MoE op (moe.cu). The routes (token, k-th choice) are sorted by
// expert and cut into row tiles of one expert each (ExpertTiles, built on the device, so the
// host never learns how many tokens an expert got); a work item is one tile against one block of
// its expert's weight rows. The kernel is persistent (a grid of as many CTAs as fit at once) and
// reads the count of tiles in use on the device, so the launch shape depends on the token count
// alone and the op records into CUDA graphs.
//
// Two products share the kernel, differing in their A rows and their epilogue:
//   gate/up: A row = the route's token row of x; the item's 128 weight rows are 64 gate rows and
//            the 64 up rows of the same hidden columns, so SwiGLU runs on the accumulators and
//            writes hidden[sorted row, I] (bf16; fp32 for FP8 experts);
//   down:    A row = hidden[sorted row]; the output, times the route's routing weight, goes to
//            route_out[route, H] in fp32, which the combine kernel sums in rank order per token.
//
// The products are bound by the weight bytes until tiles hold many rows, so the kernel is built
// to stream weights: a producer warp fills a ring of stages (one 128-byte row of k each: 64 bf16
// or 128 e4m3 codes; A rows and weight rows in 128-byte swizzled tiles) and consumer warpgroups
// multiply them (wgmma from shared memory, fp32 accumulation), each side waiting on the other
// through a full and an empty mbarrier per stage. The ring runs on across work items, so the next
// item's stages load while the current one writes its epilogue. With kTma the producer issues
// tensor-map copies (the copy engine moves each box; A is x gathered into sorted order beforehand
// for gate/up, hidden itself for down); without it (rows not a multiple of 16 bytes, or unaligned
// operands) its lanes copy element by element with bounds checks, for odd shapes.
//
// FP8 experts (docs/fp8.md) run the same kernel on e4m3 codes: moe.cu quantizes A beforehand
// (x's rows gathered into sorted order, hidden in place) with one scale per row, or per row and
// 128 columns when the weights have 128x128 tile scales, and the sums are scaled back by both.
#pragma once

#include <cstdint>
#include <type_traits>

#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/tma.cuh"
#include "backend/cuda/wgmma.cuh"

namespace jet::cuda::moe_detail {

// The operands of a product: bf16, or e4m3 codes (docs/fp8.md) whose fp32 sums are scaled back
// by the A row's scale and the weight row's (per channel, once per item) or, with 128x128 weight
// tiles, by the A row's and the weight tile's scales of each 128 columns of k (one stage). Each
// stage's FP8 sums are added up in fp32 registers, outside the tensor cores' accumulator.
enum class Operands { Bf16, Fp8PerChannel, Fp8Block128 };

template <Operands kOperands>
using Operand = std::conditional_t<kOperands == Operands::Bf16, bf16, uint8_t>;
template <Operands kOperands>
constexpr int kStageK = kTmaBoxCols<Operand<kOperands>>;  // k elements per stage: one 128-byte row

constexpr int kWeightRows = 128;                  // weight rows of an item: wgmma's n
constexpr int kHiddenCols = kWeightRows / 2;      // gate/up: hidden columns per item
constexpr int kWeightBoxRows = 64;                // weight rows per tensor-map box: an item loads two
constexpr int kSharedPerMultiprocessor = 233472;  // the H100/H200 budget, of which 1 KB per CTA is reserved
constexpr int kInstructionBytes = 32;             // k bytes per wgmma instruction

// A CTA of kRows rows: a consumer warpgroup per 64 rows (wgmma's m; with fewer rows the rows past
// the tile's are computed and never written) against the item's 128 weight rows, and one producer
// warp. Up to 64 rows two CTAs share a multiprocessor (one's epilogue overlaps the other's
// products); the ring takes as many stages as fit, since the weight stream needs many bytes in
// flight.
template <int kRows>
struct TileShape {
  static constexpr int kRowGroups = kRows > 64 ? kRows / 64 : 1;
  static constexpr int kConsumerWarps = kRowGroups * 4;
  static constexpr int kThreads = (kConsumerWarps + 1) * 32;
  static constexpr int kCtasPerMultiprocessor = kRows > 64 ? 1 : 2;
  static constexpr int kABytes = kRows * kTmaBoxBytes;
  static constexpr int kWeightBytes = kWeightRows * kTmaBoxBytes;
  static constexpr int kStageBytes = kABytes + kWeightBytes;
  static constexpr int kFit = (kSharedPerMultiprocessor / kCtasPerMultiprocessor - 3 * 1024) / kStageBytes;
  static constexpr int kStages = kFit < 8 ? kFit : 8;
  static constexpr size_t kSharedBytes = size_t{kStages} * kStageBytes + 1024;  // + room to align to 1 KB
  static_assert(kABytes % 1024 == 0 && kStages >= 2, "stage tiles must stay 1 KB aligned, two at least");
};

// The tiles in use, on the device: moe.cu's sort_routes_kernel writes them, the GEMMs read them.
struct ExpertTiles {
  int32_t* count;   // [1]: tiles in use
  int32_t* expert;  // [max tiles]: the tile's expert
  int32_t* begin;   // first sorted row of the tile
  int32_t* end;     // one past its last
};

enum class Product { GateUp, Down };

struct ExpertGemmArgs {
  // GateUp: x [T, H] (kTma: x gathered, [routes, H]; FP8: x's codes gathered); Down: hidden
  // [routes, I] (FP8: its codes).
  const void* a;
  const void* w;               // GateUp: gate_up [E, 2I, H]; Down: down [E, H, I] (bf16 or codes)
  const float* a_scales;       // FP8: [routes] per row, [routes, ceil(K/128)] with weight tiles
  const float* w_scales;       // FP8: [E, N] per channel, [E, ceil(N/128), ceil(K/128)] per tile
  const int32_t* sorted;       // [routes]: sorted row -> route (token * top_k + rank)
  const float* route_weights;  // [routes] (Down)
  void* hidden;                // [routes, I] (GateUp's output): bf16; fp32 for FP8 experts
  float* route_out;            // [routes, H] (Down's output)
  ExpertTiles tiles;
  int top_k;
  int64_t hidden_size, inter;  // H, I
  int col_blocks;              // work items per tile
};

// kTma: the tensor maps of A ([routes, K] in sorted order, boxes of the tile's rows) and of the
// weights (the experts' rows stacked, [E * N, K], boxes of kWeightBoxRows).
struct ExpertGemmMaps {
  CUtensorMap a, w;
};

__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }

// acc += the stage's 64 A rows at `a` times its 128 weight rows at `w`, over one 128-byte row of
// k: the warpgroup's wgmma, complete on return (so the stage can be released).
template <Operands kOperands>
__device__ __forceinline__ void multiply_stage(const unsigned char* a, const unsigned char* w, float (&acc)[64]) {
  wgmma_fence();
#pragma unroll
  for (int step = 0; step < kTmaBoxBytes / kInstructionBytes; ++step) {
    const uint64_t a_desc = wgmma_descriptor(a + step * kInstructionBytes);
    const uint64_t w_desc = wgmma_descriptor(w + step * kInstructionBytes);
    if constexpr (kOperands == Operands::Bf16) {
      wgmma_m64n128k16(acc, a_desc, w_desc);
    } else {
      wgmma_m64n128k32_e4m3(acc, a_desc, w_desc);
    }
  }
  wgmma_commit();
  wgmma_wait<0>();
}

// One work item: a tile of one expert's sorted rows against one block of its weight rows.
struct WorkItem {
  int expert, row0, rows, col_block;
};

__device__ __forceinline__ WorkItem work_item(const ExpertGemmArgs& p, int index) {
  const int tile = index / p.col_blocks;
  const int row0 = p.tiles.begin[tile];
  return {p.tiles.expert[tile], row0, p.tiles.end[tile] - row0, index % p.col_blocks};
}

// The first row, in the stacked weight matrix, of box 0 or 1 of an item's weight rows.
template <Product kProduct>
__device__ __forceinline__ int64_t weight_box_row(const ExpertGemmArgs& p, const WorkItem& it, int box) {
  if constexpr (kProduct == Product::GateUp) {
    return int64_t{it.expert} * 2 * p.inter + box * p.inter + int64_t{it.col_block} * kHiddenCols;
  }
  return int64_t{it.expert} * p.hidden_size + int64_t{it.col_block} * kWeightRows + box * kWeightBoxRows;
}

// The row, within its expert, of the item's weight row n (0..127): GateUp's first 64 are gate
// rows, the next 64 the up rows of the same hidden columns. `valid` says whether it exists.
template <Product kProduct>
__device__ __forceinline__ int64_t expert_weight_row(const ExpertGemmArgs& p, const WorkItem& it, int n, bool& valid) {
  if constexpr (kProduct == Product::GateUp) {
    const int64_t col = int64_t{it.col_block} * kHiddenCols + n % kHiddenCols;
    valid = col < p.inter;
    return n < kHiddenCols ? col : p.inter + col;
  }
  const int64_t row = int64_t{it.col_block} * kWeightRows + n;
  valid = row < p.hidden_size;
  return row;
}

// The producer's copies without the copy engine: its 32 lanes move stage kt of the item's A rows
// and weight rows element by element into the swizzled tiles, zeros where a row or k is past its
// matrix (rows past the tile are left as they are: their products are never written), then makes
// its stores visible to wgmma's operand reads.
template <int kRows, Product kProduct, Operands kOperands>
__device__ void copy_stage_elementwise(const ExpertGemmArgs& p, const WorkItem& it, int kt, unsigned char* a_raw,
                                       unsigned char* w_raw) {
  using T = Operand<kOperands>;
  constexpr int kK = kStageK<kOperands>;
  const T* a = static_cast<const T*>(p.a);
  const T* w = static_cast<const T*>(p.w);
  T* a_tile = reinterpret_cast<T*>(a_raw);
  T* w_tile = reinterpret_cast<T*>(w_raw);
  const int lane = threadIdx.x % 32;
  const int64_t K = kProduct == Product::GateUp ? p.hidden_size : p.inter;
  const int64_t k0 = int64_t{kt} * kK;
  const T zero{};
  for (int e = lane; e < kRows * kK; e += 32) {
    const int r = e / kK, k = e % kK;
    if (r >= it.rows) continue;
    // bf16 gate/up reads x by the route's token; FP8 codes and hidden are in sorted order.
    const bool by_token = kProduct == Product::GateUp && kOperands == Operands::Bf16;
    const int64_t row = by_token ? p.sorted[it.row0 + r] / p.top_k : it.row0 + r;
    a_tile[swizzled_offset<T>(r, k)] = k0 + k < K ? a[row * K + k0 + k] : zero;
  }
  for (int e = lane; e < kWeightRows * kK; e += 32) {
    const int n = e / kK, k = e % kK;
    bool valid = false;
    const int64_t in_expert = expert_weight_row<kProduct>(p, it, n, valid);
    const int64_t row = int64_t{it.expert} * (kProduct == Product::GateUp ? 2 * p.inter : p.hidden_size) + in_expert;
    w_tile[swizzled_offset<T>(n, k)] = valid && k0 + k < K ? w[row * K + k0 + k] : zero;
  }
  fence_proxy_async_shared();
}

// The scales of one item, for the rows and columns of this thread's accumulators (see wgmma.cuh):
// rows `group_row` and group_row + 8 of the tile, and for each n8 group of columns its weight rows.
template <Product kProduct>
struct ItemScales {
  const ExpertGemmArgs& p;
  const WorkItem& it;
  int group_row;  // the thread's first row in the tile
  int64_t k_blocks;

  // The A scale of the thread's row half (0 or 1) for k block kb (0 per channel), 0 past the tile.
  __device__ __forceinline__ float a_scale(int half, int64_t kb) const {
    const int r = group_row + half * 8;
    if (r >= it.rows) return 0.0f;
    return p.a_scales[int64_t{it.row0 + r} * k_blocks + kb];
  }

  // Per channel: the scale of weight row n of the item (0 for a row past the expert's).
  __device__ __forceinline__ float channel_scale(int n) const {
    bool valid = false;
    const int64_t row = expert_weight_row<kProduct>(p, it, n, valid);
    const int64_t rows = kProduct == Product::GateUp ? 2 * p.inter : p.hidden_size;
    return valid ? p.w_scales[int64_t{it.expert} * rows + row] : 0.0f;
  }

  // Per tile: the scale of the 128x128 tile holding weight row n of the item, for k block kb
  // (the host checks that an item's 64-row halves never straddle two tiles).
  __device__ __forceinline__ float tile_scale(int n, int64_t kb) const {
    bool valid = false;
    const int64_t row = expert_weight_row<kProduct>(p, it, n, valid);
    const int64_t rows = kProduct == Product::GateUp ? 2 * p.inter : p.hidden_size;
    const int64_t tile_rows = (rows + 127) / 128;
    return valid ? p.w_scales[(int64_t{it.expert} * tile_rows + row / 128) * k_blocks + kb] : 0.0f;
  }
};

// Persistent: CTA b takes work items b, b + gridDim.x, ... (item = tile * col_blocks + col_block,
// so the CTAs running at once share their tiles' A rows in L2). Stage g of the CTA's sequence of
// (item, k) stages lives in slot g % kStages; its full barrier completes phase g / kStages when
// its bytes are in, its empty barrier when every consumer warp is done with it.
template <int kRows, Product kProduct, Operands kOperands, bool kTma>
__global__ void __launch_bounds__(TileShape<kRows>::kThreads, TileShape<kRows>::kCtasPerMultiprocessor)
    expert_gemm_kernel(const __grid_constant__ ExpertGemmArgs p, const __grid_constant__ ExpertGemmMaps maps) {
  using Shape = TileShape<kRows>;
  constexpr int kStages = Shape::kStages, kConsumerWarps = Shape::kConsumerWarps;
  constexpr int kK = kStageK<kOperands>;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  __shared__ uint64_t full[kStages], empty[kStages];
  unsigned char* ring = shared_raw + (1024 - shared_address(shared_raw) % 1024) % 1024;
  auto a_tile = [&](int slot) { return ring + slot * Shape::kStageBytes; };
  auto w_tile = [&](int slot) { return ring + slot * Shape::kStageBytes + Shape::kABytes; };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], kTma ? 1 : 32);
      mbarrier_init(&empty[s], kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  await_previous_kernel();
  const int items = *p.tiles.count * p.col_blocks;
  const int first_item = blockIdx.x, item_step = gridDim.x;
  const int my_items = first_item < items ? (items - 1 - first_item) / item_step + 1 : 0;
  const int64_t K = kProduct == Product::GateUp ? p.hidden_size : p.inter;
  const int num_k = static_cast<int>((K + kK - 1) / kK);
  const int total_stages = my_items * num_k;

  if (warp == kConsumerWarps) {  // the producer
    WorkItem item{};
    for (int g = 0, kt = 0, ordinal = 0; g < total_stages; ++g) {
      const int slot = g % kStages;
      if (g >= kStages) mbarrier_wait(&empty[slot], (g / kStages - 1) & 1);
      if (kt == 0) item = work_item(p, first_item + ordinal * item_step);
      if constexpr (kTma) {
        if (lane == 0) {
          mbarrier_arrive_expect_bytes(&full[slot], Shape::kStageBytes);
          tma_load_box(a_tile(slot), &maps.a, kt * kK, item.row0, &full[slot]);
          for (int box = 0; box < 2; ++box) {
            tma_load_box(w_tile(slot) + box * kWeightBoxRows * kTmaBoxBytes, &maps.w, kt * kK,
                         static_cast<int>(weight_box_row<kProduct>(p, item, box)), &full[slot]);
          }
        }
      } else {
        copy_stage_elementwise<kRows, kProduct, kOperands>(p, item, kt, a_tile(slot), w_tile(slot));
        mbarrier_arrive(&full[slot]);
      }
      if (++kt == num_k) {
        kt = 0;
        ++ordinal;
      }
    }
    return;
  }

  // The warpgroup's 64 rows of the tile; a warpgroup whose rows hold no route skips the products.
  const int group_row0 = warp / 4 * 64;
  const int thread_row = group_row0 + warp % 4 * 16 + lane / 4;
  float acc[64] = {};
  WorkItem item{};
  bool live = false;
  const int64_t k_blocks = kOperands == Operands::Fp8Block128 ? (K + 127) / 128 : 1;
  const ItemScales<kProduct> scales{p, item, thread_row, k_blocks};

  // Accumulator i: row thread_row + 8 ((i / 2) % 2), column (i / 4) * 8 + 2 (lane % 4) + i % 2
  // of the item's 128 weight rows.
  auto column = [&](int i) { return i / 4 * 8 + 2 * (lane % 4) + i % 2; };

  // FP8: each stage's products go to fp32 registers of their own and are added into acc there
  // (with tiles, scaled by the stage's k block): the tensor cores sum e4m3 products at less than
  // fp32's precision, so a sum carried over all of k in their accumulator drifts (DeepSeek-V3's
  // report measured errors near 2% at k = 4,096 and promotes partial sums the same way).
  auto add_stage = [&](const float(&part)[64], int kt) {
    if constexpr (kOperands == Operands::Fp8Block128) {
      const float a0 = scales.a_scale(0, kt), a1 = scales.a_scale(1, kt);
      // Columns 0..63 and 64..127 each lie in one weight tile.
      const float w0 = scales.tile_scale(0, kt), w1 = scales.tile_scale(kHiddenCols, kt);
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] += part[i] * ((i / 2) % 2 ? a1 : a0) * (i < 32 ? w0 : w1);
    } else {
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] += part[i];
    }
  };

  // Per channel, the whole item's sums are scaled once.
  auto scale_by_channel = [&] {
    const float a0 = scales.a_scale(0, 0), a1 = scales.a_scale(1, 0);
#pragma unroll
    for (int i = 0; i < 64; i += 2) {
      const float w0 = scales.channel_scale(column(i)), w1 = scales.channel_scale(column(i + 1));
      const float a = (i / 2) % 2 ? a1 : a0;
      acc[i] *= a * w0;
      acc[i + 1] *= a * w1;
    }
  };

  const int64_t H = p.hidden_size, I = p.inter;
  auto write_item = [&] {
    if constexpr (kOperands == Operands::Fp8PerChannel) scale_by_channel();
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = thread_row + half * 8;
      if (r >= item.rows) continue;
      if constexpr (kProduct == Product::GateUp) {
        // FP8: fp32, so that down's quantization starts from what the CPU op's does.
        using Hidden = std::conditional_t<kOperands == Operands::Bf16, bf16, float>;
        Hidden* dst = static_cast<Hidden*>(p.hidden) + int64_t{item.row0 + r} * I;
#pragma unroll
        for (int nt = 0; nt < kHiddenCols / 8; ++nt) {  // gate columns; up is 64 weight rows on
          const int64_t col = int64_t{item.col_block} * kHiddenCols + nt * 8 + 2 * (lane % 4);
          const int gate = nt * 4 + half * 2, up = gate + kHiddenCols / 2;
          const float h0 = silu(acc[gate]) * acc[up], h1 = silu(acc[gate + 1]) * acc[up + 1];
          if constexpr (kOperands == Operands::Bf16) {
            if (kTma && col + 1 < I) {
              *reinterpret_cast<uint32_t*>(dst + col) = pack_bf16(h0, h1);
              continue;
            }
          }
          if (col < I) dst[col] = Hidden(h0);
          if (col + 1 < I) dst[col + 1] = Hidden(h1);
        }
      } else {
        const int route = p.sorted[item.row0 + r];
        const float weight = p.route_weights[route];
        float* dst = p.route_out + int64_t{route} * H;
#pragma unroll
        for (int nt = 0; nt < kWeightRows / 8; ++nt) {
          const int64_t col = int64_t{item.col_block} * kWeightRows + nt * 8 + 2 * (lane % 4);
          const float o0 = weight * acc[nt * 4 + half * 2], o1 = weight * acc[nt * 4 + half * 2 + 1];
          if (kTma && col + 1 < H) {
            *reinterpret_cast<float2*>(dst + col) = make_float2(o0, o1);
          } else {
            if (col < H) dst[col] = o0;
            if (col + 1 < H) dst[col + 1] = o1;
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  };

  for (int g = 0, kt = 0, ordinal = 0; g < total_stages; ++g) {
    const int slot = g % kStages;
    if (kt == 0) {
      item = work_item(p, first_item + ordinal * item_step);
      live = item.rows > group_row0;
    }
    mbarrier_wait(&full[slot], (g / kStages) & 1);
    if (live) {
      const unsigned char* a_rows = a_tile(slot) + group_row0 * kTmaBoxBytes;
      if constexpr (kOperands != Operands::Bf16) {
        float part[64] = {};
        multiply_stage<kOperands>(a_rows, w_tile(slot), part);
        add_stage(part, kt);
      } else {
        multiply_stage<kOperands>(a_rows, w_tile(slot), acc);
      }
    }
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&empty[slot]);
    if (++kt == num_k) {
      if (live) write_item();
      kt = 0;
      ++ordinal;
    }
  }
}

}  // namespace jet::cuda::moe_detail
