// The grouped expert GEMMs of the MoE op (moe.cu). The routes (token, k-th choice) are sorted by
// expert and cut into row tiles of one expert each (ExpertTiles, built on the device, so the
// host never learns how many tokens an expert got); a CTA computes one tile against one block of
// its expert's weight rows. The kernel is persistent (a grid of as many CTAs as fit at once) and
// reads the count of tiles in use on the device, so the launch shape depends on the token count
// alone and the op records into CUDA graphs.
//
// Two products share the kernel, differing in their A rows and their epilogue:
//   gate/up: A row = the route's token row of x; the CTA's 128 weight rows are 64 gate rows and
//            the 64 up rows of the same hidden columns, so SwiGLU runs on the accumulators and
//            writes bf16 hidden[sorted row, I];
//   down:    A row = hidden[sorted row]; the output, times the route's routing weight, goes to
//            route_out[route, H] in fp32, which the combine kernel sums in rank order per token.
// Each work item streams its weight rows once through a cp.async pipeline of several stages (bf16 mma.sync
// m16n8k16, fp32 accumulation): the products are bound by the weight bytes until tiles hold many
// rows. kVector is the 16-byte path (K and the output widths multiples of 8, aligned operands);
// without it every element is loaded alone and bounds-checked, for odd shapes.
#pragma once

#include <cstdint>

#include "backend/cuda/mma_ptx.cuh"

namespace jet::cuda::moe_detail {

constexpr int kStageK = 64;          // k elements per pipeline stage
constexpr int kLd = kStageK + 8;     // bf16 stride of shared rows: 8 ldmatrix rows hit 8 bank groups
constexpr int kWeightRows = 128;     // weight rows a CTA streams (32 per warp of a row group)
constexpr int kHiddenCols = kWeightRows / 2;  // gate/up: hidden columns per CTA

// A CTA of kRows rows: row groups of 4 warps, each warp 64 rows (fewer in a CTA of fewer rows)
// against 32 weight rows; the weight stream needs many bytes in flight, so as many stages as
// leave room for two CTAs a multiprocessor.
template <int kRows>
struct TileShape {
  static constexpr int kRowGroups = kRows > 64 ? kRows / 64 : 1;
  static constexpr int kWarpRows = kRows / kRowGroups;
  static constexpr int kThreads = kRowGroups * 4 * 32;
  static constexpr int kStages = kRows > 64 ? 3 : 4;
  static constexpr size_t kSharedBytes = size_t{kStages} * (kRows + kWeightRows) * kLd * 2;
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
  const bf16* a;                // GateUp: x [T, H]; Down: hidden [routes, I] in sorted order
  const bf16* w;                // GateUp: gate_up [E, 2I, H]; Down: down [E, H, I]
  const int32_t* sorted;        // [routes]: sorted row -> route (token * top_k + rank)
  const float* route_weights;   // [routes] (Down)
  bf16* hidden;                 // [routes, I] (GateUp's output)
  float* route_out;             // [routes, H] (Down's output)
  ExpertTiles tiles;
  int top_k;
  int64_t hidden_size, inter;   // H, I
  int col_blocks;               // CTAs per tile
};

__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }

// Loads the 16-byte chunk at `src` into `dst`, or zeros: with kVector by cp.async, else element
// by element, each bounds-checked against the `valid` elements left in the row.
template <bool kVector>
__device__ __forceinline__ void load_chunk(bf16* dst, const bf16* src, int64_t valid) {
  if constexpr (kVector) {
    cp_async_16(dst, src, valid > 0);
  } else {
    for (int j = 0; j < 8; ++j) dst[j] = j < valid ? src[j] : __float2bfloat16(0.0f);
  }
}

// Shared weight row of the warp's n-tile nt (4 n-tiles of 8 rows each): gate/up takes 16 gate rows
// and the 16 up rows of the same columns, down 32 consecutive rows.
template <Product kProduct>
__device__ __forceinline__ int n_tile_row(int warp, int nt) {
  if constexpr (kProduct == Product::GateUp) return (nt / 2) * kHiddenCols + warp * 16 + (nt % 2) * 8;
  return warp * 32 + nt * 8;
}

// acc[mt][nt] += the warp's kLive m-tiles of the stage's A rows (a_rows: the warp's first row) times
// its four n-tiles of weight rows, over the stage's kStageK elements of k.
template <int kLive, Product kProduct, int kMTiles>
__device__ __forceinline__ void multiply_stage_tiles(const bf16* a_rows, const bf16* w_tile,
                                                     float (&acc)[kMTiles][4][4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4;
#pragma unroll
  for (int k32 = 0; k32 < kStageK; k32 += 32) {
    uint32_t a[kLive][2][4];
#pragma unroll
    for (int mt = 0; mt < kLive; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        ldmatrix_x4(a[mt][h], a_rows + (mt * 16 + lane % 16) * kLd + k32 + h * 16 + (lane / 16) * 8);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      uint32_t b[4];
      ldmatrix_x4(b, w_tile + (n_tile_row<kProduct>(warp, nt) + lane % 8) * kLd + k32 + (lane / 8) * 8);
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

// Persistent: CTA b takes work items b, b + gridDim.x, ... (item = tile * col_blocks + col_block,
// so the CTAs running at once share their tiles' A rows in L2), and its cp.async pipeline runs on
// across items: the first stages of the next item load while the current one finishes and writes
// its epilogue, so short items (down has few k stages) keep the weight stream going.
template <int kRows, Product kProduct, bool kVector>
__global__ void __launch_bounds__(TileShape<kRows>::kThreads, 2) expert_gemm_kernel(ExpertGemmArgs p) {
  using Shape = TileShape<kRows>;
  constexpr int kThreads = Shape::kThreads, kStages = Shape::kStages;
  constexpr int kMTiles = Shape::kWarpRows / 16;
  // Each thread moves chunk column tid % 8 of the rows tid / 8 + kRowStep i.
  constexpr int kRowStep = kThreads / 8;
  constexpr int kMyWeightRows = kWeightRows / kRowStep, kMyARows = kRows / kRowStep;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  bf16* a_tiles = reinterpret_cast<bf16*>(shared_raw);        // [kStages][kRows][kLd]
  bf16* w_tiles = a_tiles + kStages * kRows * kLd;             // [kStages][kWeightRows][kLd]

  await_previous_kernel();
  const int items = *p.tiles.count * p.col_blocks;
  const int first_item = blockIdx.x, item_step = gridDim.x;
  const int my_items = first_item < items ? (items - 1 - first_item) / item_step + 1 : 0;
  const int64_t H = p.hidden_size, I = p.inter;
  const int64_t K = kProduct == Product::GateUp ? H : I;
  const int num_k = static_cast<int>((K + kStageK - 1) / kStageK);
  const int total_stages = my_items * num_k;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32 % 4;
  const int warp_row0 = tid / 128 * Shape::kWarpRows;
  const int chunk = tid % 8;

  // The loader: the item whose stages this thread is loading, and its rows' sources (nullptr
  // past the tile's rows or the weight matrix; gate/up interleaves the gate and up halves).
  int load_item = -1, load_kt = num_k, loaded = 0;
  const bf16* a_src[kMyARows];
  const bf16* w_src[kMyWeightRows];
  auto start_loading = [&](int ordinal) {
    const WorkItem it = work_item(p, first_item + ordinal * item_step);
    for (int i = 0; i < kMyARows; ++i) {
      const int r = tid / 8 + i * kRowStep;
      a_src[i] = nullptr;
      if (r < it.rows) {
        a_src[i] = kProduct == Product::GateUp ? p.a + int64_t{p.sorted[it.row0 + r] / p.top_k} * H
                                               : p.a + int64_t{it.row0 + r} * I;
      }
    }
    const bf16* expert_w = p.w + int64_t{it.expert} * (kProduct == Product::GateUp ? 2 * I * H : H * I);
    for (int i = 0; i < kMyWeightRows; ++i) {
      const int r = tid / 8 + i * kRowStep;
      if constexpr (kProduct == Product::GateUp) {
        const int64_t col = int64_t{it.col_block} * kHiddenCols + r % kHiddenCols;
        w_src[i] = col < I ? expert_w + (r < kHiddenCols ? col : I + col) * K : nullptr;
      } else {
        const int64_t row = int64_t{it.col_block} * kWeightRows + r;
        w_src[i] = row < H ? expert_w + row * K : nullptr;
      }
    }
  };
  auto load_next_stage = [&] {
    if (load_kt == num_k) {
      start_loading(++load_item);
      load_kt = 0;
    }
    const int slot = loaded % kStages;
    const int64_t k = int64_t{load_kt} * kStageK + chunk * 8;
    bf16* w_dst = w_tiles + slot * kWeightRows * kLd + chunk * 8;
    for (int i = 0; i < kMyWeightRows; ++i) {
      load_chunk<kVector>(w_dst + (tid / 8 + i * kRowStep) * kLd, w_src[i] ? w_src[i] + k : nullptr,
                          w_src[i] ? K - k : 0);
    }
    bf16* a_dst = a_tiles + slot * kRows * kLd + chunk * 8;
    for (int i = 0; i < kMyARows; ++i) {
      load_chunk<kVector>(a_dst + (tid / 8 + i * kRowStep) * kLd, a_src[i] ? a_src[i] + k : nullptr,
                          a_src[i] ? K - k : 0);
    }
    ++load_kt;
    ++loaded;
  };

  float acc[kMTiles][4][4] = {};
  WorkItem item{};
  // The warp's m-tiles that hold routes: the products skip the rest (a tile is seldom full). The
  // count picks an instantiation of the stage's products, so each runs as straight-line code.
  int live_m_tiles = 0;
  auto multiply_stage = [&](const bf16* a_tile, const bf16* w_tile) {
    switch (live_m_tiles) {
      case 0: return;
      case 1: return multiply_stage_tiles<1, kProduct>(a_tile + warp_row0 * kLd, w_tile, acc);
      case 2: return multiply_stage_tiles<(2 < kMTiles ? 2 : kMTiles), kProduct>(a_tile + warp_row0 * kLd, w_tile, acc);
      case 3: return multiply_stage_tiles<(3 < kMTiles ? 3 : kMTiles), kProduct>(a_tile + warp_row0 * kLd, w_tile, acc);
      default: return multiply_stage_tiles<kMTiles, kProduct>(a_tile + warp_row0 * kLd, w_tile, acc);
    }
  };

  // Accumulator (mt, nt, i): row warp_row0 + mt * 16 + lane / 4 + (i / 2) * 8, column 2 (lane % 4) + i % 2.
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
            const int64_t col = int64_t{item.col_block} * kHiddenCols + warp * 16 + nt * 8 + 2 * (lane % 4);
            const float h0 = silu(acc[mt][nt][half * 2]) * acc[mt][nt + 2][half * 2];
            const float h1 = silu(acc[mt][nt][half * 2 + 1]) * acc[mt][nt + 2][half * 2 + 1];
            if (kVector && col + 1 < I) {
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
                int64_t{item.col_block} * kWeightRows + n_tile_row<kProduct>(warp, nt) + 2 * (lane % 4);
            const float o0 = weight * acc[mt][nt][half * 2], o1 = weight * acc[mt][nt][half * 2 + 1];
            if (kVector && col + 1 < H) {
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

  for (int s = 0; s < kStages - 1; ++s) {
    if (loaded < total_stages) load_next_stage();
    cp_async_commit();
  }
  for (int g = 0, kt = 0, ordinal = 0; g < total_stages; ++g) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage g is in; every warp is done with the slot the next load overwrites
    if (loaded < total_stages) load_next_stage();
    cp_async_commit();
    if (kt == 0) {
      item = work_item(p, first_item + ordinal * item_step);
      live_m_tiles = min(kMTiles, max(0, (item.rows - warp_row0 + 15) / 16));
    }
    multiply_stage(a_tiles + (g % kStages) * kRows * kLd, w_tiles + (g % kStages) * kWeightRows * kLd);
    if (++kt == num_k) {
      write_item();
      kt = 0;
      ++ordinal;
    }
  }
  cp_async_wait<0>();
}

}  // namespace jet::cuda::moe_detail
