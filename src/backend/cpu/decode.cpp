// The decode ops: gather_block_tokens (the block tokens of a step's slots, as forward input)
// and a denoise step: sample_positions (sample the positions of a chunk of logits rows: masked
// candidates, and edit candidates under token editing) and commit_step (apply the edits, then
// each row's strategy to its samples, commit); with the LM head split by vocabulary over
// tensor-parallel ranks, sample_vocab_parts / combine_vocab_parts in place of sample_positions,
// and place_vocab_columns for the draws that need whole rows.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend_impl.h"
#include "sampling/remasking.h"
#include "sampling/remasking_rules.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "backend/vocab_part_checks.h"
#include "sampling/vocab_parts.h"

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

// The masked block positions j in [candidates_begin(r, B), candidates_end(r, B)) are the row's
// candidates (StepRow).
int candidates_begin(const StepRow& r, int B) { return std::clamp(r.candidates_begin, 0, B); }
int candidates_end(const StepRow& r, int B) { return std::clamp(r.candidates_end, candidates_begin(r, B), B); }

// Rejects rows that would make the loops below read or write out of bounds, or that break
// StepRow's contract (each row's logits rows follow the previous row's). With num_logits >= 0,
// every position with a logits row (has_logits_row) must also have one of the step's rows.
void validate_rows(const char* op, const std::vector<StepRow>& rows, const DecodeState& st, int64_t num_logits) {
  const int B = st.block_length, V = st.vocab;
  std::vector<bool> used(st.num_slots, false);
  int64_t next_free = 0;  // the first logits row the previous rows leave
  for (size_t i = 0; i < rows.size(); ++i) {
    const int32_t slot = rows[i].slot;
    JET_CHECK(slot >= 0 && slot < st.num_slots, op, ": row ", i, " has slot ", slot, " outside [0, ", st.num_slots,
              ")");
    JET_CHECK(!used[slot], op, ": slot ", slot, " appears in two rows");
    used[slot] = true;
    const SlotParams& p = st.params.ptr<SlotParams>()[slot];
    JET_CHECK(p.mask_id >= 0 && p.mask_id < V, op, ": slot ", slot, " has mask id ", p.mask_id,
              " outside the vocabulary of ", V);
    const int strategy = static_cast<int>(p.strategy);
    JET_CHECK(strategy >= 0 && strategy <= static_cast<int>(Strategy::EntropyBounded), op, ": slot ", slot,
              " has an invalid strategy value ", strategy);
    const int32_t* block = st.tokens.ptr<int32_t>() + int64_t{slot} * B;
    int64_t with_rows = 0;
    for (int j = 0; j < B; ++j) with_rows += has_logits_row(rows[i], j, block[j] == p.mask_id);
    JET_CHECK(rows[i].logits_row0 >= next_free, op, ": row ", i, " starts at logits row ", rows[i].logits_row0,
              ", before row ", next_free, " where the previous rows' positions end");
    next_free = rows[i].logits_row0 + with_rows;
    JET_CHECK(num_logits < 0 || next_free <= num_logits, op, ": row ", i, " needs logits rows [", rows[i].logits_row0,
              ", ", next_free, ") for its positions, got ", num_logits, " rows");
  }
}

// Position `at` of the block state takes sample s at the step after global_step.
void record(DecodeState& st, int64_t at, const PositionSample& s, int32_t global_step) {
  st.tokens.ptr<int32_t>()[at] = s.token;
  st.trajectory.ptr<int32_t>()[at] = global_step + 1;
  st.logprobs.ptr<float>()[at] = s.logprob;
  st.entropies.ptr<float>()[at] = s.entropy;
}

std::vector<StepRow> step_rows(const char* op, const Tensor& rows_bytes, int num_rows) {
  JET_CHECK(num_rows >= 0, op, ": negative row count ", num_rows);
  JET_CHECK(rows_bytes.nbytes() >= num_rows * sizeof(StepRow), op, ": the rows tensor holds ", rows_bytes.nbytes(),
            " bytes, fewer than ", num_rows, " StepRows");
  return {rows_bytes.ptr<StepRow>(), rows_bytes.ptr<StepRow>() + num_rows};
}

// A position with a logits row in a chunk: block position j of row i, logits row logits_row.
struct Sampled {
  int i, j;
  int64_t logits_row;
};

// The positions whose logits rows are first_row, ..., end - 1: the k-th position of row i with a
// logits row has logits row rows[i].logits_row0 + k.
std::vector<Sampled> chunk_positions(const std::vector<StepRow>& rows, const DecodeState& st, int64_t first_row,
                                     int64_t end) {
  const int B = st.block_length;
  const SlotParams* params = st.params.ptr<SlotParams>();
  const int32_t* tokens = st.tokens.ptr<int32_t>();
  std::vector<Sampled> sampled;
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
    const SlotParams& p = params[rows[i].slot];
    int64_t logits_row = rows[i].logits_row0;
    for (int j = 0; j < B && logits_row < end; ++j) {
      if (!has_logits_row(rows[i], j, tokens[int64_t{rows[i].slot} * B + j] == p.mask_id)) continue;
      if (logits_row >= first_row) sampled.push_back({i, j, logits_row});
      ++logits_row;
    }
  }
  return sampled;
}

}  // namespace

void CpuBackend::sample_positions(const Tensor& logits, int64_t first_row, const Tensor& rows_bytes, int num_rows,
                                  DecodeState& st) {
  const int B = st.block_length, V = st.vocab;
  check_tensor(logits, "sample_positions", "logits", DType::F32, {-1, V});
  JET_CHECK(first_row >= 0, "sample_positions: negative first logits row ", first_row);
  const std::vector<StepRow> rows = step_rows("sample_positions", rows_bytes, num_rows);
  validate_rows("sample_positions", rows, st, -1);
  const SlotParams* params = st.params.ptr<SlotParams>();
  auto* samples = reinterpret_cast<PositionSample*>(st.samples.data);
  const std::vector<Sampled> sampled = chunk_positions(rows, st, first_row, first_row + logits.dim(0));
#pragma omp parallel num_threads(thread_count())
  {
    std::vector<float> row_copy(V);
#pragma omp for schedule(dynamic, 1)
    for (size_t m = 0; m < sampled.size(); ++m) {
      const StepRow& r = rows[sampled[m].i];
      const int j = sampled[m].j;
      std::copy_n(logits.ptr<float>() + (sampled[m].logits_row - first_row) * V, V, row_copy.data());
      const uint32_t* seen = st.seen.ptr<uint32_t>() + int64_t{r.slot} * st.seen_words;
      samples[int64_t{r.slot} * B + j] =
          sample_position(row_copy.data(), V, params[r.slot], seen, r.position0 + j, r.global_step);
    }
  }
}

void CpuBackend::sample_vocab_parts(const Tensor& logits, int vocab0, int64_t first_row, const Tensor& rows_bytes,
                                    int num_rows, DecodeState& st, Tensor& parts, int rank) {
  const int V = st.vocab;
  check_sample_vocab_parts(logits, vocab0, V, first_row, parts, rank);
  const int64_t R = logits.dim(0), n = logits.dim(1);
  const std::vector<StepRow> rows = step_rows("sample_vocab_parts", rows_bytes, num_rows);
  validate_rows("sample_vocab_parts", rows, st, -1);
  const SlotParams* params = st.params.ptr<SlotParams>();
  auto* out = parts.ptr<VocabPart>();
  std::fill_n(parts.ptr<float>(), parts.numel(), 0.0f);
  const std::vector<Sampled> sampled = chunk_positions(rows, st, first_row, first_row + R);
#pragma omp parallel num_threads(thread_count())
  {
    std::vector<float> row_copy(n);
#pragma omp for schedule(dynamic, 1)
    for (size_t m = 0; m < sampled.size(); ++m) {
      const StepRow& r = rows[sampled[m].i];
      const int64_t row = sampled[m].logits_row - first_row;
      std::copy_n(logits.ptr<float>() + row * n, n, row_copy.data());
      const uint32_t* seen = st.seen.ptr<uint32_t>() + int64_t{r.slot} * st.seen_words;
      out[rank * R + row] = sample_vocab_part(row_copy.data(), static_cast<int>(n), vocab0, V, params[r.slot], seen,
                                              r.position0 + sampled[m].j, r.global_step);
    }
  }
}

void CpuBackend::combine_vocab_parts(const Tensor& parts, int64_t first_row, const Tensor& rows_bytes, int num_rows,
                                     DecodeState& st) {
  const int B = st.block_length;
  check_combine_vocab_parts(parts, first_row);
  const int64_t ranks = parts.dim(0), R = parts.dim(1);
  const std::vector<StepRow> rows = step_rows("combine_vocab_parts", rows_bytes, num_rows);
  validate_rows("combine_vocab_parts", rows, st, -1);
  const SlotParams* params = st.params.ptr<SlotParams>();
  const auto* in = parts.ptr<VocabPart>();
  auto* samples = reinterpret_cast<PositionSample*>(st.samples.data);
  const std::vector<Sampled> sampled = chunk_positions(rows, st, first_row, first_row + R);
#pragma omp parallel for num_threads(thread_count())
  for (size_t m = 0; m < sampled.size(); ++m) {
    const StepRow& r = rows[sampled[m].i];
    const int64_t row = sampled[m].logits_row - first_row;
    samples[int64_t{r.slot} * B + sampled[m].j] = jet::combine_vocab_parts(
        in + row, R, static_cast<int>(ranks), params[r.slot], st.vocab, r.position0 + sampled[m].j, r.global_step);
  }
}

void CpuBackend::place_vocab_columns(const Tensor& logits, int vocab0, Tensor& whole) {
  check_place_vocab_columns(logits, vocab0, whole);
  const int64_t R = logits.dim(0), n = logits.dim(1), V = whole.dim(1);
  std::fill_n(whole.ptr<float>(), whole.numel(), 0.0f);
  for (int64_t row = 0; row < R; ++row) {
    std::copy_n(logits.ptr<float>() + row * n, n, whole.ptr<float>() + row * V + vocab0);
  }
}

void CpuBackend::commit_step(const Tensor& rows_bytes, int num_rows, int64_t num_logits, DecodeState& st) {
  const int B = st.block_length;
  const std::vector<StepRow> rows = step_rows("commit_step", rows_bytes, num_rows);
  validate_rows("commit_step", rows, st, num_logits);
  const SlotParams* params = st.params.ptr<SlotParams>();
  int32_t* tokens = st.tokens.ptr<int32_t>();
  const auto* samples = reinterpret_cast<const PositionSample*>(st.samples.data);

  // Per row: the committed positions its samples edit are rewritten (judged before anything of
  // this step is committed), then the strategy picks among the candidates, the picked ones are
  // committed.
#pragma omp parallel for num_threads(thread_count())
  for (int i = 0; i < num_rows; ++i) {
    const StepRow& r = rows[i];
    const SlotParams& p = params[r.slot];
    const Strategy strategy = step_strategy(p, r);
    const int64_t base = int64_t{r.slot} * B;
    int32_t edits = 0;
    for (int j = std::max(r.edits_begin, 0); j < B; ++j) {
      if (tokens[base + j] == p.mask_id || !edits_token(p, samples[base + j], tokens[base + j])) continue;
      record(st, base + j, samples[base + j], r.global_step);
      ++edits;
    }
    std::vector<PositionScore> scores;
    for (int j = candidates_begin(r, B); j < candidates_end(r, B); ++j) {
      if (tokens[base + j] != p.mask_id) continue;
      const PositionSample& s = samples[base + j];
      const double random = strategy == Strategy::Random
                                ? uniform(p.seed, static_cast<uint64_t>(r.position0 + j),
                                          static_cast<uint64_t>(r.global_step), kRandomStrategyLane)
                                : 0.0;
      scores.push_back({j, s.confidence, s.entropy, s.margin, random});
    }
    const std::vector<int> chosen = select_positions(strategy, scores, r.n_sched, r.is_last != 0, p, B);
    for (int j : chosen) record(st, base + j, samples[base + j], r.global_step);
    st.masks_left.ptr<int32_t>()[r.slot] -= static_cast<int32_t>(chosen.size());
    st.changes.ptr<int32_t>()[r.slot] = static_cast<int32_t>(chosen.size()) + edits;
  }
}

}  // namespace jet::cpu
