// The paged-attention kernel for sequences of at most 32 query rows (denoise forwards, and a
// block's first forward, which holds the saved block and the next one) where latency, not
// bandwidth, bounds the launch: short prefixes, or too few CTAs for a full wave (attention.cu's
// use_dim_split says when).
//
// attention_kernel (attention_row_tiles.cuh) gives each of its 4 warps 16 keys of every 64-key
// tile and a whole 16 x HD output, merged at the end; at short prefixes that merge and the 166
// registers a thread it takes (3 CTAs per multiprocessor) leave the memory idle. Here the warps
// of a row group (16 rows: 4 warps for 16-row CTAs, 2 for each half of 32-row ones) divide each
// 32-key tile's scores by keys and the output by head dimensions: the tile's row max is
// exchanged through shared memory, each warp writes its probabilities there in bf16, and each
// multiplies all 32 keys' P into its own output columns. Every warp of a row group sees the same
// running max, so the row sums need no rescaling when they are added at the end, and each warp
// writes its columns itself. At hd 128, 16-row CTAs take 96 registers a thread and 41 KB of shared
// memory (5 CTAs a multiprocessor), 32-row CTAs at most 128 and 47 KB (4).
#pragma once

#include "backend/cuda/attention_common.cuh"

namespace jet::cuda::attention_detail {

template <int HD, int RowGroups>
struct DimSplitConfig {
  static constexpr int kTileKeys = 32;
  static constexpr int kRows = 16 * RowGroups;
  static constexpr int kGroupWarps = kWarps / RowGroups;        // warps sharing a row group's 16 rows
  static constexpr int kWarpKeys = kTileKeys / kGroupWarps;     // scores per tile: 8 or 16 keys
  static constexpr int kWarpDims = HD / kGroupWarps;            // output columns per warp
  static constexpr int kResidentCtas = RowGroups == 1 ? 5 : 4;  // per multiprocessor: 96 or 128 registers
  static_assert(kWarps % RowGroups == 0 && kWarpKeys % 8 == 0 && kWarpDims % 16 == 0 && (HD / 16) % 2 == 0);
  static constexpr int kLd = HD + kRowPad;    // bf16 stride of Q/K/V rows in smem
  static constexpr int kPLd = kTileKeys + 8;  // bf16 stride of P rows: 80 bytes, so an ldmatrix hits 8 bank groups
  static constexpr size_t kTileBytes = size_t{kTileKeys} * kLd * sizeof(bf16);
  static constexpr size_t kQOffset = size_t{kStages} * 2 * kTileBytes;
  static constexpr size_t kPOffset = kQOffset + size_t{kRows} * kLd * sizeof(bf16);
  // float [kGroupWarps][kRows] each: every warp's share of a row's max and sum
  static constexpr size_t kMaxOffset = kPOffset + size_t{kRows} * kPLd * sizeof(bf16);
  static constexpr size_t kSumOffset = kMaxOffset + size_t{kGroupWarps} * kRows * sizeof(float);
  static constexpr size_t kLimitsOffset = kSumOffset + size_t{kGroupWarps} * kRows * sizeof(float);
  static constexpr size_t kSmemBytes = kLimitsOffset + kRows * sizeof(int);
};

// Keys [key0, key0 + 32) of (seq, kv head) into k_dst / v_dst; keys past key_count are zero-filled
// (every warp reads every V row of the tile, and 0 * NaN from an unwritten slot would poison P·V).
template <int HD, typename Cfg>
__device__ void load_dim_split_tile(const Params& p, const CtaRows& c, int key0, int64_t first_row, int key_count,
                                    bf16* k_dst, bf16* v_dst) {
  constexpr int kChunksPerRow = HD / 8;
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static_assert(kThreads % kChunksPerRow == 0 && Cfg::kTileKeys % kRowsPerPass == 0);
  const int first = threadIdx.x / kChunksPerRow, col = (threadIdx.x % kChunksPerRow) * 8;
  const int valid_rows = key_count - key0;
  const bool whole_tile_pages = p.page_size % Cfg::kTileKeys == 0;
  const int64_t row_stride = int64_t{p.nkv} * HD, column = int64_t{c.kv_head} * HD + col;
#pragma unroll
  for (int k = 0; k < Cfg::kTileKeys / kRowsPerPass; ++k) {
    const int row = first + k * kRowsPerPass;
    const bool valid = row < valid_rows;
    const int64_t slot = whole_tile_pages ? first_row + row : (valid ? cache_row(p, c.seq, key0 + row) : 0);
    const int64_t src = valid ? slot * row_stride + column : 0;
    cp_async_16(k_dst + row * Cfg::kLd + col, p.k_cache + src, valid);
    cp_async_16(v_dst + row * Cfg::kLd + col, p.v_cache + src, valid);
  }
}

// grid (kv heads x splits, 1, sequences), kThreads threads; every sequence has at most kRows rows.
template <int HD, int RowGroups>
__global__ void __launch_bounds__(kThreads, DimSplitConfig<HD, RowGroups>::kResidentCtas)
    dim_split_attention_kernel(const Params p) {
  using Cfg = DimSplitConfig<HD, RowGroups>;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* stages = reinterpret_cast<bf16*>(smem);
  bf16* q_tile = reinterpret_cast<bf16*>(smem + Cfg::kQOffset);
  bf16* p_tile = reinterpret_cast<bf16*>(smem + Cfg::kPOffset);
  float* warp_max = reinterpret_cast<float*>(smem + Cfg::kMaxOffset);  // [kGroupWarps][kRows]
  float* warp_sum = reinterpret_cast<float*>(smem + Cfg::kSumOffset);
  int* row_limit = reinterpret_cast<int*>(smem + Cfg::kLimitsOffset);

  // As in attention_kernel, the layout is read before the wait for the previous kernel.
  const int seq = blockIdx.z;
  const bool page_rows = p.page_size % Cfg::kTileKeys == 0;  // whole tiles in one page
  const int64_t key0_row = p.max_pages > 0 && page_rows ? cache_row(p, seq, 0) : 0;
  const int seq_begin = p.seq_starts[seq], num_new = p.seq_starts[seq + 1] - seq_begin;
  const CtaRows c{.seq = seq,
                  .kv_head = static_cast<int>(blockIdx.x) / p.num_splits,
                  .split = static_cast<int>(blockIdx.x) % p.num_splits,
                  .group = p.nh / p.nkv,
                  .seq_begin = seq_begin,
                  .num_rows = num_new * (p.nh / p.nkv),
                  .row0 = 0};
  const int key_count = p.cached_lens[seq] + num_new;
  if (threadIdx.x < Cfg::kRows) {
    const int r = threadIdx.x;
    row_limit[r] = r < c.num_rows ? visible_keys(p.positions[c.token(r)], key_count, p.mask_block) : 0;
  }
  __syncthreads();
  int key_end = 0;
  for (int r = 0; r < Cfg::kRows; ++r) key_end = max(key_end, row_limit[r]);
  const int num_tiles = (key_end + Cfg::kTileKeys - 1) / Cfg::kTileKeys;
  const int tiles_per_split = (num_tiles + p.num_splits - 1) / p.num_splits;
  const int tile_begin = min(num_tiles, c.split * tiles_per_split);
  const int tile_count = min(num_tiles, tile_begin + tiles_per_split) - tile_begin;
  auto k_stage = [&](int stage) { return stages + stage * 2 * Cfg::kTileKeys * Cfg::kLd; };
  auto v_stage = [&](int stage) { return k_stage(stage) + Cfg::kTileKeys * Cfg::kLd; };
  auto first_row_of = [&](int key0) {
    return !page_rows ? int64_t{0} : key0 == 0 ? key0_row : cache_row(p, seq, key0);
  };
  auto load_tile = [&](int i, int stage) {
    const int key0 = (tile_begin + i) * Cfg::kTileKeys;
    load_dim_split_tile<HD, Cfg>(p, c, key0, first_row_of(key0), key_count, k_stage(stage), v_stage(stage));
  };
  await_previous_kernel();

  // Q, the first tile and the second in flight together; the loop keeps one tile ahead.
  {
    constexpr int kChunksPerRow = HD / 8;
    const int64_t qkv_width = int64_t{p.nh + 2 * p.nkv} * HD;
    for (int i = threadIdx.x; i < Cfg::kRows * kChunksPerRow; i += kThreads) {
      const int row = i / kChunksPerRow, col = (i % kChunksPerRow) * 8;
      const bool valid = row < c.num_rows;
      const int64_t src = valid ? c.token(row) * qkv_width + int64_t{c.head(row)} * HD + col : 0;
      cp_async_16(q_tile + row * Cfg::kLd + col, p.qkv + src, valid);
    }
  }
  if (tile_count > 0) load_tile(0, 0);
  cp_async_commit();
  if (tile_count > 1) load_tile(1, 1);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, quad = lane % 4, g = lane / 4;
  // The warp's row group (its 16 rows start at rows0) and its part of that group's keys and columns.
  // With one row group both are spelled out: the compiler cannot know that warp < 4, and the
  // arithmetic it kept made 16-row launches measurably slower; spelled out, the PTX is the
  // 16-row-only kernel's, to one instruction.
  const int part = RowGroups == 1 ? warp : warp % Cfg::kGroupWarps;
  const int rows0 = RowGroups == 1 ? 0 : (warp / Cfg::kGroupWarps) * 16;
  uint32_t q_frag[HD / 16][4];
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    const int row = rows0 + ((lane / 8) % 2) * 8 + lane % 8;
    ldmatrix_x4(q_frag[kk], q_tile + row * Cfg::kLd + kk * 16 + (lane / 16) * 8);
  }
  const int limit[2] = {row_limit[rows0 + g], row_limit[rows0 + g + 8]};

  constexpr int kKeyBlocks = Cfg::kWarpKeys / 8;
  constexpr int kDimBlocks = Cfg::kWarpDims / 8;
  float out[kDimBlocks][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  const int dim0 = part * Cfg::kWarpDims, warp_key0 = part * Cfg::kWarpKeys;
  for (int i = 0; i < tile_count; ++i) {
    if (i > 0) {  // tiles 0 and 1 were issued with Q
      if (i + 1 < tile_count) load_tile(i + 1, (i + 1) % kStages);
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();
    }
    const bf16* k_tile = k_stage(i % kStages);
    const bf16* v_tile = v_stage(i % kStages);
    const int first_key = (tile_begin + i) * Cfg::kTileKeys + warp_key0;

    // This warp's keys: S = Q Kᵀ, one n8 block of keys at a time (matrices (keys, dims +0 / +8 /
    // +16 / +24) of two k16 steps).
    float s[kKeyBlocks][4] = {};
    if (first_key < key_end) {  // no row of the CTA sees these keys otherwise
#pragma unroll
      for (int kb = 0; kb < kKeyBlocks; ++kb) {
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk += 2) {
          uint32_t b[4];
          ldmatrix_x4(b, k_tile + (warp_key0 + kb * 8 + lane % 8) * Cfg::kLd + kk * 16 + (lane / 8) * 8);
          mma_bf16(s[kb], q_frag[kk], b[0], b[1]);
          mma_bf16(s[kb], q_frag[kk + 1], b[2], b[3]);
        }
      }
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int kb = 0; kb < kKeyBlocks; ++kb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = first_key + kb * 8 + 2 * quad + (e & 1);
        s[kb][e] = key < limit[e / 2] ? s[kb][e] * p.scale_log2 : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], s[kb][e]);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      if (quad == 0) warp_max[part * Cfg::kRows + rows0 + g + 8 * h] = tile_max[h];
    }
    __syncthreads();  // every warp's max of the tile

    float base[2], rescale[2];
    bool moved = false;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = row_max[h];
#pragma unroll
      for (int w = 0; w < Cfg::kGroupWarps; ++w) m = fmaxf(m, warp_max[w * Cfg::kRows + rows0 + g + 8 * h]);
      base[h] = max_or_zero(m);
      rescale[h] = fast_exp2(row_max[h] - base[h]);
      moved = moved || (rescale[h] != 1.0f && row_max[h] != -INFINITY);
      row_max[h] = m;
      row_sum[h] *= rescale[h];
    }
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
      for (int d = 0; d < kDimBlocks; ++d) {
#pragma unroll
        for (int e = 0; e < 4; ++e) out[d][e] *= rescale[e / 2];
      }
    }
#pragma unroll
    for (int kb = 0; kb < kKeyBlocks; ++kb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[kb][e] = fast_exp2(s[kb][e] - base[e / 2]);
        row_sum[e / 2] += s[kb][e];
      }
      bf16* p_row = p_tile + (rows0 + g) * Cfg::kPLd + warp_key0 + kb * 8 + 2 * quad;
      *reinterpret_cast<uint32_t*>(p_row) = pack_bf16(s[kb][0], s[kb][1]);
      *reinterpret_cast<uint32_t*>(p_row + 8 * Cfg::kPLd) = pack_bf16(s[kb][2], s[kb][3]);
    }
    __syncthreads();  // P of all 32 keys

    // out[rows, dim0 : dim0 + kWarpDims] += P V over the tile's 32 keys.
#pragma unroll
    for (int j = 0; j < Cfg::kTileKeys / 16; ++j) {
      uint32_t a[4];
      ldmatrix_x4(a, p_tile + (rows0 + ((lane / 8) % 2) * 8 + lane % 8) * Cfg::kPLd + j * 16 + (lane / 16) * 8);
#pragma unroll
      for (int db = 0; db < kDimBlocks; db += 2) {
        uint32_t b[4];
        const int key = j * 16 + ((lane / 8) % 2) * 8 + lane % 8;
        ldmatrix_x4_trans(b, v_tile + key * Cfg::kLd + dim0 + db * 8 + (lane / 16) * 8);
        mma_bf16(out[db], a, b[0], b[1]);
        mma_bf16(out[db + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // the stage and P are free for the next tile
  }
  cp_async_wait<0>();

  // Row sums: every warp of a row group summed its own keys against the same max.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
    if (quad == 0) warp_sum[part * Cfg::kRows + rows0 + g + 8 * h] = row_sum[h];
  }
  __syncthreads();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = rows0 + g + 8 * h;
    if (r >= c.num_rows) continue;
    float l = 0.0f;
#pragma unroll
    for (int w = 0; w < Cfg::kGroupWarps; ++w) l += warp_sum[w * Cfg::kRows + r];
    const int64_t out_row = int64_t{c.token(r)} * p.nh + c.head(r);
    if (p.num_splits == 1) {
      const float inv_sum = 1.0f / l;
#pragma unroll
      for (int d = 0; d < kDimBlocks; ++d) {
        *reinterpret_cast<uint32_t*>(p.out + out_row * HD + dim0 + d * 8 + 2 * quad) =
            pack_bf16(out[d][2 * h] * inv_sum, out[d][2 * h + 1] * inv_sum);
      }
    } else {
      const int64_t partial_row = int64_t{c.split} * p.num_tokens * p.nh + out_row;
#pragma unroll
      for (int d = 0; d < kDimBlocks; ++d) {
        *reinterpret_cast<float2*>(p.partial_out + partial_row * HD + dim0 + d * 8 + 2 * quad) =
            make_float2(out[d][2 * h], out[d][2 * h + 1]);
      }
      if (part == 0 && quad == 0) p.partial_stats[partial_row] = make_float2(row_max[h], l);
    }
  }
}

}  // namespace jet::cuda::attention_detail
