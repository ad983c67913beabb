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
// rows in 128-byte swizzled tiles) and consumer warpgroups multiply them (wgmma m64n128k16 from
// shared memory, fp32 accumulation), each side waiting on the other through a full and an empty
// mbarrier per stage. The ring runs on across work items, so the next item's stages load while the current
// one writes its epilogue. With kTma the producer issues tensor-map copies (the copy engine moves
// each box; A is x gathered into sorted order beforehand for gate/up, hidden itself for down);
// without it (widths not multiples of 8, or unaligned operands) its lanes copy element by element
// with bounds checks, for odd shapes.
#pragma once

#include <cstdint>

#include "backend/cuda/mma_ptx.cuh"
#include "backend/cuda/tma.cuh"
#include "backend/cuda/wgmma.cuh"

namespace jet::cuda::moe_detail {

constexpr int kStageK = kTmaBoxCols;              // k elements per stage: one 128-byte swizzled row
constexpr int kWeightRows = 128;                  // weight rows of an item: wgmma's n
constexpr int kHiddenCols = kWeightRows / 2;      // gate/up: hidden columns per item
constexpr int kWeightBoxRows = 64;                // weight rows per tensor-map box: an item loads two
constexpr int kSharedPerMultiprocessor = 233472;  // the H100/H200 budget, of which 1 KB per CTA is reserved

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
  const bf16* a;               // GateUp: x [T, H] (kTma: x gathered, [routes, H]); Down: hidden [routes, I]
  const bf16* w;               // GateUp: gate_up [E, 2I, H]; Down: down [E, H, I]
  const int32_t* sorted;       // [routes]: sorted row -> route (token * top_k + rank)
  const float* route_weights;  // [routes] (Down)
  bf16* hidden;                // [routes, I] (GateUp's output)
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

// acc += the stage's 64 A rows from `a` times its 128 weight rows `w`, over kStageK of k: the
// warpgroup's wgmma, complete on return (so the stage can be released).
__device__ __forceinline__ void multiply_stage(const bf16* a, const bf16* w, float (&acc)[64]) {
  wgmma_fence();
#pragma unroll
  for (int k16 = 0; k16 < kStageK / 16; ++k16) {
    wgmma_m64n128k16(acc, wgmma_descriptor(a + k16 * 16), wgmma_descriptor(w + k16 * 16));
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

// The producer's copies without the copy engine: its 32 lanes move stage kt of the item's A rows
// and weight rows element by element into the swizzled tiles, zeros where a row or k is past its
// matrix (rows past the tile are left as they are: their products are never written), then makes
// its stores visible to wgmma's operand reads.
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
  fence_proxy_async_shared();
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

  // The warpgroup's 64 rows of the tile; a warpgroup whose rows hold no route skips the products.
  const int group_row0 = warp / 4 * 64;
  float acc[64] = {};
  WorkItem item{};
  bool live = false;

  // Accumulator i: row group_row0 + warp % 4 * 16 + lane / 4 + 8 ((i / 2) % 2), column
  // (i / 4) * 8 + 2 (lane % 4) + i % 2 of the item's 128 weight rows.
  const int64_t H = p.hidden_size, I = p.inter;
  auto write_item = [&] {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = group_row0 + warp % 4 * 16 + lane / 4 + half * 8;
      if (r >= item.rows) continue;
      if constexpr (kProduct == Product::GateUp) {
        bf16* dst = p.hidden + int64_t{item.row0 + r} * I;
#pragma unroll
        for (int nt = 0; nt < kHiddenCols / 8; ++nt) {  // gate columns; up is 64 weight rows on
          const int64_t col = int64_t{item.col_block} * kHiddenCols + nt * 8 + 2 * (lane % 4);
          const int gate = nt * 4 + half * 2, up = gate + kHiddenCols / 2;
          const float h0 = silu(acc[gate]) * acc[up], h1 = silu(acc[gate + 1]) * acc[up + 1];
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
    if (live) multiply_stage(a_tile(slot) + group_row0 * kStageK, w_tile(slot), acc);
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
