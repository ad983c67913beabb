// The decode ops: gather_block_tokens (the block tokens of a step's slots, as forward input)
// and denoise_step (sample every masked position, apply the step's strategy, commit).
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend_impl.h"
#include "sampling/remasking.h"
#include "sampling/remasking_rules.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"

namespace jet::cpu {

void CpuBackend::gather_block_tokens(const Tensor& blocks, const Tensor& slots, Tensor& ids) {
  check_tensor(blocks, "gather_block_tokens", "blocks", DType::I32, {-1, -1});
  const int64_t num_slots = blocks.dim(0), B = blocks.dim(1);
  check_tensor(slots, "gather_block_tokens", "slots", DType::I32, {-1});
  const int64_t n = slots.dim(0);
  check_tensor(ids, "gather_block_tokens", "ids", DType::I32, {n * B});
  const int32_t* slot = slots.ptr<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    JET_CHECK(slot[i] >= 0 && slot[i] < num_slots, "gather_block_tokens: slot ", slot[i], " at row ", i,
              " is outside [0, ", num_slots, ")");
    std::memcpy(ids.ptr<int32_t>() + i * B, blocks.ptr<int32_t>() + slot[i] * B, B * sizeof(int32_t));
  }
}

namespace {

// Rejects rows that would make the parallel loops below read or write out of bounds.
void validate_rows(const std::vector<StepRow>& rows, const DecodeState& st, int V, int64_t logits_rows) {
  const int B = st.block_length;
  std::vector<bool> used(st.num_slots, false);
  for (size_t i = 0; i < rows.size(); ++i) {
    const int32_t slot = rows[i].slot;
    JET_CHECK(slot >= 0 && slot < st.num_slots, "denoise_step: row ", i, " has slot ", slot, " outside [0, ",
              st.num_slots, ")");
    JET_CHECK(!used[slot], "denoise_step: slot ", slot, " appears in two rows");
    used[slot] = true;
    const SlotParams& p = st.params.ptr<SlotParams>()[slot];
    JET_CHECK(p.mask_id >= 0 && p.mask_id < V, "denoise_step: slot ", slot, " has mask id ", p.mask_id,
              " outside the vocabulary of ", V);
    const int strategy = static_cast<int>(p.strategy);
    JET_CHECK(strategy >= 0 && strategy <= static_cast<int>(Strategy::EntropyBounded), "denoise_step: slot ", slot,
              " has an invalid strategy value ", strategy);
    const int32_t* block = st.tokens.ptr<int32_t>() + int64_t{slot} * B;
    const int64_t masked = std::count(block, block + B, p.mask_id);
    JET_CHECK(rows[i].logits_row0 >= 0 && rows[i].logits_row0 + masked <= logits_rows, "denoise_step: row ", i,
              " needs logits rows [", rows[i].logits_row0, ", ", rows[i].logits_row0 + masked,
              ") for its masked positions, got ", logits_rows, " rows");
  }
}

}  // namespace

void CpuBackend::denoise_step(const Tensor& logits, const Tensor& rows_bytes, int num_rows, DecodeState& st) {
  const int B = st.block_length, V = st.vocab;
  check_tensor(logits, "denoise_step", "logits", DType::F32, {-1, V});
  JET_CHECK(num_rows >= 0, "denoise_step: negative row count ", num_rows);
  JET_CHECK(rows_bytes.nbytes() >= num_rows * sizeof(StepRow), "denoise_step: the rows tensor holds ",
            rows_bytes.nbytes(), " bytes, fewer than ", num_rows, " StepRows");
  const std::vector<StepRow> rows(rows_bytes.ptr<StepRow>(), rows_bytes.ptr<StepRow>() + num_rows);
  validate_rows(rows, st, V, logits.dim(0));

  const SlotParams* params = st.params.ptr<SlotParams>();
  int32_t* tokens = st.tokens.ptr<int32_t>();

  // 1. Sample every masked position (independent of each other) from a copy of its logits row:
  // the k-th masked position of row i has logits row rows[i].logits_row0 + k.
  struct Masked {
    int i, j;
    int64_t logits_row;
  };
  std::vector<Masked> masked;
  for (int i = 0; i < num_rows; ++i) {
    const SlotParams& p = params[rows[i].slot];
    int64_t logits_row = rows[i].logits_row0;
    for (int j = 0; j < B; ++j) {
      if (tokens[int64_t{rows[i].slot} * B + j] == p.mask_id) masked.push_back({i, j, logits_row++});
    }
  }
  std::vector<PositionSample> samples(int64_t{num_rows} * B);
#pragma omp parallel num_threads(thread_count())
  {
    std::vector<float> row_copy(V);
#pragma omp for schedule(dynamic, 1)
    for (size_t m = 0; m < masked.size(); ++m) {
      const int i = masked[m].i, j = masked[m].j;
      const StepRow& r = rows[i];
      std::copy_n(logits.ptr<float>() + masked[m].logits_row * V, V, row_copy.data());
      const uint32_t* seen = st.seen.ptr<uint32_t>() + int64_t{r.slot} * st.seen_words;
      samples[int64_t{i} * B + j] =
          sample_position(row_copy.data(), V, params[r.slot], seen, r.position0 + j, r.global_step);
    }
  }

  // 2. Per row: the strategy picks among the masked positions, the picked ones are committed.
#pragma omp parallel for num_threads(thread_count())
  for (int i = 0; i < num_rows; ++i) {
    const StepRow& r = rows[i];
    const SlotParams& p = params[r.slot];
    const Strategy strategy = step_strategy(p, r);
    const int64_t base = int64_t{r.slot} * B;
    std::vector<PositionScore> scores;
    for (int j = 0; j < B; ++j) {
      if (tokens[base + j] != p.mask_id) continue;
      const PositionSample& s = samples[int64_t{i} * B + j];
      const double random = strategy == Strategy::Random
                                ? uniform(p.seed, static_cast<uint64_t>(r.position0 + j),
                                          static_cast<uint64_t>(r.global_step), kRandomStrategyLane)
                                : 0.0;
      scores.push_back({j, s.confidence, s.entropy, s.margin, random});
    }
    const std::vector<int> chosen = select_positions(strategy, scores, r.n_sched, r.is_last != 0, p, B);
    for (int j : chosen) {
      const PositionSample& s = samples[int64_t{i} * B + j];
      tokens[base + j] = s.token;
      st.trajectory.ptr<int32_t>()[base + j] = r.global_step + 1;
      st.logprobs.ptr<float>()[base + j] = s.logprob;
      st.entropies.ptr<float>()[base + j] = s.entropy;
    }
    st.masks_left.ptr<int32_t>()[r.slot] -= static_cast<int32_t>(chosen.size());
  }
}

}  // namespace jet::cpu
