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
//            writes bf16 hidden[sorted row, I];
//   down:    A row = hidden[sorted row]; the output, times the route's routing weight, goes to
//            route_out[route, H] in fp32, which the combine kernel sums in rank order per token.
//
// The products are bound by the weight bytes until tiles hold many rows, so the kernel is built
// to stream weights: a producer warp fills a ring of stages (kStageK of k each, A rows and weight
// rows in 128-byte swizzled tiles) and consumer warps multiply them (bf16 mma.sync m16n8k16,
// fp32 accumulation), each side waiting on the other through a full and an empty mbarrier per
// stage. The ring runs on across work items, so the next item's stages load while the current
// one writes its epilogue. With kTma the producer issues tensor-map copies (the copy engine moves
// each box; A is x gathered into sorted order beforehand for gate/up, hidden itself for down);
// without it (widths not multiples of 8, or unaligned operands) its lanes copy element by element
// with bounds checks, for odd shapes.
#pragma once

#include <cstdint>

#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/tma.cuh"

namespace jet::cuda::moe_detail {

constexpr int kStageK = kTmaBoxCols;  // k elements per stage: one 128-byte swizzled row
constexpr int kWeightRows = 128;      // weight rows of an item (32 per consumer warp of a row group)
constexpr int kHiddenCols = kWeightRows / 2;  // gate/up: hidden columns per item
constexpr int kWeightBoxRows = 64;            // weight rows per tensor-map box: an item loads two
constexpr int kSharedPerMultiprocessor = 233472;  // the H100/H200 budget, of which 1 KB per CTA is reserved

// A CTA of kRows rows: row groups of 4 consumer warps, each warp 64 rows (fewer in a CTA of fewer
// rows) against 32 weight rows, and one producer warp. Up to 64 rows two CTAs share a
// multiprocessor (one's epilogue overlaps the other's products); the ring takes as many stages as
// fit, since the weight stream needs many bytes in flight.
template <int kRows>
struct TileShape {
  static constexpr int kRowGroups = kRows > 64 ? kRows / 64 : 1;
  static constexpr int kWarpRows = kRows / kRowGroups;
  static constexpr int kConsumerWarps = kRowGroups * 4;
  static constexpr int kThreads = (kConsumerWarps + 1) * 32;
  static constexpr int kCtasPerMultiprocessor = kRows > 64 ? 1 : 2;
  static constexpr int kABytes = kRows * kStageK * 2;
  static constexpr int kWeightBytes = kWeightRows * kStageK * 2;
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
  const bf16* a;                // GateUp: x [T, H] (kTma: x gathered, [routes, H]); Down: hidden [routes, I]
  const bf16* w;                // GateUp: gate_up [E, 2I, H]; Down: down [E, H, I]
  const int32_t* sorted;        // [routes]: sorted row -> route (token * top_k + rank)
  const float* route_weights;   // [routes] (Down)
  bf16* hidden;                 // [routes, I] (GateUp's output)
  float* route_out;             // [routes, H] (Down's output)
  ExpertTiles tiles;
  int top_k;
  int64_t hidden_size, inter;   // H, I
  int col_blocks;               // work items per tile
};

// kTma: the tensor maps of A ([routes, K] in sorted order, boxes of the tile's rows) and of the
// weights (the experts' rows stacked, [E * N, K], boxes of kWeightBoxRows).
struct ExpertGemmMaps {
  CUtensorMap a, w;
};

__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }

// Shared weight row of the warp's n-tile nt (4 n-tiles of 8 rows each): gate/up takes 16 gate rows
// and the 16 up rows of the same columns, down 32 consecutive rows.
template <Product kProduct>
__device__ __forceinline__ int n_tile_row(int warp, int nt) {
  if constexpr (kProduct == Product::GateUp) return (nt / 2) * kHiddenCols + warp * 16 + (nt % 2) * 8;
  return warp * 32 + nt * 8;
}

// acc[mt][nt] += the warp's kLive m-tiles of the stage's A rows (from row a_row0 of the tile) times
// its four n-tiles of weight rows, over the stage's kStageK elements of k. Both tiles are swizzled.
template <int kLive, Product kProduct, int kMTiles>
__device__ __forceinline__ void multiply_stage_tiles(const bf16* a_tile, int a_row0, const bf16* w_tile,
                                                     float (&acc)[kMTiles][4][4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4;
#pragma unroll
  for (int k32 = 0; k32 < kStageK; k32 += 32) {
    uint32_t a[kLive][2][4];
#pragma unroll
    for (int mt = 0; mt < kLive; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = a_row0 + mt * 16 + lane % 16;
        ldmatrix_x4(a[mt][h], a_tile + swizzled_offset(row, k32 + h * 16 + (lane / 16) * 8));
      }
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      uint32_t b[4];
      const int row = n_tile_row<kProduct>(warp, nt) + lane % 8;
      ldmatrix_x4(b, w_tile + swizzled_offset(row, k32 + (lane / 8) * 8));
#pragma unroll
      for (int mt = 0; mt < kLive; ++mt) {
        mma_bf16(acc[mt][nt], a[mt][0], b[0], b[1]);
        mma_bf16(acc[mt][nt], a[mt][1], b[2], b[3]);
      }
    }
  }
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

// The producer's copies without the copy engine: its 32 lanes move stage kt of the item's A rows
// and weight rows element by element into the swizzled tiles, zeros where a row or k is past its
// matrix (rows past the tile are left as they are: their products are never written).
template <int kRows, Product kProduct>
__device__ void copy_stage_elementwise(const ExpertGemmArgs& p, const WorkItem& it, int kt, bf16* a_tile,
                                       bf16* w_tile) {
  const int lane = threadIdx.x % 32;
  const int64_t H = p.hidden_size, I = p.inter;
  const int64_t K = kProduct == Product::GateUp ? H : I;
  const int64_t k0 = int64_t{kt} * kStageK;
  const bf16 zero = __float2bfloat16(0.0f);
  for (int e = lane; e < kRows * kStageK; e += 32) {
    const int r = e / kStageK, k = e % kStageK;
    if (r >= it.rows) continue;
    const int64_t row = kProduct == Product::GateUp ? p.sorted[it.row0 + r] / p.top_k : it.row0 + r;
    a_tile[swizzled_offset(r, k)] = k0 + k < K ? p.a[row * K + k0 + k] : zero;
  }
  for (int e = lane; e < kWeightRows * kStageK; e += 32) {
    const int r = e / kStageK, k = e % kStageK;
    const int box = r / kWeightBoxRows, in_box = r % kWeightBoxRows;
    const int64_t in_expert = kProduct == Product::GateUp ? int64_t{it.col_block} * kHiddenCols + in_box
                                                          : int64_t{it.col_block} * kWeightRows + r;
    const bool valid = in_expert < (kProduct == Product::GateUp ? I : H) && k0 + k < K;
    const int64_t row = weight_box_row<kProduct>(p, it, box) + in_box;
    w_tile[swizzled_offset(r, k)] = valid ? p.w[row * K + k0 + k] : zero;
  }
}

// Persistent: CTA b takes work items b, b + gridDim.x, ... (item = tile * col_blocks + col_block,
// so the CTAs running at once share their tiles' A rows in L2). Stage g of the CTA's sequence of
// (item, k) stages lives in slot g % kStages; its full barrier completes phase g / kStages when
// its bytes are in, its empty barrier when every consumer warp is done with it.
template <int kRows, Product kProduct, bool kTma>
__global__ void __launch_bounds__(TileShape<kRows>::kThreads, TileShape<kRows>::kCtasPerMultiprocessor)
    expert_gemm_kernel(const __grid_constant__ ExpertGemmArgs p, const __grid_constant__ ExpertGemmMaps maps) {
  using Shape = TileShape<kRows>;
  constexpr int kStages = Shape::kStages, kConsumerWarps = Shape::kConsumerWarps;
  constexpr int kMTiles = Shape::kWarpRows / 16;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  __shared__ uint64_t full[kStages], empty[kStages];
  unsigned char* ring = shared_raw + (1024 - shared_address(shared_raw) % 1024) % 1024;
  auto a_tile = [&](int slot) { return reinterpret_cast<bf16*>(ring + slot * Shape::kStageBytes); };
  auto w_tile = [&](int slot) { return reinterpret_cast<bf16*>(ring + slot * Shape::kStageBytes + Shape::kABytes); };

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
  const int num_k = static_cast<int>((K + kStageK - 1) / kStageK);
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
          tma_load_box(a_tile(slot), &maps.a, kt * kStageK, item.row0, &full[slot]);
          for (int box = 0; box < 2; ++box) {
            tma_load_box(w_tile(slot) + box * kWeightBoxRows * kStageK, &maps.w, kt * kStageK,
                         static_cast<int>(weight_box_row<kProduct>(p, item, box)), &full[slot]);
          }
        }
      } else {
        copy_stage_elementwise<kRows, kProduct>(p, item, kt, a_tile(slot), w_tile(slot));
        mbarrier_arrive(&full[slot]);
      }
      if (++kt == num_k) {
        kt = 0;
        ++ordinal;
      }
    }
    return;
  }

  const int warp_row0 = warp / 4 * Shape::kWarpRows;
  float acc[kMTiles][4][4] = {};
  WorkItem item{};
  // The warp's m-tiles that hold routes: the products skip the rest (a tile is seldom full). The
  // count picks an instantiation of the stage's products, so each runs as straight-line code.
  int live_m_tiles = 0;
  auto multiply_stage = [&](const bf16* a, const bf16* w) {
    switch (live_m_tiles) {
      case 0: return;
      case 1: return multiply_stage_tiles<1, kProduct>(a, warp_row0, w, acc);
      case 2: return multiply_stage_tiles<(2 < kMTiles ? 2 : kMTiles), kProduct>(a, warp_row0, w, acc);
      case 3: return multiply_stage_tiles<(3 < kMTiles ? 3 : kMTiles), kProduct>(a, warp_row0, w, acc);
      default: return multiply_stage_tiles<kMTiles, kProduct>(a, warp_row0, w, acc);
    }
  };

  // Accumulator (mt, nt, i): row warp_row0 + mt * 16 + lane / 4 + (i / 2) * 8, column 2 (lane % 4) + i % 2.
  const int64_t H = p.hidden_size, I = p.inter;
  auto write_item = [&] {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = warp_row0 + mt * 16 + lane / 4 + half * 8;
        if (r >= item.rows) continue;
        if constexpr (kProduct == Product::GateUp) {
          bf16* dst = p.hidden + int64_t{item.row0 + r} * I;
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            const int64_t col = int64_t{item.col_block} * kHiddenCols + warp % 4 * 16 + nt * 8 + 2 * (lane % 4);
            const float h0 = silu(acc[mt][nt][half * 2]) * acc[mt][nt + 2][half * 2];
            const float h1 = silu(acc[mt][nt][half * 2 + 1]) * acc[mt][nt + 2][half * 2 + 1];
            if (kTma && col + 1 < I) {
              *reinterpret_cast<uint32_t*>(dst + col) = pack_bf16(h0, h1);
            } else {
              if (col < I) dst[col] = __float2bfloat16(h0);
              if (col + 1 < I) dst[col + 1] = __float2bfloat16(h1);
            }
          }
        } else {
          const int route = p.sorted[item.row0 + r];
          const float weight = p.route_weights[route];
          float* dst = p.route_out + int64_t{route} * H;
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) {
            const int64_t col =
                int64_t{item.col_block} * kWeightRows + n_tile_row<kProduct>(warp % 4, nt) + 2 * (lane % 4);
            const float o0 = weight * acc[mt][nt][half * 2], o1 = weight * acc[mt][nt][half * 2 + 1];
            if (kTma && col + 1 < H) {
              *reinterpret_cast<float2*>(dst + col) = make_float2(o0, o1);
            } else {
              if (col < H) dst[col] = o0;
              if (col + 1 < H) dst[col + 1] = o1;
            }
          }
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;
      }
    }
  };

  for (int g = 0, kt = 0, ordinal = 0; g < total_stages; ++g) {
    const int slot = g % kStages;
    if (kt == 0) {
      item = work_item(p, first_item + ordinal * item_step);
      live_m_tiles = min(kMTiles, max(0, (item.rows - warp_row0 + 15) / 16));
    }
    mbarrier_wait(&full[slot], (g / kStages) & 1);
    multiply_stage(a_tile(slot), w_tile(slot));
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&empty[slot]);
    if (++kt == num_k) {
      write_item();
      kt = 0;
      ++ordinal;
    }
  }
}

}  // namespace jet::cuda::moe_detail
