// Paged attention: writes the batch's K/V into the cache pages, then every query head attends
// the cached keys of its sequence plus this forward's own (block-causal when mask_block > 0),
// fp32 softmax with the maximum subtracted, GQA by kv head h / (nh / nkv).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend_impl.h"

namespace jet::cpu {

namespace {

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

}  // namespace

void CpuBackend::attention(const Tensor& qkv, Tensor& k_cache, Tensor& v_cache, int page_size,
                           const ForwardBatch& batch, int nh, int nkv, int hd, Tensor& out) {
  JET_CHECK(nh > 0 && nkv > 0 && hd > 0 && nh % nkv == 0 && page_size > 0, "attention: bad layout nh=", nh,
            " nkv=", nkv, " hd=", hd, " page_size=", page_size, " (nh must be a multiple of nkv)");
  const int64_t width = int64_t{nh + 2 * nkv} * hd;
  check_tensor(qkv, "attention", "qkv", DType::F32, {-1, width});
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
#pragma omp parallel for
  for (int64_t t = 0; t < T; ++t) {
    const float* k = qkv_data + t * width + int64_t{nh} * hd;
    const int64_t dst = cache_row(rows.seq_of_row[t], positions[t]);
    std::memcpy(k_data + dst, k, kv_row * sizeof(float));
    std::memcpy(v_data + dst, k + kv_row, kv_row * sizeof(float));
  }

  // 2. Each (token, query head) attends keys [0, limit) of its sequence.
  const int group = nh / nkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float* out_data = out.ptr<float>();
#pragma omp parallel
  {
    std::vector<float> weights;
#pragma omp for collapse(2) schedule(dynamic, 4)
    for (int64_t t = 0; t < T; ++t) {
      for (int h = 0; h < nh; ++h) {
        const int s = rows.seq_of_row[t];
        const int64_t p = positions[t];
        int64_t limit = rows.key_count[s];
        if (mask_block > 0) limit = std::min(limit, (p / mask_block + 1) * mask_block);
        const float* q = qkv_data + t * width + int64_t{h} * hd;
        const int64_t head_offset = int64_t{h / group} * hd;
        weights.resize(limit);
        float max_score = -std::numeric_limits<float>::infinity();
        for (int64_t key = 0; key < limit; ++key) {
          const float* k = k_data + cache_row(s, key) + head_offset;
          float dot = 0.0f;
          for (int d = 0; d < hd; ++d) dot += q[d] * k[d];
          weights[key] = dot * scale;
          max_score = std::max(max_score, weights[key]);
        }
        float* o = out_data + t * int64_t{nh} * hd + int64_t{h} * hd;
        std::fill(o, o + hd, 0.0f);
        float sum = 0.0f;
        for (int64_t key = 0; key < limit; ++key) {
          const float w = std::exp(weights[key] - max_score);
          sum += w;
          const float* v = v_data + cache_row(s, key) + head_offset;
          for (int d = 0; d < hd; ++d) o[d] += w * v[d];
        }
        const float inv_sum = 1.0f / sum;
        for (int d = 0; d < hd; ++d) o[d] *= inv_sum;
      }
    }
  }
}

}  // namespace jet::cpu
