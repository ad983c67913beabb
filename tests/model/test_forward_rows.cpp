// Model::forward's rows: the logits asked for through logit_rows are exactly those rows of a
// forward that computes every row (past its K/V the last layer runs on the asked-for rows only),
// and a forward without logits, which stops at the last layer's K/V, fills the cache exactly as
// one with logits does. CPU backend, tiny random SDAR and SDAR-MoE models over a scrambled cache.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "model_test_util.h"

using namespace jet;
using namespace jet::test;

namespace {

constexpr int kPageSize = 4;
constexpr int kPages = 8;
constexpr int kTokens = 10;  // one sequence, a prefill of positions 0..9

class ForwardRows : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(make_tiny_model(GetParam(), dir_.path(), 3));
    backend_ = make_backend("cpu", 1);
    model_ = load_model(dir_.path().string(), *backend_);
    const ModelConfig& c = model_->config();
    layout_.num_seqs = 1;
    layout_.num_tokens = kTokens;
    layout_.max_pages = kPages;
    layout_.mask_block = c.block_causal ? static_cast<int>(c.block_size) : 0;
    for (int i = 0; i < kTokens; ++i) layout_.positions.push_back(i);
    layout_.seq_starts = {0, kTokens};
    layout_.cached_lens = {0};
    for (int p = kPages - 1; p >= 0; --p) layout_.page_table.push_back(p);
    for (int i = 0; i < kTokens; ++i) ids_.push_back(static_cast<int32_t>((7 * i + 3) % c.vocab));
  }

  // One forward over a fresh cache, with logits for `rows`, or without them for rows [0,
  // first_rows) (every row when 0), or with no logits at all; returns the logits and leaves the
  // cache in kv_.
  std::vector<float> forward(bool with_logits, const std::vector<int32_t>& rows = {}, int64_t first_rows = 0) {
    const ModelConfig& c = model_->config();
    kv_ = backend_->alloc_kv_cache(static_cast<int>(c.layers), kPages, kPageSize, static_cast<int>(c.kv_heads),
                                   static_cast<int>(c.head_dim));
    for (size_t l = 0; l < kv_.k.size(); ++l) {  // a known start, so untouched slots compare equal
      std::memset(kv_.k[l].data, 0, kv_.k[l].nbytes());
      std::memset(kv_.v[l].data, 0, kv_.v[l].nbytes());
    }
    ForwardBatch batch;
    batch.host = layout_;
    backend_->upload_batch(batch, owner_);
    Tensor ids = backend_->alloc_tensor(owner_, DType::I32, {kTokens});
    backend_->upload(ids.data, ids_.data(), ids_.size() * sizeof(int32_t));
    if (!with_logits) {
      model_->forward(batch, ids, kv_, nullptr);
      return {};
    }
    const int64_t count = !rows.empty() ? static_cast<int64_t>(rows.size()) : first_rows > 0 ? first_rows : kTokens;
    Tensor logits = backend_->alloc_tensor(owner_, DType::F32, {count, c.vocab});
    if (rows.empty()) {
      model_->forward(batch, ids, kv_, &logits);
    } else {
      Tensor rows_t = backend_->alloc_tensor(owner_, DType::I32, {count});
      backend_->upload(rows_t.data, rows.data(), rows.size() * sizeof(int32_t));
      model_->forward(batch, ids, kv_, &logits, &rows_t);
    }
    std::vector<float> out(static_cast<size_t>(logits.numel()));
    backend_->download(out.data(), logits.data, logits.nbytes());
    return out;
  }

  std::vector<float> cache_contents() const {
    std::vector<float> all;
    for (size_t l = 0; l < kv_.k.size(); ++l) {
      for (const Tensor* t : {&kv_.k[l], &kv_.v[l]}) {
        const float* p = t->ptr<float>();
        all.insert(all.end(), p, p + t->numel());
      }
    }
    return all;
  }

  TempDir dir_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<Buffer> owner_;
  KvCache kv_;
  BatchLayout layout_;
  std::vector<int32_t> ids_;
};

TEST_P(ForwardRows, AskedForRowsEqualThoseRowsOfTheFullForward) {
  const int64_t V = model_->config().vocab;
  const std::vector<float> full = forward(true);
  const std::vector<int32_t> rows = {7, 0, 9, 4};  // out of order, first and last included
  const std::vector<float> picked = forward(true, rows);
  ASSERT_EQ(picked.size(), rows.size() * V);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int64_t v = 0; v < V; ++v) {
      ASSERT_NEAR(picked[i * V + v], full[rows[i] * V + v], 1e-5f * (1.0f + std::fabs(full[rows[i] * V + v])))
          << "row " << rows[i] << ", vocab entry " << v;
    }
  }
  // Without logit_rows, R logits are those of rows [0, R).
  const std::vector<float> first = forward(true, {}, 3);
  ASSERT_EQ(first.size(), 3 * V);
  for (size_t i = 0; i < first.size(); ++i) ASSERT_NEAR(first[i], full[i], 1e-5f * (1.0f + std::fabs(full[i])));
}

TEST_P(ForwardRows, AForwardWithoutLogitsFillsTheSameCache) {
  forward(true);
  const std::vector<float> with_logits = cache_contents();
  forward(false);
  const std::vector<float> without = cache_contents();
  ASSERT_EQ(with_logits.size(), without.size());
  for (size_t i = 0; i < with_logits.size(); ++i) ASSERT_EQ(with_logits[i], without[i]) << "cache element " << i;
}

INSTANTIATE_TEST_SUITE_P(Families, ForwardRows, ::testing::Values("sdar", "sdar_moe"));

}  // namespace
