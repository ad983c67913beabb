// Paged attention on the GPU: every query row attends its sequence's keys in the paged bf16 cache,
// the batch's own included (qk_norm_rope stored them), block-causal or bidirectional, GQA, with
// bf16 tensor-core MMAs (mma.sync m16n8k16, fp32 accumulate) and an online softmax whose
// statistics stay in fp32. This file holds the launch (which kernel, the key splits) and the
// kernel that merges the splits.
//
// One CTA of 4 warps owns (sequence s, kv head, a tile of query rows, a split of the key range).
// A query row is a (new token, q head of the kv head's group) pair, so the nh / nkv heads that
// read one kv head share every K/V tile the CTA loads: a sequence has num_new * group rows.
// Two kernels:
//   * attention_kernel (attention_row_tiles.cuh), any rows: warps keep whole output rows;
//   * dim_split_attention_kernel (attention_dim_split.cuh), at most 32 rows: warps split the head
//     dimension, 5 or 4 CTAs per multiprocessor instead of 3, for launches bound by latency.
// When (sequences x row tiles x kv heads) gives too few CTAs to fill the GPU (few sequences with
// long prefixes, the flash-decoding case), the key range is also split across CTAs: each split
// writes its unnormalised fp32 output and (max, sum) to a workspace (the cuBLASLt workspace, idle
// between GEMMs on the same stream) and a combine kernel merges them.
// The launch shape depends only on the host copy of the batch (num_seqs, the largest number of
// new tokens, max_pages, page_size), never on device data; tiles per split are derived on the
// device from the actual key counts, so any split count is correct and a captured CUDA graph
// replays correctly for any batch with the same shape. head_dim 16, 32, 64 or 128.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_dim_split.cuh"
#include "backend/cuda/attention_row_tiles.cuh"
#include "backend/cuda/kernel_util.cuh"
#include "backend/op_checks.h"

namespace jet::cuda {

namespace {

using namespace attention_detail;

// Splitting the key range below this many keys per split costs more in merging than it gains:
// at 128, batches 1 and 4 of short prompts (one 256-key page) ran slower split in two than unsplit.
constexpr int kMinKeysPerSplit = 256;

// Merges the splits' partial outputs: HD / 4 threads per output row (token, q head), 4 dimensions
// each, so a split's part of a row is one float4. Every thread walks all the splits itself (a row's
// statistics are one broadcast load per split), which leaves no reduction between threads, and the
// loops are unrolled so that several splits' loads are in flight at once (one warp per row,
// reading a float at a time in dependent rounds, made the merge a large share of a long-prefix
// launch). Merging in the CTA of each group that finishes last instead (a counter per group, no
// launch) was slower: the merges then run at the launch's tail, each CTA's rows a few dependent
// rounds.
template <int HD>
__global__ void combine_splits_kernel(const Params p) {
  constexpr int kThreadsPerRow = HD / 4;
  await_previous_kernel();
  const int64_t rows = int64_t{p.num_tokens} * p.nh;
  const int64_t thread = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t row = thread / kThreadsPerRow;
  if (row >= rows) return;
  const int dim = static_cast<int>(thread % kThreadsPerRow) * 4;
  float m = -INFINITY;
#pragma unroll 4
  for (int s = 0; s < p.num_splits; ++s) m = fmaxf(m, p.partial_stats[s * rows + row].x);
  const float base = max_or_zero(m);
  float sum = 0.0f;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
  for (int s = 0; s < p.num_splits; ++s) {
    const float2 stats = p.partial_stats[s * rows + row];
    const float weight = fast_exp2(stats.x - base);
    sum += stats.y * weight;
    const float4 v = *reinterpret_cast<const float4*>(p.partial_out + (s * rows + row) * HD + dim);
    acc.x += v.x * weight, acc.y += v.y * weight, acc.z += v.z * weight, acc.w += v.w * weight;
  }
  const float inv_sum = 1.0f / sum;
  *reinterpret_cast<uint2*>(p.out + row * HD + dim) =
      make_uint2(pack_bf16(acc.x * inv_sum, acc.y * inv_sum), pack_bf16(acc.z * inv_sum, acc.w * inv_sum));
}

// --- Host side -------------------------------------------------------------------------------------

// Sum over the sequences of a batch check_paged_batch has validated of their row tiles of
// tile_rows query rows (a sequence has num_new * group rows).
int64_t count_row_tiles(const BatchLayout& h, int group, int tile_rows) {
  int64_t tiles = 0;
  for (int s = 0; s < h.num_seqs; ++s) {
    const int64_t rows = int64_t{h.seq_starts[s + 1] - h.seq_starts[s]} * group;
    tiles += (rows + tile_rows - 1) / tile_rows;
  }
  return tiles;
}

// What the launch of any configuration needs besides the kernel parameters.
struct LaunchShape {
  int max_rows = 0, num_seqs = 0;  // query rows of the longest sequence; sequences
  int64_t row_tiles = 0;           // sum over sequences of their row tiles (of this configuration)
  int64_t key_bound = 0;           // the page table's width in keys
  int64_t partial_bytes = 0;       // one split's partial results
  void* scratch = nullptr;         // for the partial results (the GEMM workspace)
  size_t scratch_bytes = 0;
};

// Splits of the key range, used only when the CTAs alone do not fill one wave (multiprocessors x
// resident CTAs each): with many short CTAs, splitting adds per-CTA and merge work for nothing.
// Below one wave the count is chosen by how full the launched waves are. Bounds: at most two
// waves' worth of CTAs, at least kMinKeysPerSplit keys per split, and no more partial results
// than the scratch space holds.
int choose_splits(int64_t ctas, int resident_per_sm, const LaunchShape& l) {
  ctas = std::max<int64_t>(ctas, 1);
  const int64_t slots = int64_t{multiprocessor_count()} * resident_per_sm;
  if (ctas >= slots) return 1;
  const int64_t by_waves = (2 * slots + ctas - 1) / ctas;
  const int64_t by_keys = l.key_bound / kMinKeysPerSplit;
  const int64_t by_scratch = l.partial_bytes > 0 ? int64_t(l.scratch_bytes) / l.partial_bytes : 1;
  return splits_for_wave_fill(ctas, slots, std::max<int64_t>(1, std::min({by_waves, by_keys, by_scratch})));
}

// A kernel's shared-memory opt-in (above 48 KB a kernel must ask, once per process, before launches
// and occupancy queries); returns its resident CTAs per multiprocessor.
int prepare_kernel(void (*kernel)(const Params), size_t smem_bytes) {
  JET_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes)));
  int n = 0;
  JET_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, smem_bytes));
  return std::max(n, 1);
}

// One configuration's launch: the key splits, the kernel, and the merge of the splits.
template <int HD>
void launch_attention(Params p, const LaunchShape& l, void (*kernel)(const Params), size_t smem_bytes, int block_rows,
                      int resident_per_sm, cudaStream_t stream) {
  p.num_splits = choose_splits(l.row_tiles * p.nkv, resident_per_sm, l);
  if (p.num_splits > 1) {
    p.partial_out = static_cast<float*>(l.scratch);
    p.partial_stats = reinterpret_cast<float2*>(p.partial_out + int64_t{p.num_splits} * p.num_tokens * p.nh * HD);
  }
  const dim3 grid(p.nkv * p.num_splits, (l.max_rows + block_rows - 1) / block_rows, l.num_seqs);
  JET_CHECK(grid.y <= 65535, "attention: ", l.max_rows, " query rows in one sequence exceed the grid's limit");
  launch_kernel("attention_kernel", kernel, grid, kThreads, smem_bytes, stream, p);
  if (p.num_splits > 1) {
    constexpr int kCombineThreads = 256;
    const int64_t threads = int64_t{p.num_tokens} * p.nh * (HD / 4);
    launch_kernel("combine_splits_kernel", combine_splits_kernel<HD>, (threads + kCombineThreads - 1) / kCombineThreads,
                  kCombineThreads, 0, stream, p);
  }
}

template <int HD, int RowWarps>
void run_attention(const Params& p, const LaunchShape& l, cudaStream_t stream) {
  using Cfg = Config<HD, RowWarps>;
  static const int resident_per_sm = prepare_kernel(attention_kernel<HD, RowWarps>, Cfg::kSmemBytes);
  launch_attention<HD>(p, l, attention_kernel<HD, RowWarps>, Cfg::kSmemBytes, Cfg::kBlockRows, resident_per_sm, stream);
}

// Prefixes up to this many keys leave a launch bound by each CTA's latency (its loads, the merge
// of its warps), not by bandwidth: at 128 sequences the dim-split kernel beat attention_kernel
// up to a few hundred keys and lost past it, where its CTAs fill a partial last wave.
constexpr int64_t kDimSplitMaxKeys = 512;

// Whether a launch of at most 16 or 32 rows per sequence runs the dim-split kernel: short prefixes,
// or long ones whose CTAs fit one wave of it (8 to 64 sequences of 2,048 keys at 16 or 32 rows).
// Not for a handful of CTAs, where each one's latency is the launch's and the 64-key tiles of
// attention_kernel take fewer rounds of barriers (one long sequence, batch 1 of short prompts).
bool use_dim_split(int64_t ctas, int dim_split_resident, int64_t key_bound) {
  const int64_t multiprocessors = multiprocessor_count();
  if (4 * ctas < multiprocessors) return false;
  return key_bound <= kDimSplitMaxKeys || ctas <= multiprocessors * dim_split_resident;
}

// Launches the dim-split kernel of RowGroups x 16 rows if use_dim_split picks it; false otherwise.
template <int HD, int RowGroups>
bool try_dim_split(const Params& p, const LaunchShape& l, cudaStream_t stream) {
  using Cfg = DimSplitConfig<HD, RowGroups>;
  static const int resident_per_sm = prepare_kernel(dim_split_attention_kernel<HD, RowGroups>, Cfg::kSmemBytes);
  if (!use_dim_split(l.row_tiles * p.nkv, resident_per_sm, l.key_bound)) return false;
  launch_attention<HD>(p, l, dim_split_attention_kernel<HD, RowGroups>, Cfg::kSmemBytes, Cfg::kRows, resident_per_sm,
                       stream);
  return true;
}

// The configuration for the rows: 16 rows per CTA (denoise), 32 (a block's first forward), or 64
// (prefill); at most 32 rows and head_dim 64 or 128 may take the dim-split kernel (its warps need 16
// of the head's dimensions each).
template <int HD>
void run_attention_for_rows(const Params& p, int row_warps, const LaunchShape& l, cudaStream_t stream) {
  if constexpr (HD >= 64) {
    if (row_warps == 1 && try_dim_split<HD, 1>(p, l, stream)) return;
    if (row_warps == 2 && try_dim_split<HD, 2>(p, l, stream)) return;
  }
  if (row_warps == 1) return run_attention<HD, 1>(p, l, stream);
  if (row_warps == 2) return run_attention<HD, 2>(p, l, stream);
  return run_attention<HD, 4>(p, l, stream);
}

}  // namespace

void CudaBackend::attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, int page_size,
                            const ForwardBatch& batch, int nh, int nkv, int hd, Tensor& out) {
  JET_CHECK(nh > 0 && nkv > 0 && hd > 0 && nh % nkv == 0, "attention: bad layout nh=", nh, " nkv=", nkv, " hd=", hd,
            " (nh must be a multiple of nkv)");
  JET_CHECK(hd == 16 || hd == 32 || hd == 64 || hd == 128, "attention: head_dim ", hd,
            " is not supported by the CUDA kernels (16, 32, 64 or 128)");
  check_tensor(qkv, "attention", "qkv", DType::BF16, {-1, int64_t{nh + 2 * nkv} * hd});
  const int64_t T = qkv.dim(0);
  check_tensor(out, "attention", "out", DType::BF16, {T, int64_t{nh} * hd});
  const int64_t num_pages = check_kv_cache_args("attention", k_cache, v_cache, page_size, nkv, hd, DType::BF16);
  JET_CHECK(aligned_16({qkv.data, out.data, k_cache.data, v_cache.data}),
            "attention: qkv, out and the caches must start on 16-byte boundaries (vector loads)");
  const PagedBatchShape paged = check_paged_batch("attention", batch, T, page_size, num_pages);
  const int group = nh / nkv;
  if (T == 0) return;

  Params p{};
  p.qkv = qkv.ptr<bf16>();
  p.k_cache = k_cache.ptr<bf16>();
  p.v_cache = v_cache.ptr<bf16>();
  p.out = out.ptr<bf16>();
  p.positions = batch.positions.ptr<int32_t>();
  p.seq_starts = batch.seq_starts.ptr<int32_t>();
  p.cached_lens = batch.cached_lens.ptr<int32_t>();
  p.page_table = batch.page_table.ptr<int32_t>();
  p.num_tokens = static_cast<int>(T);
  p.max_pages = batch.host.max_pages;
  p.page_size = page_size;
  p.mask_block = batch.host.mask_block;
  p.nh = nh;
  p.nkv = nkv;
  p.scale_log2 = kLog2e / std::sqrt(static_cast<float>(hd));
  const int num_seqs = batch.host.num_seqs;

  // Split along the keys when the CTAs alone would leave the GPU idle (the key bound comes from
  // the page-table width so the choice does not depend on device data).
  LaunchShape l;
  l.max_rows = paged.longest_new * group;
  l.num_seqs = num_seqs;
  const int row_warps = l.max_rows <= 16 ? 1 : l.max_rows <= 32 ? 2 : 4;
  l.row_tiles = count_row_tiles(batch.host, group, 16 * row_warps);
  l.key_bound = int64_t{batch.host.max_pages} * page_size;
  // The cuBLASLt workspace is idle between GEMMs on this stream, so the partial results borrow it.
  l.partial_bytes = T * nh * (int64_t{hd} * sizeof(float) + sizeof(float2));
  l.scratch = gemm_workspace();
  l.scratch_bytes = gemm_workspace_bytes();
  switch (hd) {
    case 16:
      return run_attention_for_rows<16>(p, row_warps, l, stream_);
    case 32:
      return run_attention_for_rows<32>(p, row_warps, l, stream_);
    case 64:
      return run_attention_for_rows<64>(p, row_warps, l, stream_);
    default:
      return run_attention_for_rows<128>(p, row_warps, l, stream_);
  }
}

}  // namespace jet::cuda
