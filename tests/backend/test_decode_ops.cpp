// The decode ops end to end on crafted batches: gather_block_tokens, and denoise_step sampling,
// selecting and committing per row (row order differs from slot order on purpose).
#include <gtest/gtest.h>

#include <cmath>

#include "backend_test_util.h"
#include "sampling/rng.h"

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
  static void set_row(std::vector<float>& logits, int row, float base, std::initializer_list<std::pair<int, float>> ids) {
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

  std::vector<float> logits(2 * kB * kV);
  // Row 0 = slot 2. Position 0 is not masked: its NaN row must never be read into a commit.
  std::fill_n(logits.begin(), kV, kNaN);
  set_row(logits, 1, 0.0f, {{1, 5.0f}});                   // c = e^5 / (e^5 + 6)
  set_row(logits, 2, 0.0f, {{2, 2.0f}});                   // c = e^2 / (e^2 + 6)
  set_row(logits, 3, 0.0f, {{4, 3.0f}, {kMask, 100.0f}});  // the mask logit is ignored
  // Row 1 = slot 0.
  set_row(logits, 4, 0.0f, {{0, 2.0f}, {1, 1.5f}});  // penalised token 0 drops to 1.0: token 1
  set_row(logits, 5, 0.0f, {{6, 1.0f}});
  set_row(logits, 6, 0.0f, {{5, 1.0f}});
  set_row(logits, 7, 0.0f, {{2, 1.0f}, {kMask, 9.0f}});

  const Tensor rows = step_rows({{2, 12, 5, 1, 0}, {0, 0, 0, 2, 1}});
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
  SlotParams p;
  p.temperature = 1.0f;
  p.strategy = Strategy::Random;
  p.mask_id = kMask;
  p.seed = 2024;
  std::mt19937 rng(1);
  const std::vector<float> logits = random_floats(rng, 2 * kB * kV, -2.0f, 2.0f);
  const StepRow row{1, 40, 9, 1, 0};

  auto run = [&](bool with_neighbour) {
    start(1, p, Ints(kB, kMask));
    start(0, p, Ints(kB, kMask));
    std::vector<float> l = logits;
    std::vector<StepRow> rows = {row};
    if (with_neighbour) {  // slot 0 first, so slot 1 reads the second logits rows
      rows.insert(rows.begin(), StepRow{0, 0, 0, 2, 0});
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

TEST_F(DecodeOps, DenoiseStepRejectsBadRows) {
  start(0, greedy(Strategy::Sequential), Ints(kB, kMask));
  const Tensor logits = tf.f32({2 * kB, kV}, std::vector<float>(2 * kB * kV, 0.0f));
  EXPECT_THROW(backend->denoise_step(logits, step_rows({{5, 0, 0, 1, 0}}), 1, st), Error);  // no slot 5
  EXPECT_THROW(backend->denoise_step(logits, step_rows({{0, 0, 0, 1, 0}, {0, 0, 0, 1, 0}}), 2, st), Error);
  EXPECT_THROW(backend->denoise_step(logits, step_rows({{0, 0, 0, 1, 0}}), 3, st), Error);  // too few logits
}
