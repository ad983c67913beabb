// Paged attention: writes the batch's K/V into the cache pages, then every query head attends
// the cached keys of its sequence plus this forward's own (block-causal when mask_block > 0),
// fp32 softmax with the maximum subtracted, GQA by kv head h / (nh / nkv). Scores and outputs
// are BLAS products over each kv head's gathered keys and values.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend_impl.h"

namespace jet::cpu {

namespace {

// Query rows per score tile: bounds the score buffer at kTileRows x keys floats.
constexpr int64_t kTileRows = 256;

// The batch's sequence bookkeeping, validated once so the parallel loops need no checks.
struct SeqRows {
  std::vector<int32_t> seq_of_row;  // [T]
  std::vector<int32_t> key_count;   // [num_seqs]: cached_lens + num_new
};

SeqRows validate_batch(const ForwardBatch& batch, int64_t T, int page_size, int64_t num_pages) {
  const BatchLayout& h = batch.host;
  const int S = h.num_seqs, max_pages = h.max_pages;
  check_tensor(batch.positions, "attention", "positions", DType::I32, {T});
  check_tensor(batch.seq_starts, "attention", "seq_starts", DType::I32, {S + 1});
  check_tensor(batch.cached_lens, "attention", "cached_lens", DType::I32, {S});
  check_tensor(batch.page_table, "attention", "page_table", DType::I32, {S, max_pages});
  const int32_t* starts = batch.seq_starts.ptr<int32_t>();
  const int32_t* cached = batch.cached_lens.ptr<int32_t>();
  const int32_t* positions = batch.positions.ptr<int32_t>();
  const int32_t* pages = batch.page_table.ptr<int32_t>();
  JET_CHECK(starts[0] == 0 && starts[S] == T, "attention: seq_starts must run from 0 to ", T, " tokens, got ",
            starts[0], "..", starts[S]);
  SeqRows rows;
  rows.seq_of_row.resize(T);
  rows.key_count.resize(S);
  for (int s = 0; s < S; ++s) {
    JET_CHECK(starts[s] <= starts[s + 1] && cached[s] >= 0, "attention: sequence ", s, " has seq_starts ", starts[s],
              "..", starts[s + 1], " and cached_len ", cached[s]);
    const int64_t keys = int64_t{cached[s]} + (starts[s + 1] - starts[s]);
    JET_CHECK(keys <= int64_t{max_pages} * page_size, "attention: sequence ", s, " has ", keys,
              " keys but its page table holds ", max_pages, " pages of ", page_size);
    for (int64_t page = 0; page * page_size < keys; ++page) {
      const int32_t id = pages[s * int64_t{max_pages} + page];
      JET_CHECK(id >= 0 && id < num_pages, "attention: sequence ", s, " page ", page, " is ", id,
                ", outside the cache's ", num_pages, " pages");
    }
    for (int32_t t = starts[s]; t < starts[s + 1]; ++t) {
      JET_CHECK(positions[t] >= 0 && positions[t] < keys, "attention: token ", t, " of sequence ", s,
                " has position ", positions[t], " outside [0, ", keys, ")");
      rows.seq_of_row[t] = s;
    }
    rows.key_count[s] = static_cast<int32_t>(keys);
  }
  return rows;
}

// Row r of scores[rows, width] becomes softmax(scale * row) over its first limits[r] entries,
// zeros after (the keys its block-causal mask hides); fp32 with the row maximum subtracted.
void masked_softmax_rows(float* scores, int64_t rows, int64_t width, const int64_t* limits, float scale) {
#pragma omp parallel for num_threads(thread_count())
  for (int64_t r = 0; r < rows; ++r) {
    float* row = scores + r * width;
    const int64_t limit = limits[r];
    float max_score = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < limit; ++i) {
      row[i] *= scale;
      max_score = std::max(max_score, row[i]);
    }
    float sum = 0.0f;
    for (int64_t i = 0; i < limit; ++i) {
      row[i] = std::exp(row[i] - max_score);
      sum += row[i];
    }
    const float inv_sum = 1.0f / sum;
    for (int64_t i = 0; i < limit; ++i) row[i] *= inv_sum;
    std::fill(row + limit, row + width, 0.0f);
  }
}

}  // namespace

void CpuBackend::attention(const Tensor& qkv, Tensor& k_cache, Tensor& v_cache, int page_size,
                           const ForwardBatch& batch, int nh, int nkv, int hd, Tensor& out) {
  JET_CHECK(nh > 0 && nkv > 0 && hd > 0 && nh % nkv == 0 && page_size > 0, "attention: bad layout nh=", nh,
            " nkv=", nkv, " hd=", hd, " page_size=", page_size, " (nh must be a multiple of nkv)");
  const int64_t width_qkv = int64_t{nh + 2 * nkv} * hd;
  check_tensor(qkv, "attention", "qkv", DType::F32, {-1, width_qkv});
  const int64_t T = qkv.dim(0);
  check_tensor(out, "attention", "out", DType::F32, {T, int64_t{nh} * hd});
  check_tensor(k_cache, "attention", "k_cache", DType::F32, {-1, page_size, nkv, hd});
  check_tensor(v_cache, "attention", "v_cache", DType::F32, {k_cache.dim(0), page_size, nkv, hd});
  const SeqRows rows = validate_batch(batch, T, page_size, k_cache.dim(0));

  const int32_t* positions = batch.positions.ptr<int32_t>();
  const int32_t* page_table = batch.page_table.ptr<int32_t>();
  const int max_pages = batch.host.max_pages, mask_block = batch.host.mask_block;
  const float* qkv_data = qkv.ptr<float>();
  float* k_data = k_cache.ptr<float>();
  float* v_data = v_cache.ptr<float>();
  const int64_t kv_row = int64_t{nkv} * hd;  // floats of one token's K (or V) in the cache
  // Offset of the cache row holding (sequence s, position p).
  auto cache_row = [&](int s, int64_t p) {
    const int64_t page = page_table[s * int64_t{max_pages} + p / page_size];
    return (page * page_size + p % page_size) * kv_row;
  };

  // 1. Write every new token's K and V first: queries of this forward attend each other.
#pragma omp parallel for num_threads(thread_count())
  for (int64_t t = 0; t < T; ++t) {
    const float* k = qkv_data + t * width_qkv + int64_t{nh} * hd;
    const int64_t dst = cache_row(rows.seq_of_row[t], positions[t]);
    std::memcpy(k_data + dst, k, kv_row * sizeof(float));
    std::memcpy(v_data + dst, k + kv_row, kv_row * sizeof(float));
  }

  // 2. Per (sequence, kv head): its keys and values gathered into contiguous [keys, hd]
  // matrices, then tiles of query rows (new token x q head of the group): scores = Q Kᵀ,
  // masked softmax, out = P V, both products through BLAS.
  const int group = nh / nkv;
  const int64_t tokens_per_tile = std::max<int64_t>(1, kTileRows / group);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int32_t* starts = batch.seq_starts.ptr<int32_t>();
  float* out_data = out.ptr<float>();
  std::vector<float> keys, values, q_tile, scores, o_tile;
  std::vector<int64_t> limits;
  for (int s = 0; s < batch.host.num_seqs; ++s) {
    const int64_t key_count = rows.key_count[s];
    if (starts[s] == starts[s + 1]) continue;
    keys.resize(key_count * hd);
    values.resize(key_count * hd);
    for (int kvh = 0; kvh < nkv; ++kvh) {
#pragma omp parallel for num_threads(thread_count())
      for (int64_t key = 0; key < key_count; ++key) {
        const int64_t src = cache_row(s, key) + int64_t{kvh} * hd;
        std::memcpy(keys.data() + key * hd, k_data + src, hd * sizeof(float));
        std::memcpy(values.data() + key * hd, v_data + src, hd * sizeof(float));
      }
      for (int64_t t0 = starts[s]; t0 < starts[s + 1]; t0 += tokens_per_tile) {
        const int64_t t1 = std::min<int64_t>(starts[s + 1], t0 + tokens_per_tile);
        const int64_t tile_rows = (t1 - t0) * group;
        q_tile.resize(tile_rows * hd);
        limits.resize(tile_rows);
        int64_t width = 0;  // keys any row of the tile may see
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t p = positions[t];
          const int64_t limit = mask_block > 0 ? std::min(key_count, (p / mask_block + 1) * mask_block) : key_count;
          width = std::max(width, limit);
          for (int g = 0; g < group; ++g) {
            const int64_t r = (t - t0) * group + g;
            limits[r] = limit;
            std::memcpy(q_tile.data() + r * hd, qkv_data + t * width_qkv + int64_t{kvh * group + g} * hd,
                        hd * sizeof(float));
          }
        }
        scores.resize(tile_rows * width);
        o_tile.resize(tile_rows * hd);
        gemm_nt(q_tile.data(), keys.data(), scores.data(), tile_rows, width, hd);
        masked_softmax_rows(scores.data(), tile_rows, width, limits.data(), scale);
        gemm_nn(scores.data(), values.data(), o_tile.data(), tile_rows, hd, width);
        for (int64_t r = 0; r < tile_rows; ++r) {
          const int64_t t = t0 + r / group, h = int64_t{kvh} * group + r % group;
          std::memcpy(out_data + (t * nh + h) * hd, o_tile.data() + r * hd, hd * sizeof(float));
        }
      }
    }
  }
}

}  // namespace jet::cpu
