// Paged attention: every query head attends its sequence's keys in the cache pages, this
// forward's own included (qk_norm_rope wrote them; block-causal when mask_block > 0),
// fp32 softmax with the maximum subtracted, GQA by kv head h / (nh / nkv).
// The work is one parallel loop over (sequence, kv head, tile of new tokens): each unit gathers
// the keys and values its tile may see into contiguous matrices and runs scores = Q Kᵀ and
// out = P V as single-threaded BLAS products. One loop keeps the number of OpenMP barriers per
// call constant, which matters when the machine has fewer free cores than threads.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend_impl.h"
#include "backend/op_checks.h"

namespace jet::cpu {

namespace {

// Query rows (token x q head of the group) per unit: bounds the score buffer at this many rows.
constexpr int64_t kTileRows = 256;

// Keys per sequence (cached + new), for a batch check_paged_batch has validated.
std::vector<int32_t> key_counts(const BatchLayout& h) {
  std::vector<int32_t> keys(h.num_seqs);
  for (int s = 0; s < h.num_seqs; ++s) keys[s] = h.cached_lens[s] + h.seq_starts[s + 1] - h.seq_starts[s];
  return keys;
}

// Everything a unit reads, gathered once per call.
struct AttentionView {
  const float* qkv;
  const float* k_cache;
  const float* v_cache;
  float* out;
  const int32_t* positions;
  const int32_t* page_table;
  int max_pages, page_size, mask_block, nh, nkv, hd;

  int64_t qkv_width() const { return int64_t{nh + 2 * nkv} * hd; }
  // Offset of the cache row holding (sequence s, position p); a row is nkv * hd floats.
  int64_t cache_row(int s, int64_t p) const { return paged_slot(page_table, max_pages, page_size, s, p) * nkv * hd; }
  // Keys visible to a query at position p of a sequence with key_count keys.
  int64_t key_limit(int64_t p, int64_t key_count) const {
    return mask_block > 0 ? std::min(key_count, (p / mask_block + 1) * mask_block) : key_count;
  }
};

struct Unit {
  int seq, kv_head;
  int64_t token_begin, token_end;  // packed rows of the sequence's new tokens
};

// Per-thread buffers, reused across units.
struct Scratch {
  std::vector<float> keys, values, queries, scores, outputs;
  std::vector<int64_t> limits;
};

// Row r of scores[rows, width] becomes softmax(scale * row) over its first limits[r] entries,
// zeros after (the keys its block-causal mask hides).
void masked_softmax_rows(float* scores, int64_t rows, int64_t width, const int64_t* limits, float scale) {
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

// One unit: the q heads of kv head u.kv_head for the tokens [u.token_begin, u.token_end).
void attend(const AttentionView& a, const Unit& u, int64_t key_count, Scratch& sc) {
  const int group = a.nh / a.nkv, hd = a.hd;
  const int64_t rows = (u.token_end - u.token_begin) * group;
  sc.queries.resize(rows * hd);
  sc.limits.resize(rows);
  int64_t width = 0;  // keys any row of the unit may see
  for (int64_t t = u.token_begin; t < u.token_end; ++t) {
    const int64_t limit = a.key_limit(a.positions[t], key_count);
    width = std::max(width, limit);
    for (int g = 0; g < group; ++g) {
      const int64_t r = (t - u.token_begin) * group + g;
      sc.limits[r] = limit;
      const float* q = a.qkv + t * a.qkv_width() + int64_t{u.kv_head * group + g} * hd;
      std::memcpy(sc.queries.data() + r * hd, q, hd * sizeof(float));
    }
  }
  sc.keys.resize(width * hd);
  sc.values.resize(width * hd);
  for (int64_t key = 0; key < width; ++key) {
    const int64_t src = a.cache_row(u.seq, key) + int64_t{u.kv_head} * hd;
    std::memcpy(sc.keys.data() + key * hd, a.k_cache + src, hd * sizeof(float));
    std::memcpy(sc.values.data() + key * hd, a.v_cache + src, hd * sizeof(float));
  }
  sc.scores.resize(rows * width);
  sc.outputs.resize(rows * hd);
  gemm_nt(sc.queries.data(), sc.keys.data(), sc.scores.data(), rows, width, hd);
  masked_softmax_rows(sc.scores.data(), rows, width, sc.limits.data(), 1.0f / std::sqrt(static_cast<float>(hd)));
  gemm_nn(sc.scores.data(), sc.values.data(), sc.outputs.data(), rows, hd, width);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = u.token_begin + r / group, h = int64_t{u.kv_head} * group + r % group;
    std::memcpy(a.out + (t * a.nh + h) * hd, sc.outputs.data() + r * hd, hd * sizeof(float));
  }
}

}  // namespace

void CpuBackend::attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, int page_size,
                           const ForwardBatch& batch, int nh, int nkv, int hd, Tensor& out) {
  JET_CHECK(nh > 0 && nkv > 0 && hd > 0 && nh % nkv == 0, "attention: bad layout nh=", nh, " nkv=", nkv, " hd=", hd,
            " (nh must be a multiple of nkv)");
  check_tensor(qkv, "attention", "qkv", DType::F32, {-1, int64_t{nh + 2 * nkv} * hd});
  const int64_t T = qkv.dim(0);
  check_tensor(out, "attention", "out", DType::F32, {T, int64_t{nh} * hd});
  const int64_t num_pages = check_kv_cache_args("attention", k_cache, v_cache, page_size, nkv, hd, DType::F32);
  check_paged_batch("attention", batch, T, page_size, num_pages);
  const std::vector<int32_t> key_count = key_counts(batch.host);
  const AttentionView a{qkv.ptr<float>(),
                        k_cache.ptr<float>(),
                        v_cache.ptr<float>(),
                        out.ptr<float>(),
                        batch.positions.ptr<int32_t>(),
                        batch.page_table.ptr<int32_t>(),
                        batch.host.max_pages,
                        page_size,
                        batch.host.mask_block,
                        nh,
                        nkv,
                        hd};

  // One unit per (sequence, kv head, tile of tokens).
  const int32_t* starts = batch.seq_starts.ptr<int32_t>();
  const int64_t tokens_per_unit = std::max<int64_t>(1, kTileRows / (nh / nkv));
  std::vector<Unit> units;
  for (int s = 0; s < batch.host.num_seqs; ++s) {
    for (int kvh = 0; kvh < nkv; ++kvh) {
      for (int64_t t0 = starts[s]; t0 < starts[s + 1]; t0 += tokens_per_unit) {
        units.push_back({s, kvh, t0, std::min<int64_t>(starts[s + 1], t0 + tokens_per_unit)});
      }
    }
  }
#pragma omp parallel num_threads(thread_count())
  {
    Scratch scratch;
#pragma omp for schedule(dynamic, 1)
    for (size_t i = 0; i < units.size(); ++i) attend(a, units[i], key_count[units[i].seq], scratch);
  }
}

}  // namespace jet::cpu
