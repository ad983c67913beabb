// The decode ops end to end on crafted batches: gather_block_tokens, and denoise_step sampling,
// selecting and committing per row (row order differs from slot order on purpose), reading the
// logits rows of the sampled positions only (StepRow::logits_row0), token editing, and the
// vocabulary parts of a split LM head.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend_test_util.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "sampling/vocab_parts.h"

using namespace jet;
using namespace jet::test;

namespace {

constexpr int kB = 4, kV = 8, kMask = 7;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class DecodeOps : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  TensorFactory tf{*backend};
  DecodeState st = backend->alloc_decode_state(3, kB, kV);

  void start(int slot, const SlotParams& p, const std::vector<int32_t>& tokens) {
    backend->set_slot_params(st, slot, p);
    backend->start_block(st, slot, tokens, p.mask_id);
    backend->clear_seen(st, slot);
  }
  Tensor step_rows(const std::vector<StepRow>& rows) {
    Tensor t = backend->alloc_tensor(owner_, DType::I32, {static_cast<int64_t>(rows.size() * sizeof(StepRow) / 4)});
    backend->upload(t.data, rows.data(), rows.size() * sizeof(StepRow));
    return t;
  }
  // Logits rows of one block position: `base` everywhere, then the given (id, value) pairs.
  static void set_row(std::vector<float>& logits, int row, float base,
                      std::initializer_list<std::pair<int, float>> ids) {
    std::fill_n(logits.begin() + row * kV, kV, base);
    for (auto [id, value] : ids) logits[row * kV + id] = value;
  }
  template <typename T>
  std::vector<T> slot_values(const Tensor& t, int slot) {
    const std::vector<T> all = tf.read<T>(t);
    return {all.begin() + slot * kB, all.begin() + (slot + 1) * kB};
  }

 private:
  std::vector<Buffer> owner_;
};

SlotParams greedy(Strategy strategy) {
  SlotParams p;
  p.temperature = 0.0f;
  p.strategy = strategy;
  p.mask_id = kMask;
  return p;
}

// Sampling at T = 1 with a seed: each draw is tied to its position and step.
SlotParams seeded(Strategy strategy, uint64_t seed) {
  SlotParams p;
  p.temperature = 1.0f;
  p.strategy = strategy;
  p.mask_id = kMask;
  p.seed = seed;
  return p;
}

using Ints = std::vector<int32_t>;

}  // namespace

TEST_F(DecodeOps, GatherBlockTokensFollowsTheSlotList) {
  start(0, greedy(Strategy::Sequential), {1, 2, 3, 4});
  start(2, greedy(Strategy::Sequential), {5, 6, 7, 0});
  Tensor ids = tf.i32({2 * kB}, Ints(2 * kB, -1));
  backend->gather_block_tokens(st.tokens, tf.i32({2}, {2, 0}), ids);
  EXPECT_EQ(tf.read<int32_t>(ids), (Ints{5, 6, 7, 0, 1, 2, 3, 4}));
  EXPECT_THROW(backend->gather_block_tokens(st.tokens, tf.i32({2}, {2, 3}), ids), Error);
}

TEST_F(DecodeOps, DenoiseStepCommitsPerRowStrategy) {
  // Slot 2: prompt tail 3 then masks; greedy low_confidence_static, one commit this step.
  start(2, greedy(Strategy::LowConfidenceStatic), {3, kMask, kMask, kMask});
  // Slot 0: all masks, repetition penalty 2 on token 0, last step: everything commits.
  SlotParams penalised = greedy(Strategy::Sequential);
  penalised.repetition_penalty = 2.0f;
  start(0, penalised, {kMask, kMask, kMask, kMask});
  backend->mark_seen(st, 0, {0});
  start(1, greedy(Strategy::Sequential), {kMask, kMask, kMask, kMask});  // not in this step

  // Logits rows of the masked positions only. Row 0 = slot 2: position 0 is not masked, so
  // positions 1-3 read logits rows 0-2.
  std::vector<float> logits(2 * kB * kV);
  set_row(logits, 0, 0.0f, {{1, 5.0f}});                   // c = e^5 / (e^5 + 6)
  set_row(logits, 1, 0.0f, {{2, 2.0f}});                   // c = e^2 / (e^2 + 6)
  set_row(logits, 2, 0.0f, {{4, 3.0f}, {kMask, 100.0f}});  // the mask logit is ignored
  // Row 1 = slot 0: logits rows 3-6.
  set_row(logits, 3, 0.0f, {{0, 2.0f}, {1, 1.5f}});  // penalised token 0 drops to 1.0: token 1
  set_row(logits, 4, 0.0f, {{6, 1.0f}});
  set_row(logits, 5, 0.0f, {{5, 1.0f}});
  set_row(logits, 6, 0.0f, {{2, 1.0f}, {kMask, 9.0f}});
  // Spare rows no position owns: their NaNs must never be read into a commit.
  std::fill(logits.begin() + 7 * kV, logits.end(), kNaN);

  const Tensor rows = step_rows({{2, 12, 5, 1, 0, 0}, {0, 0, 0, 2, 1, 3}});
  backend->denoise_step(tf.f32({2 * kB, kV}, logits), rows, 2, st);

  const double c1 = std::exp(5.0) / (std::exp(5.0) + 6.0);
  EXPECT_EQ(slot_values<int32_t>(st.tokens, 2), (Ints{3, 1, kMask, kMask}));
  EXPECT_EQ(slot_values<int32_t>(st.trajectory, 2), (Ints{0, 6, 0, 0}));
  EXPECT_NEAR(slot_values<float>(st.logprobs, 2)[1], std::log(c1), 1e-5);
  const double h1 = -c1 * std::log(c1) - 6 * ((1 - c1) / 6) * std::log((1 - c1) / 6);
  EXPECT_NEAR(slot_values<float>(st.entropies, 2)[1], h1, 1e-5);
  EXPECT_EQ(slot_values<float>(st.logprobs, 2)[2], 0.0f);

  EXPECT_EQ(slot_values<int32_t>(st.tokens, 0), (Ints{1, 6, 5, 2}));
  EXPECT_EQ(slot_values<int32_t>(st.trajectory, 0), (Ints{1, 1, 1, 1}));
  EXPECT_EQ(slot_values<int32_t>(st.tokens, 1), (Ints{kMask, kMask, kMask, kMask}));
  EXPECT_EQ(tf.read<int32_t>(st.masks_left), (Ints{0, 4, 2}));
}

TEST_F(DecodeOps, SeededRandomStrategyIsReproducibleAndBatchIndependent) {
  const SlotParams p = seeded(Strategy::Random, 2024);
  std::mt19937 rng(1);
  const std::vector<float> logits = random_floats(rng, 2 * kB * kV, -2.0f, 2.0f);
  const StepRow row{1, 40, 9, 1, 0};

  auto run = [&](bool with_neighbour) {
    start(1, p, Ints(kB, kMask));
    start(0, p, Ints(kB, kMask));
    std::vector<float> l = logits;
    std::vector<StepRow> rows = {row};
    if (with_neighbour) {  // slot 0 first, so slot 1 reads the second logits rows
      rows.insert(rows.begin(), StepRow{0, 0, 0, 2, 0, 0});
      rows[1].logits_row0 = kB;
    } else {
      std::copy(logits.begin() + kB * kV, logits.end(), l.begin());
    }
    backend->denoise_step(tf.f32({2 * kB, kV}, l), step_rows(rows), static_cast<int>(rows.size()), st);
    return slot_values<int32_t>(st.tokens, 1);
  };
  const Ints alone = run(false), batched = run(true), again = run(false);
  EXPECT_EQ(alone, batched);
  EXPECT_EQ(alone, again);
  // The one committed position is the one with the largest strategy draw.
  int expected = 0;
  for (int j = 1; j < kB; ++j) {
    if (uniform(p.seed, row.position0 + j, row.global_step, kRandomStrategyLane) >
        uniform(p.seed, row.position0 + expected, row.global_step, kRandomStrategyLane)) {
      expected = j;
    }
  }
  for (int j = 0; j < kB; ++j) EXPECT_EQ(alone[j] != kMask, j == expected) << "position " << j;
}

TEST_F(DecodeOps, ExplorationReplacesTheStrategyOfTheStep) {
  // Position 3 is by far the most confident, so low_confidence_static alone commits it.
  std::vector<float> logits(kB * kV, 0.0f);
  set_row(logits, 3, 0.0f, {{2, 9.0f}});
  const Tensor l = tf.f32({kB, kV}, logits);
  const StepRow row{0, 40, 6, 1, 0, 0};
  auto committed = [&](const SlotParams& p) {
    start(0, p, Ints(kB, kMask));
    backend->denoise_step(l, step_rows({row}), 1, st);
    Ints at;
    const Ints tokens = slot_values<int32_t>(st.tokens, 0);
    for (int j = 0; j < kB; ++j) {
      if (tokens[j] != kMask) at.push_back(j);
    }
    return at;
  };
  const SlotParams own = seeded(Strategy::LowConfidenceStatic, 5);
  EXPECT_EQ(committed(own), (Ints{3}));
  SlotParams diverse = own;
  diverse.sequential_below = 41;  // the block starts at 40, below the barrier: sequential
  EXPECT_EQ(committed(diverse), (Ints{0}));
  diverse.sequential_below = 40;
  EXPECT_EQ(committed(diverse), (Ints{3}));
  SlotParams explore = own, random = own;
  explore.epsilon_greedy = 1.0f;  // every step random
  random.strategy = Strategy::Random;
  const Ints explored = committed(explore);
  const Ints explored_tokens = slot_values<int32_t>(st.tokens, 0);
  EXPECT_EQ(explored, committed(random));
  EXPECT_EQ(explored_tokens, slot_values<int32_t>(st.tokens, 0));
}

TEST_F(DecodeOps, DenoiseStepRejectsBadRows) {
  start(0, greedy(Strategy::Sequential), Ints(kB, kMask));
  const Tensor logits = tf.f32({2 * kB, kV}, std::vector<float>(2 * kB * kV, 0.0f));
  EXPECT_THROW(backend->denoise_step(logits, step_rows({{5, 0, 0, 1, 0}}), 1, st), Error);  // no slot 5
  EXPECT_THROW(backend->denoise_step(logits, step_rows({{0, 0, 0, 1, 0}, {0, 0, 0, 1, 0}}), 2, st), Error);
  EXPECT_THROW(backend->denoise_step(logits, step_rows({{0, 0, 0, 1, 0}}), 3, st), Error);  // too few StepRows
  // Slot 0's four masks need logits rows [row0, row0 + 4) inside the 8 given.
  EXPECT_THROW(backend->denoise_step(logits, step_rows({{0, 0, 0, 1, 0, 5}}), 1, st), Error);
  EXPECT_THROW(backend->denoise_step(logits, step_rows({{0, 0, 0, 1, 0, -1}}), 1, st), Error);
  // Each row's logits rows must follow the previous row's: slot 1's start inside slot 0's four.
  start(1, greedy(Strategy::Sequential), Ints(kB, kMask));
  EXPECT_THROW(backend->denoise_step(logits, step_rows({{0, 0, 0, 1, 0, 0}, {1, 0, 0, 1, 0, 2}}), 2, st), Error);
  EXPECT_THROW(backend->denoise_step(logits, step_rows({{0, 0, 0, 1, 0, 4}, {1, 0, 0, 1, 0, 0}}), 2, st), Error);
  EXPECT_EQ(tf.read<int32_t>(st.masks_left)[0], kB);  // nothing was committed
  backend->denoise_step(logits, step_rows({{0, 0, 0, 1, 0, 4}}), 1, st);
  EXPECT_EQ(tf.read<int32_t>(st.masks_left)[0], kB - 1);
}

// The compact layout (masked positions only, each row's from its logits_row0, row after row),
// sampled in one call or a chunk of logits rows at a time, gives what sampling the full layout's
// row i * B + j of every masked position gives: the same token, logprob and entropy, bit for bit.
// Seeded sampling at T = 1 ties each draw to its position.
TEST_F(DecodeOps, DenoiseStepCompactLogitsMatchTheFullLayout) {
  const SlotParams p = seeded(Strategy::LowConfidenceStatic, 77);
  const Ints block2 = {kMask, 3, kMask, kMask}, block0 = {kMask, kMask, 5, kMask};
  // Row 0 = slot 2 (one commit: the most confident), row 1 = slot 0 (last step: all commit).
  std::vector<StepRow> rows = {{2, 20, 3, 1, 0, 0}, {0, 8, 1, 1, 1, 0}};
  std::mt19937 rng(5);
  const std::vector<float> full = random_floats(rng, 2 * kB * kV, -3.0f, 3.0f);  // row i * B + j

  // Expected: the sampler on the full layout's rows of the masked positions.
  const std::vector<uint32_t> no_seen(st.seen_words, 0);
  auto expected = [&](int i, int j) {
    std::vector<float> row(full.begin() + (i * kB + j) * kV, full.begin() + (i * kB + j + 1) * kV);
    return sample_position(row.data(), kV, p, no_seen.data(), rows[i].position0 + j, rows[i].global_step);
  };
  int most_confident = -1;
  for (int j : {0, 2, 3}) {
    if (most_confident < 0 || expected(0, j).confidence > expected(0, most_confident).confidence) most_confident = j;
  }

  // Compact: row 0's three masked positions, then row 1's three.
  std::vector<float> logits;
  for (int i : {0, 1}) {
    rows[i].logits_row0 = static_cast<int32_t>(logits.size() / kV);
    for (int j : i == 0 ? Ints{0, 2, 3} : Ints{0, 1, 3}) {
      logits.insert(logits.end(), full.begin() + (i * kB + j) * kV, full.begin() + (i * kB + j + 1) * kV);
    }
  }
  for (int chunk : {6, 4, 1}) {
    SCOPED_TRACE(str("logits sampled ", chunk, " rows at a time"));
    start(2, p, block2);
    start(0, p, block0);
    const Tensor rows_t = step_rows(rows);
    for (int first = 0; first < 6; first += chunk) {
      const int n = std::min(chunk, 6 - first);
      const std::vector<float> part(logits.begin() + first * kV, logits.begin() + (first + n) * kV);
      backend->sample_positions(tf.f32({n, kV}, part), first, rows_t, 2, st);
    }
    backend->commit_step(rows_t, 2, 6, st);

    const Ints tokens2 = slot_values<int32_t>(st.tokens, 2), tokens0 = slot_values<int32_t>(st.tokens, 0);
    const std::vector<float> logprobs2 = slot_values<float>(st.logprobs, 2);
    const std::vector<float> logprobs0 = slot_values<float>(st.logprobs, 0);
    const std::vector<float> entropies0 = slot_values<float>(st.entropies, 0);
    for (int j = 0; j < kB; ++j) {
      if (j == most_confident) {
        EXPECT_EQ(tokens2[j], expected(0, j).token);
        EXPECT_EQ(logprobs2[j], expected(0, j).logprob);
      } else {
        EXPECT_EQ(tokens2[j], block2[j]) << "slot 2 position " << j;
      }
      if (block0[j] != kMask) {
        EXPECT_EQ(tokens0[j], block0[j]);
        continue;
      }
      EXPECT_EQ(tokens0[j], expected(1, j).token) << "slot 0 position " << j;
      EXPECT_EQ(logprobs0[j], expected(1, j).logprob) << "slot 0 position " << j;
      EXPECT_EQ(entropies0[j], expected(1, j).entropy) << "slot 0 position " << j;
    }
    EXPECT_EQ(slot_values<int32_t>(st.trajectory, 0), (Ints{2, 2, 0, 2}));
    EXPECT_EQ(tf.read<int32_t>(st.masks_left)[2], 2);
    EXPECT_EQ(tf.read<int32_t>(st.masks_left)[0], 0);
  }
}

TEST_F(DecodeOps, HeadStepSamplesAndCommitsOnlyTheBlocksFirstPosition) {
  // A head step (StepRow::candidates_end = 1, docs/decoding.md §1 "Shifted logits"): of a block
  // of masks only position 0 is a candidate, reads the step's one logits row, and is committed
  // as the last step commits; the other masks keep their place and need no logits row.
  start(1, greedy(Strategy::LowConfidenceStatic), {kMask, kMask, kMask, kMask});
  std::vector<float> logits(2 * kV, kNaN);  // the second row belongs to no candidate
  set_row(logits, 0, 0.0f, {{5, 3.0f}});
  StepRow head{1, 8, 6, 1, 1, 0};
  head.candidates_end = 1;
  backend->denoise_step(tf.f32({2, kV}, logits), step_rows({head}), 1, st);
  EXPECT_EQ(slot_values<int32_t>(st.tokens, 1), (Ints{5, kMask, kMask, kMask}));
  EXPECT_EQ(slot_values<int32_t>(st.trajectory, 1), (Ints{7, 0, 0, 0}));
  EXPECT_EQ(tf.read<int32_t>(st.masks_left)[1], 3);
  // A row needs logits for its candidates only: one row is enough here, none is too few.
  start(1, greedy(Strategy::LowConfidenceStatic), {kMask, kMask, kMask, kMask});
  EXPECT_THROW(backend->commit_step(step_rows({head}), 1, 0, st), Error);
  EXPECT_NO_THROW(backend->commit_step(step_rows({head}), 1, 1, st));
}

TEST_F(DecodeOps, SubBlockStepsSeeOnlyTheirWindow) {
  // A sub-block step (candidates [2, 4)): masks outside the window keep their place and need no
  // logits rows; the window's two read rows 0 and 1; the schedule commits the more confident.
  start(0, greedy(Strategy::LowConfidenceStatic), {kMask, kMask, kMask, kMask});
  std::vector<float> logits(2 * kV);
  set_row(logits, 0, 0.0f, {{3, 1.0f}});
  set_row(logits, 1, 0.0f, {{4, 4.0f}});
  StepRow window{0, 0, 0, 1, 0, 0};
  window.candidates_begin = 2;
  window.candidates_end = 4;
  backend->denoise_step(tf.f32({2, kV}, logits), step_rows({window}), 1, st);
  EXPECT_EQ(slot_values<int32_t>(st.tokens, 0), (Ints{kMask, kMask, kMask, 4}));
  EXPECT_EQ(tf.read<int32_t>(st.masks_left)[0], 3);
}

TEST_F(DecodeOps, TokenEditingRewritesConfidentChangedTokensBeforeTheCommits) {
  // Token editing (StepRow::edits_begin = 1, docs/decoding.md §4): block {2, 5, mask, 6}; position
  // 0 lies before edits_begin (a prompt token) and has no logits row; positions 1 and 3 (committed)
  // and 2 (masked) read rows 0, 1, 2 in position order. Position 1's sample is 3 at probability
  // above the threshold (edited), position 3's sample is 6 again (no change), the mask commits.
  SlotParams p = greedy(Strategy::LowConfidenceStatic);
  p.editing_threshold = 0.5f;
  start(2, p, {2, 5, kMask, 6});
  std::vector<float> logits(3 * kV);
  set_row(logits, 0, 0.0f, {{3, 6.0f}});
  set_row(logits, 1, 0.0f, {{1, 2.0f}});
  set_row(logits, 2, 0.0f, {{6, 6.0f}});
  StepRow row{2, 16, 9, 1, 0, 0};
  row.edits_begin = 1;
  backend->denoise_step(tf.f32({3, kV}, logits), step_rows({row}), 1, st);
  EXPECT_EQ(slot_values<int32_t>(st.tokens, 2), (Ints{2, 3, 1, 6}));
  EXPECT_EQ(slot_values<int32_t>(st.trajectory, 2), (Ints{0, 10, 10, 0}));
  EXPECT_EQ(tf.read<int32_t>(st.masks_left)[2], 0);
  EXPECT_EQ(tf.read<int32_t>(st.changes)[2], 2);  // one commit, one edit
  // A confident change below the threshold is no edit: a post step (no mask) that changes nothing.
  p.editing_threshold = 0.99f;
  start(2, p, {2, 5, 4, 6});
  backend->denoise_step(tf.f32({3, kV}, logits), step_rows({row}), 1, st);
  EXPECT_EQ(slot_values<int32_t>(st.tokens, 2), (Ints{2, 5, 4, 6}));
  EXPECT_EQ(tf.read<int32_t>(st.changes)[2], 0);
  // Three positions need three logits rows.
  EXPECT_THROW(backend->commit_step(step_rows({row}), 1, 2, st), Error);
}

// With the LM head split by vocabulary (tensor parallel), the ranks' parts of a chunk, summed over
// the ranks as their all-reduce does, commit what sample_positions on the whole rows commits; and
// every rank's columns placed and summed give the whole rows back.
TEST_F(DecodeOps, VocabPartsOfSplitLogitsCommitWhatTheWholeRowsDo) {
  const Ints block2 = {kMask, 3, kMask, kMask}, block0 = {kMask, kMask, 5, kMask};
  std::vector<StepRow> rows = {{2, 20, 3, 1, 0, 0}, {0, 8, 1, 2, 0, 3}};  // row 1's rows follow row 0's three
  std::mt19937 rng(9);
  const std::vector<float> logits = random_floats(rng, 6 * kV, -3.0f, 3.0f);
  const std::vector<std::pair<int, int>> slices = {{0, 3}, {3, kV}};  // [vocab0, end) per rank
  auto slice_of = [&](int r) {
    std::vector<float> out;
    for (int row = 0; row < 6; ++row) {
      out.insert(out.end(), logits.begin() + row * kV + slices[r].first, logits.begin() + row * kV + slices[r].second);
    }
    return out;
  };
  SlotParams top_k = seeded(Strategy::LowConfidenceStatic, 5);
  top_k.top_k = 3;
  for (const SlotParams& p : {greedy(Strategy::MarginStatic), seeded(Strategy::LowConfidenceStatic, 77), top_k,
                              seeded(Strategy::EntropyStatic, 3)}) {
    SCOPED_TRACE(str("temperature ", p.temperature, " top_k ", p.top_k, " strategy ", static_cast<int>(p.strategy)));
    auto commit = [&](bool split) {
      start(2, p, block2);
      start(0, p, block0);
      const Tensor rows_t = step_rows(rows);
      if (split) {
        std::vector<float> summed(2 * 6 * kVocabPartFloats, 0.0f);
        for (int r = 0; r < 2; ++r) {
          const int n = slices[r].second - slices[r].first;
          Tensor parts = tf.f32({2, 6, kVocabPartFloats}, std::vector<float>(2 * 6 * kVocabPartFloats, kNaN));
          backend->sample_vocab_parts(tf.f32({6, n}, slice_of(r)), slices[r].first, 0, rows_t, 2, st, parts, r);
          const std::vector<float> mine = tf.read<float>(parts);
          for (size_t i = 0; i < summed.size(); ++i) summed[i] += mine[i];
        }
        backend->combine_vocab_parts(tf.f32({2, 6, kVocabPartFloats}, summed), 0, rows_t, 2, st);
      } else {
        backend->sample_positions(tf.f32({6, kV}, logits), 0, rows_t, 2, st);
      }
      backend->commit_step(rows_t, 2, 6, st);
      return std::tuple{slot_values<int32_t>(st.tokens, 2), slot_values<int32_t>(st.tokens, 0),
                        slot_values<float>(st.logprobs, 0), slot_values<float>(st.entropies, 0)};
    };
    const auto [whole2, whole0, whole_logprobs, whole_entropies] = commit(false);
    const auto [split2, split0, split_logprobs, split_entropies] = commit(true);
    EXPECT_EQ(split2, whole2);
    EXPECT_EQ(split0, whole0);
    for (int j = 0; j < kB; ++j) {
      EXPECT_NEAR(split_logprobs[j], whole_logprobs[j], 1e-5) << "position " << j;
      EXPECT_NEAR(split_entropies[j], whole_entropies[j], 1e-5) << "position " << j;
    }
  }
  std::vector<float> assembled(6 * kV, 0.0f);
  for (int r = 0; r < 2; ++r) {
    Tensor whole = tf.f32({6, kV}, std::vector<float>(6 * kV, kNaN));
    backend->place_vocab_columns(tf.f32({6, slices[r].second - slices[r].first}, slice_of(r)), slices[r].first, whole);
    const std::vector<float> mine = tf.read<float>(whole);
    for (size_t i = 0; i < assembled.size(); ++i) assembled[i] += mine[i];
  }
  EXPECT_EQ(assembled, logits);
}
