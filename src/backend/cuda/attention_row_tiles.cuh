// The paged-attention kernel for any number of query rows per sequence (attention.cu says which
// launches use it): CTAs of 16, 32 or 64 rows whose warps divide each 64-key tile by rows or by
// keys and keep whole output rows, merged through shared memory at the end.
//
// Keys stream through shared memory in tiles of 64, gathered row by row through the page table
// with cp.async into two stages (the next tile loads while the warps compute on the current one).
// A third stage costs a resident CTA per multiprocessor and bought nothing; one bulk copy per K
// or V row through the TMA engine wins only while the K/V stay in L2, which the engine's do not
// (bench/results has both measurements).
// The 4 warps divide a tile by rows or by keys, picked from the rows a sequence has:
//   * prefill (more than 32 rows): each warp owns 16 rows and all 64 keys of every tile;
//   * at most 16 rows (e.g. B = 4 tokens x 4 heads): the 4 warps share the 16 rows and each takes
//     16 keys of every tile, so one CTA keeps all its warps busy on one long prefix;
//   * 17 to 32 rows: 2 warps of 16 rows, each tile's keys split in two halves.
// Each warp keeps its own softmax state (row max and sum, unnormalised output); the warps that
// split keys merge theirs through shared memory at the end.
#pragma once

#include "backend/cuda/attention_common.cuh"

namespace jet::cuda::attention_detail {

constexpr int kTileKeys = 64;     // keys per shared-memory tile
constexpr int kResidentCtas = 3;  // per multiprocessor: about 71 KB of shared memory each

// Shapes and shared-memory layout of one kernel configuration.
template <int HD, int RowWarps>
struct Config {
  static_assert(HD % 16 == 0 && kWarps % RowWarps == 0);
  static constexpr int kKeyWarps = kWarps / RowWarps;        // warps sharing the same rows
  static constexpr int kBlockRows = 16 * RowWarps;           // query rows per CTA
  static constexpr int kWarpKeys = kTileKeys / kKeyWarps;    // keys of each tile one warp handles
  static constexpr int kLd = HD + kRowPad;                   // bf16 stride of Q/K/V rows in smem
  static constexpr int kMergeLd = HD + 8;                    // fp32 stride of the merge buffer
  static constexpr int kMergeRows = kKeyWarps * kBlockRows;  // always 64
  static_assert(kWarpKeys % 16 == 0);

  // Stages [kStages][K, V][kTileKeys][kLd] bf16. The Q tile [kBlockRows][kLd] bf16 is the second
  // stage until its rows are in registers, before the second K/V tile loads (its own 4.3-17.4 KB
  // left 32-row CTAs 2 per multiprocessor instead of 3). After the key loop the stages hold the
  // merge buffer [kKeyWarps][kBlockRows][kMergeLd] fp32.
  static constexpr size_t kTileBytes = size_t{kTileKeys} * kLd * sizeof(bf16);
  static constexpr size_t kStagesBytes = size_t{kStages} * 2 * kTileBytes;
  static_assert(size_t{kMergeRows} * kMergeLd * sizeof(float) <= kStagesBytes);
  static_assert(kStages >= 2 && size_t{kBlockRows} * kLd * sizeof(bf16) <= 2 * kTileBytes);
  static constexpr size_t kQOffset = 2 * kTileBytes;
  static constexpr size_t kLimitsOffset = kStagesBytes;
  static constexpr size_t kMaxOffset = kLimitsOffset + kBlockRows * sizeof(int);
  static constexpr size_t kSumOffset = kMaxOffset + kMergeRows * sizeof(float);
  static constexpr size_t kRowStatsOffset = kSumOffset + kMergeRows * sizeof(float);  // float2 [kBlockRows]
  static constexpr size_t kSmemBytes = kRowStatsOffset + kBlockRows * sizeof(float2);
  static_assert(kRowStatsOffset % 8 == 0);
};

// The cache row of key key0 (a multiple of kTileKeys, below key_count) when pages hold whole tiles
// (page_size a multiple of 64, as the engine's 256 are): the tile's rows are then consecutive in
// one page, so one page-table read serves the tile instead of one per row, each a dependent load
// the copies would wait on. 0 otherwise (load_kv_tile then reads the table row by row).
__device__ __forceinline__ int64_t tile_first_row(const Params& p, int seq, int key0) {
  return p.page_size % kTileKeys == 0 ? cache_row(p, seq, key0) : 0;
}

// Issues the cp.async of keys [key0, key0 + kTileKeys) of (seq, kv head) into k_dst / v_dst,
// given tile_first_row(key0). A thread copies the same 16-byte column of every kRowsPerPass-th
// row, so its addresses step by a constant: per-chunk index arithmetic took a large share of the
// kernel's issue slots (Nsight Compute). Keys past the sequence's
// key_count are zero-filled up to the end of the last warp's share (kWarpKeys) that holds a valid
// key: their scores are masked, but 0 * NaN (what an unwritten cache slot may hold) would still
// poison P·V. The shares after it are neither loaded nor read (the key loop skips them).
template <int HD, int RowWarps>
__device__ void load_kv_tile(const Params& p, const CtaRows& c, int key0, int64_t first_row, int key_count, bf16* k_dst,
                             bf16* v_dst) {
  using Cfg = Config<HD, RowWarps>;
  constexpr int kChunksPerRow = HD / 8;
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static_assert(kThreads % kChunksPerRow == 0 && kTileKeys % kRowsPerPass == 0);
  const int first = threadIdx.x / kChunksPerRow, col = (threadIdx.x % kChunksPerRow) * 8;
  const int valid_rows = key_count - key0;
  const int rows_read = (valid_rows + Cfg::kWarpKeys - 1) / Cfg::kWarpKeys * Cfg::kWarpKeys;
  const bool whole_tile_pages = p.page_size % kTileKeys == 0;
  const int64_t row_stride = int64_t{p.nkv} * HD, column = int64_t{c.kv_head} * HD + col;
#pragma unroll
  for (int k = 0; k < kTileKeys / kRowsPerPass; ++k) {
    const int row = first + k * kRowsPerPass;
    if (row >= rows_read) break;  // rows only grow with k
    const bool valid = row < valid_rows;
    const int64_t slot = whole_tile_pages ? first_row + row : (valid ? cache_row(p, c.seq, key0 + row) : 0);
    const int64_t src = valid ? slot * row_stride + column : 0;
    cp_async_16(k_dst + row * Cfg::kLd + col, p.k_cache + src, valid);
    cp_async_16(v_dst + row * Cfg::kLd + col, p.v_cache + src, valid);
  }
}

template <int HD, int RowWarps>
__device__ void load_q_tile(const Params& p, const CtaRows& c, bf16* q_dst) {
  using Cfg = Config<HD, RowWarps>;
  constexpr int kChunksPerRow = HD / 8;
  const int64_t qkv_width = int64_t{p.nh + 2 * p.nkv} * HD;
  for (int i = threadIdx.x; i < Cfg::kBlockRows * kChunksPerRow; i += kThreads) {
    const int row = i / kChunksPerRow, col = (i % kChunksPerRow) * 8, r = c.row0 + row;
    const bool valid = r < c.num_rows;
    const int64_t src = valid ? c.token(r) * qkv_width + int64_t{c.head(r)} * HD + col : 0;
    cp_async_16(q_dst + row * Cfg::kLd + col, p.qkv + src, valid);
  }
}

// One warp's online-softmax state for its 16 rows. The m16n8 accumulator layout gives lane
// (g = lane / 4, c = lane % 4) rows g and g + 8 ("half" 0 and 1), columns 2c and 2c + 1 of each
// 8-wide block; the four lanes of a quad hold the same rows.
template <int HD>
struct WarpState {
  float out[HD / 8][4] = {};              // unnormalised output, [8-dim block][accumulator element]
  float max[2] = {-INFINITY, -INFINITY};  // running row max (log2 units), same in all 4 lanes
  float sum[2] = {0.0f, 0.0f};            // this lane's share of the row sum (quad-reduced at the end)
};

// One warp's work on one K/V tile: S = Q Kᵀ over its keys, mask, online softmax, out += P V.
template <int HD, int RowWarps>
__device__ void attend_tile(const Params& p, const uint32_t (&q_frag)[HD / 16][4], const bf16* k_tile,
                            const bf16* v_tile, int first_key, int smem_key0, const int (&limit)[2],
                            WarpState<HD>& st) {
  using Cfg = Config<HD, RowWarps>;
  constexpr int kKeyBlocks = Cfg::kWarpKeys / 8;
  const int lane = threadIdx.x % 32;

  // Scores. ldmatrix (no transpose) of K rows gives the "col" B operand directly: matrices
  // (keys +0, dims +0), (keys +0, dims +8), (keys +8, dims +0), (keys +8, dims +8).
  float s[kKeyBlocks][4] = {};
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
#pragma unroll
    for (int kb = 0; kb < kKeyBlocks; kb += 2) {
      uint32_t b[4];
      const int key = smem_key0 + kb * 8 + (lane / 16) * 8 + lane % 8;
      ldmatrix_x4(b, k_tile + key * Cfg::kLd + kk * 16 + ((lane / 8) % 2) * 8);
      mma_bf16(s[kb], q_frag[kk], b[0], b[1]);
      mma_bf16(s[kb + 1], q_frag[kk], b[2], b[3]);
    }
  }

  // Mask and scale, then the rows' new max (over the quad's lanes).
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int kb = 0; kb < kKeyBlocks; ++kb) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = first_key + kb * 8 + 2 * (lane % 4) + (e & 1);
      s[kb][e] = key < limit[e / 2] ? s[kb][e] * p.scale_log2 : -INFINITY;
      tile_max[e / 2] = fmaxf(tile_max[e / 2], s[kb][e]);
    }
  }
  float base[2], rescale[2];
  bool moved = false;  // whether this lane's output needs rescaling
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
    const float new_max = fmaxf(st.max[h], tile_max[h]);
    base[h] = max_or_zero(new_max);
    rescale[h] = fast_exp2(st.max[h] - base[h]);  // 0 while the row had no key
    // A factor of 1 (the max did not move) changes nothing, nor does any factor on a row with no
    // key yet, whose output is all zeros.
    moved = moved || (rescale[h] != 1.0f && st.max[h] != -INFINITY);
    st.max[h] = new_max;
    st.sum[h] *= rescale[h];
  }
  if (__any_sync(0xffffffffu, moved)) {  // the warp skips HD / 4 multiplies per lane otherwise
#pragma unroll
    for (int d = 0; d < HD / 8; ++d) {
#pragma unroll
      for (int e = 0; e < 4; ++e) st.out[d][e] *= rescale[e / 2];
    }
  }

  // P = exp2(S - max), rounded to bf16 straight into A fragments: the accumulators of key
  // blocks 2j and 2j + 1 are exactly the A operand of the k16 step j of P·V.
  uint32_t p_frag[kKeyBlocks / 2][4];
#pragma unroll
  for (int kb = 0; kb < kKeyBlocks; ++kb) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[kb][e] = fast_exp2(s[kb][e] - base[e / 2]);
      st.sum[e / 2] += s[kb][e];
    }
    p_frag[kb / 2][(kb % 2) * 2] = pack_bf16(s[kb][0], s[kb][1]);
    p_frag[kb / 2][(kb % 2) * 2 + 1] = pack_bf16(s[kb][2], s[kb][3]);
  }

  // out += P V. V rows are keys, so the B operand needs the transposed ldmatrix: matrices
  // (keys +0, dims +0), (keys +8, dims +0), (keys +0, dims +8), (keys +8, dims +8).
#pragma unroll
  for (int j = 0; j < kKeyBlocks / 2; ++j) {
#pragma unroll
    for (int db = 0; db < HD / 8; db += 2) {
      uint32_t b[4];
      const int key = smem_key0 + j * 16 + ((lane / 8) % 2) * 8 + lane % 8;
      ldmatrix_x4_trans(b, v_tile + key * Cfg::kLd + db * 8 + (lane / 16) * 8);
      mma_bf16(st.out[db], p_frag[j], b[0], b[1]);
      mma_bf16(st.out[db + 1], p_frag[j], b[2], b[3]);
    }
  }
}

// grid (kv heads x splits, row tiles of the longest sequence, sequences), kThreads threads. The kv
// head varies fastest so the CTAs running together read neighbouring 256-byte pieces of the same
// cache rows ([page, slot, kv head, dim] layout) rather than one piece of many rows. The launch
// bound caps registers at 168, so kResidentCtas fit a multiprocessor as their shared memory
// allows: the 64-row configuration needed 190 (2 per multiprocessor), and at 168 it spills 16
// bytes yet runs prefill faster with the third resident CTA.
template <int HD, int RowWarps>
__global__ void __launch_bounds__(kThreads, kResidentCtas) attention_kernel(const Params p) {
  using Cfg = Config<HD, RowWarps>;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* stages = reinterpret_cast<bf16*>(smem);
  bf16* q_tile = reinterpret_cast<bf16*>(smem + Cfg::kQOffset);
  int* row_limit = reinterpret_cast<int*>(smem + Cfg::kLimitsOffset);
  float* warp_max = reinterpret_cast<float*>(smem + Cfg::kMaxOffset);  // [kKeyWarps][kBlockRows]
  float* warp_sum = reinterpret_cast<float*>(smem + Cfg::kSumOffset);
  float2* row_stats = reinterpret_cast<float2*>(smem + Cfg::kRowStatsOffset);  // the CTA's (max, sum) per row
  float* merge = reinterpret_cast<float*>(smem);                               // reuses the stages after the key loop

  // Everything up to the first load of q or of the cache reads the batch layout only, which the
  // host uploaded before the forward began (kernel_util.cuh): it runs before the wait for the
  // previous kernel (qk_norm_rope, which stores the new keys), in the shadow of its tail. The
  // first tile's page is read alongside seq_starts: split 0 starts at key 0 whatever the rows are.
  const int seq = blockIdx.z;
  const int64_t key0_row = p.max_pages > 0 ? tile_first_row(p, seq, 0) : 0;
  const int seq_begin = p.seq_starts[seq], num_new = p.seq_starts[seq + 1] - seq_begin;
  const int group = p.nh / p.nkv;
  const CtaRows c{.seq = seq,
                  .kv_head = static_cast<int>(blockIdx.x) / p.num_splits,
                  .split = static_cast<int>(blockIdx.x) % p.num_splits,
                  .group = group,
                  .seq_begin = seq_begin,
                  .num_rows = num_new * group,
                  .row0 = static_cast<int>(blockIdx.y) * Cfg::kBlockRows};
  if (c.row0 >= c.num_rows) return;  // this sequence has fewer rows than the longest one
  const int key_count = p.cached_lens[seq] + num_new;
  // Visible keys of each row (0 for padding rows), and the CTA's key range: its rows' largest.
  for (int r = threadIdx.x; r < Cfg::kBlockRows; r += kThreads) {
    row_limit[r] =
        c.row0 + r < c.num_rows ? visible_keys(p.positions[c.token(c.row0 + r)], key_count, p.mask_block) : 0;
  }
  __syncthreads();
  int key_end = 0;
  for (int r = 0; r < Cfg::kBlockRows; ++r) key_end = max(key_end, row_limit[r]);
  const int num_tiles = (key_end + kTileKeys - 1) / kTileKeys;
  const int tiles_per_split = (num_tiles + p.num_splits - 1) / p.num_splits;
  const int tile_begin = min(num_tiles, c.split * tiles_per_split);
  const int tile_count = min(num_tiles, tile_begin + tiles_per_split) - tile_begin;  // 0 for some splits
  auto k_stage = [&](int stage) { return stages + stage * 2 * kTileKeys * Cfg::kLd; };
  auto v_stage = [&](int stage) { return k_stage(stage) + kTileKeys * Cfg::kLd; };
  auto first_row_of = [&](int key0) { return key0 == 0 ? key0_row : tile_first_row(p, seq, key0); };
  const int64_t first_row = tile_count > 0 ? first_row_of(tile_begin * kTileKeys) : 0;
  await_previous_kernel();

  load_q_tile<HD, RowWarps>(p, c, q_tile);
  if (tile_count > 0) {
    load_kv_tile<HD, RowWarps>(p, c, tile_begin * kTileKeys, first_row, key_count, k_stage(0), v_stage(0));
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_rows = (warp % RowWarps) * 16;              // the warp's first row in the CTA
  const int warp_keys = (warp / RowWarps) * Cfg::kWarpKeys;  // its first key within every tile
  // Q as A fragments, kept in registers: matrices (rows +0, dims +0), (rows +8, dims +0),
  // (rows +0, dims +8), (rows +8, dims +8).
  uint32_t q_frag[HD / 16][4];
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    const int row = warp_rows + ((lane / 8) % 2) * 8 + lane % 8;
    ldmatrix_x4(q_frag[kk], q_tile + row * Cfg::kLd + kk * 16 + (lane / 16) * 8);
  }
  const int limit[2] = {row_limit[warp_rows + lane / 4], row_limit[warp_rows + lane / 4 + 8]};
  // The warp's rows see no key at or past warp_limit: a tile share starting there is skipped
  // (the last tile of a short prefix is mostly past the keys).
  int warp_limit = max(limit[0], limit[1]);
  for (int offset = 16; offset > 0; offset /= 2) {
    warp_limit = max(warp_limit, __shfl_xor_sync(0xffffffffu, warp_limit, offset));
  }
  __syncthreads();  // every warp holds its Q rows: the second stage is free for K/V

  WarpState<HD> st;
  for (int i = 0; i < tile_count; ++i) {
    if (i + 1 < tile_count) {
      const int next = (i + 1) % kStages, key0 = (tile_begin + i + 1) * kTileKeys;
      load_kv_tile<HD, RowWarps>(p, c, key0, first_row_of(key0), key_count, k_stage(next), v_stage(next));
    }
    cp_async_commit();
    cp_async_wait<1>();  // tile i has landed; tile i + 1 may still be in flight
    __syncthreads();
    const int first_key = (tile_begin + i) * kTileKeys + warp_keys;
    if (first_key < warp_limit) {
      attend_tile<HD, RowWarps>(p, q_frag, k_stage(i % kStages), v_stage(i % kStages), first_key, warp_keys, limit, st);
    }
    __syncthreads();  // every warp is done with this stage before the next iteration refills it
  }
  cp_async_wait<0>();
  __syncthreads();

  // Merge the key-splitting warps: each rescales its output to the rows' common max.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    st.sum[h] += __shfl_xor_sync(0xffffffffu, st.sum[h], 1);
    st.sum[h] += __shfl_xor_sync(0xffffffffu, st.sum[h], 2);
  }
  const int key_warp = warp / RowWarps;
  if (lane % 4 == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp_rows + lane / 4 + 8 * h;
      warp_max[key_warp * Cfg::kBlockRows + row] = st.max[h];
      warp_sum[key_warp * Cfg::kBlockRows + row] = st.sum[h];
    }
  }
  __syncthreads();
  auto row_max = [&](int row) {
    float m = -INFINITY;
    for (int w = 0; w < Cfg::kKeyWarps; ++w) m = fmaxf(m, warp_max[w * Cfg::kBlockRows + row]);
    return m;
  };
  if (threadIdx.x < Cfg::kBlockRows) {  // the CTA's (max, sum) of each row, once
    const int row = threadIdx.x;
    const float m = row_max(row);
    float l = 0.0f;
    for (int w = 0; w < Cfg::kKeyWarps; ++w) {
      l += warp_sum[w * Cfg::kBlockRows + row] * fast_exp2(warp_max[w * Cfg::kBlockRows + row] - max_or_zero(m));
    }
    row_stats[row] = make_float2(m, l);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = warp_rows + lane / 4 + 8 * h;
    const float rescale = fast_exp2(st.max[h] - max_or_zero(row_max(row)));
    float* dst = merge + (key_warp * Cfg::kBlockRows + row) * Cfg::kMergeLd + 2 * (lane % 4);
#pragma unroll
    for (int d = 0; d < HD / 8; ++d) {
      *reinterpret_cast<float2*>(dst + d * 8) = make_float2(st.out[d][2 * h] * rescale, st.out[d][2 * h + 1] * rescale);
    }
  }
  __syncthreads();

  // Write out: 8 dims per thread, coalesced along the head dimension.
  constexpr int kChunksPerRow = HD / 8;
  for (int i = threadIdx.x; i < Cfg::kBlockRows * kChunksPerRow; i += kThreads) {
    const int row = i / kChunksPerRow, col = (i % kChunksPerRow) * 8, r = c.row0 + row;
    if (r >= c.num_rows) continue;
    float acc[8] = {};
#pragma unroll
    for (int w = 0; w < Cfg::kKeyWarps; ++w) {
      const float4* src = reinterpret_cast<const float4*>(merge + (w * Cfg::kBlockRows + row) * Cfg::kMergeLd + col);
      const float4 a = src[0], b = src[1];
      acc[0] += a.x, acc[1] += a.y, acc[2] += a.z, acc[3] += a.w;
      acc[4] += b.x, acc[5] += b.y, acc[6] += b.z, acc[7] += b.w;
    }
    const float2 stats = row_stats[row];
    const int64_t out_row = int64_t{c.token(r)} * p.nh + c.head(r);
    if (p.num_splits == 1) {
      const float inv_sum = 1.0f / stats.y;
      uint4 packed;
      uint32_t* words = reinterpret_cast<uint32_t*>(&packed);
#pragma unroll
      for (int e = 0; e < 4; ++e) words[e] = pack_bf16(acc[2 * e] * inv_sum, acc[2 * e + 1] * inv_sum);
      *reinterpret_cast<uint4*>(p.out + out_row * HD + col) = packed;
    } else {
      const int64_t partial_row = int64_t{c.split} * p.num_tokens * p.nh + out_row;
      float4* dst = reinterpret_cast<float4*>(p.partial_out + partial_row * HD + col);
      dst[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      dst[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
      if (col == 0) p.partial_stats[partial_row] = stats;
    }
  }
}

}  // namespace jet::cuda::attention_detail
