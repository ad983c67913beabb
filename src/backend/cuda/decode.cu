// CudaBackend's denoise step (docs/decoding.md §3-4) in two ops. sample_positions: one thread
// block per logits row finds the (row, position) it belongs to (StepRow::logits_row0 + the
// positions with logits rows before it) and samples it (decode_sampler.cuh) into the decode
// state's samples; with the LM head split by vocabulary over tensor-parallel ranks,
// sample_vocab_parts reduces each row to this rank's part and combine_vocab_parts samples from
// every rank's parts instead (place_vocab_columns puts whole rows together when a draw needs
// them). commit_step: one thread block per row rewrites the committed positions its samples edit
// (token editing), gathers its block's masked candidates in position order with their ranking
// keys, ranks them with the step's strategy (sampling/remasking_rules.h, the rules the CPU backend
// uses too) and commits the chosen ones; any block length, its working space the decode state's
// ranking tensor. Nothing waits for the device: rows are validated there, and a bad row is skipped
// and reported by the next denoise-step call (see RowFault).
#include <cstdint>
#include <cub/block/block_scan.cuh>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/decode_sampler.cuh"
#include "backend/cuda/kernel_util.cuh"
#include "backend/vocab_part_checks.h"
#include "sampling/remasking_rules.h"
#include "sampling/rng.h"
#include "sampling/vocab_parts.h"

namespace jet::cuda {

namespace {

constexpr int kCommitThreads = 256;  // one thread block per row

// Why the commit kernel skipped a row; the host names it in the error.
enum class RowFault : uint64_t { None, SlotOutOfRange, RepeatedSlot, MaskIdOutOfRange, BadStrategy, LogitsOutOfRange };

// A fault as one 64-bit word (fault << 56 | row << 32 | slot), so a single store publishes it whole.
__device__ uint64_t encode_fault(RowFault fault, int row, int32_t slot) {
  return static_cast<uint64_t>(fault) << 56 | (static_cast<uint64_t>(row) & 0xFFFFFF) << 32 |
         static_cast<uint32_t>(slot);
}

// The fault word lives in mapped pinned host memory: the commit kernel writes it, the host reads
// it at the next denoise_step without copying anything. One word per process (a fault is rare and
// fatal to the request stream anyway).
struct FaultWord {
  volatile uint64_t* host;
  uint64_t* device;
};

const FaultWord& fault_word() {
  static const FaultWord word = [] {
    void* host = nullptr;
    void* device = nullptr;
    JET_CUDA_CHECK(cudaHostAlloc(&host, sizeof(uint64_t), cudaHostAllocMapped | cudaHostAllocPortable));
    JET_CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
    *static_cast<volatile uint64_t*>(host) = 0;
    return FaultWord{static_cast<volatile uint64_t*>(host), static_cast<uint64_t*>(device)};
  }();
  return word;
}

struct StepArgs {
  const float* logits;  // [logits_rows, V]: the step's logits rows first_row, first_row + 1, ...
  int64_t first_row;
  int64_t logits_rows;
  int64_t num_logits;  // the step's logits rows, all chunks together (commit)
  const StepRow* rows;
  int num_rows;
  int num_slots;
  int block_length;
  int vocab;
  int seen_words;
  const SlotParams* params;
  const uint32_t* seen;
  int32_t* tokens;
  int32_t* trajectory;
  float* logprobs;
  float* entropies;
  int32_t* masks_left;
  int32_t* changes;
  PositionSample* samples;  // [slots, B]
  int32_t* ranking;         // [slots, 6 B]
  uint64_t* fault;
};

// A sampling kernel's shared memory: the sampler's, or the scan that finds a row's position.
template <typename Sampler>
struct SampleShared {
  union {
    Sampler sampler;
    cub::BlockScan<int, kSampleThreads>::TempStorage scan;
  };
  int position;
};

// The masked block positions j in [candidates_begin(r, B), candidates_end(r, B)) are the row's
// candidates (StepRow).
__device__ int candidates_begin(const StepRow& r, int B) { return min(max(r.candidates_begin, 0), B); }
__device__ int candidates_end(const StepRow& r, int B) { return min(max(r.candidates_end, candidates_begin(r, B)), B); }

// The first block position that may have a logits row: candidates, then edit candidates.
__device__ int first_sampled(const StepRow& r, int B) {
  return min(candidates_begin(r, B), min(max(r.edits_begin, 0), B));
}

// The block position of the n-th position of row r with a logits row (has_logits_row; n from 0),
// or -1; every thread gets it.
template <int kThreads, typename Scan>
__device__ int nth_sampled_position(const int32_t* block, const StepRow& r, int B, int32_t mask_id, int64_t n,
                                    Scan& scan_storage, int& found) {
  if (threadIdx.x == 0) found = -1;
  int64_t before = 0;  // such positions in the chunks already scanned
  for (int chunk = first_sampled(r, B); chunk < B; chunk += kThreads) {
    const int j = chunk + threadIdx.x;
    const int sampled = j < B && has_logits_row(r, j, block[j] == mask_id);
    int prefix = 0, total = 0;
    cub::BlockScan<int, kThreads>(scan_storage).ExclusiveSum(sampled, prefix, total);
    if (sampled && before + prefix == n) found = j;
    before += total;
    __syncthreads();  // `found` is set, and the scan storage free again
    if (before > n) break;
  }
  return found;
}

// The row (index into a.rows) and block position that logits row k samples, or position -1
// (padding, a row whose slot is out of range, or one whose logits rows overlap the next: the
// commit kernel reports those); every thread gets it.
struct RowPosition {
  int row;
  int position;
};
template <int kThreads, typename Scan>
__device__ RowPosition logits_row_position(const StepArgs& a, int64_t k, Scan& scan_storage, int& found) {
  // Its row is the last one starting at or before it (rows list their logits rows in order).
  int i = -1;
  for (int lo = 0, hi = a.num_rows - 1; lo <= hi;) {
    const int mid = (lo + hi) / 2;
    if (a.rows[mid].logits_row0 <= k) {
      i = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (i < 0) return {i, -1};
  const StepRow& r = a.rows[i];
  if (r.slot < 0 || r.slot >= a.num_slots) return {i, -1};
  const int B = a.block_length;
  const int j = nth_sampled_position<kThreads>(a.tokens + int64_t{r.slot} * B, r, B, a.params[r.slot].mask_id,
                                               k - r.logits_row0, scan_storage, found);
  return {i, j};
}

// The repetition-penalty bitmap of a slot's seen ids, or null when its penalty is 1 (the
// samplers then skip the lookup).
__device__ const uint32_t* penalty_bitmap(const StepArgs& a, int32_t slot) {
  return a.params[slot].repetition_penalty != 1.0f ? a.seen + int64_t{slot} * a.seen_words : nullptr;
}

// Thread block b samples the position of logits row first_row + b (a masked or an edit
// candidate), if it has one.
__global__ void __launch_bounds__(kSampleThreads, 2) sample_step_positions(const StepArgs a) {
  await_previous_kernel();
  __shared__ SampleShared<SamplerShared> sm;
  const RowPosition at = logits_row_position<kSampleThreads>(a, a.first_row + blockIdx.x, sm.scan, sm.position);
  if (at.position < 0) return;
  const StepRow r = a.rows[at.row];
  const SlotParams& p = a.params[r.slot];
  const float* logits = a.logits + int64_t{blockIdx.x} * a.vocab;
  const PositionSample c = sample_position(logits, a.vocab, p, penalty_bitmap(a, r.slot), r.position0 + at.position,
                                           r.global_step, sm.sampler);
  if (threadIdx.x == 0) a.samples[int64_t{r.slot} * a.block_length + at.position] = c;
}

// Thread block b reduces logits row first_row + b, the ids [vocab0, vocab0 + slice) of this
// rank's LM head, to its VocabPart parts[b] (zeroed before), if the row has a position.
__global__ void __launch_bounds__(kSampleThreads, 2)
    sample_step_vocab_parts(const StepArgs a, int vocab0, int slice, VocabPart* parts) {
  await_previous_kernel();
  __shared__ SampleShared<VocabPartShared> sm;
  const RowPosition at = logits_row_position<kSampleThreads>(a, a.first_row + blockIdx.x, sm.scan, sm.position);
  if (at.position < 0) return;
  const StepRow r = a.rows[at.row];
  sample_vocab_part(a.logits + int64_t{blockIdx.x} * slice, slice, vocab0, a.vocab, a.params[r.slot],
                    penalty_bitmap(a, r.slot), r.position0 + at.position, r.global_step, sm.sampler,
                    parts + blockIdx.x);
}

constexpr int kCombineThreads = 128;  // they find the position; one thread combines

// Thread block b samples the position of logits row first_row + b from every rank's part of it
// (parts[rank * logits_rows + b]).
__global__ void __launch_bounds__(kCombineThreads)
    combine_step_vocab_parts(const StepArgs a, const VocabPart* parts, int ranks) {
  await_previous_kernel();
  __shared__ cub::BlockScan<int, kCombineThreads>::TempStorage scan;
  __shared__ int position;
  const RowPosition at = logits_row_position<kCombineThreads>(a, a.first_row + blockIdx.x, scan, position);
  if (at.position < 0 || threadIdx.x != 0) return;
  const StepRow r = a.rows[at.row];
  a.samples[int64_t{r.slot} * a.block_length + at.position] = combine_vocab_parts(
      parts + blockIdx.x, a.logits_rows, ranks, a.params[r.slot], a.vocab, r.position0 + at.position, r.global_step);
}

// The positions of row r with logits rows (has_logits_row).
__device__ int count_sampled(const int32_t* block, const StepRow& r, int B, int32_t mask_id) {
  int count = 0;
  for (int chunk = first_sampled(r, B); chunk < B; chunk += kCommitThreads) {
    const int j = chunk + threadIdx.x;
    count += __syncthreads_count(j < B && has_logits_row(r, j, block[j] == mask_id));
  }
  return count;
}

// What the CPU backend rejects up front; here the row's thread block finds it (all threads call
// this).
__device__ RowFault find_row_fault(const StepArgs& a, int i, const StepRow& r) {
  if (r.slot < 0 || r.slot >= a.num_slots) return RowFault::SlotOutOfRange;
  bool repeated = false;
  for (int k = threadIdx.x; k < i; k += kCommitThreads) repeated |= a.rows[k].slot == r.slot;
  if (__syncthreads_or(repeated)) return RowFault::RepeatedSlot;
  const SlotParams& p = a.params[r.slot];
  if (p.mask_id < 0 || p.mask_id >= a.vocab) return RowFault::MaskIdOutOfRange;
  const int strategy = static_cast<int>(p.strategy);
  if (strategy < 0 || strategy > static_cast<int>(Strategy::EntropyBounded)) return RowFault::BadStrategy;
  const int B = a.block_length;
  const int num_sampled = count_sampled(a.tokens + int64_t{r.slot} * B, r, B, p.mask_id);
  if (r.logits_row0 < 0 || int64_t{r.logits_row0} + num_sampled > a.num_logits) return RowFault::LogitsOutOfRange;
  if (i > 0) {  // its logits rows must follow the previous row's
    const StepRow& prev = a.rows[i - 1];
    if (prev.slot >= 0 && prev.slot < a.num_slots) {
      const int prev_sampled = count_sampled(a.tokens + int64_t{prev.slot} * B, prev, B, a.params[prev.slot].mask_id);
      if (r.logits_row0 < int64_t{prev.logits_row0} + prev_sampled) return RowFault::LogitsOutOfRange;
    }
  }
  return RowFault::None;
}

// Position `at` of the block state takes sample c at the step after global_step.
__device__ void record(const StepArgs& a, int64_t at, const PositionSample& c, int global_step) {
  a.tokens[at] = c.token;
  a.trajectory[at] = global_step + 1;
  a.logprobs[at] = c.logprob;
  a.entropies[at] = c.entropy;
}

struct CommitShared {
  cub::BlockScan<int, kCommitThreads>::TempStorage scan;
  int take;
};

// Thread block i ranks and commits row i. Its slot's ranking space holds, for the m-th masked
// position in position order: keys[m], where[m] (its block position) and rank[m]; and by rank r,
// the confidence and entropy of the position ranked r (what the dynamic rules read).
__global__ void __launch_bounds__(kCommitThreads) commit_selected_positions(const StepArgs a) {
  await_previous_kernel();
  __shared__ CommitShared sm;
  const int i = blockIdx.x;
  const StepRow r = a.rows[i];
  const RowFault fault = find_row_fault(a, i, r);
  if (fault != RowFault::None) {
    if (threadIdx.x == 0) *static_cast<volatile uint64_t*>(a.fault) = encode_fault(fault, i, r.slot);
    return;
  }
  const SlotParams& p = a.params[r.slot];
  const Strategy strategy = step_strategy(p, r);
  const int B = a.block_length;
  const int64_t base = int64_t{r.slot} * B;

  // Token editing, judged on the block before anything of this step is committed (edits keep a
  // position unmasked, so the candidates below are the same either way).
  int edits = 0;
  for (int chunk = max(r.edits_begin, 0); chunk < B; chunk += kCommitThreads) {
    const int j = chunk + threadIdx.x;
    const bool edit =
        j < B && a.tokens[base + j] != p.mask_id && edits_token(p, a.samples[base + j], a.tokens[base + j]);
    edits += __syncthreads_count(edit);
    if (edit) record(a, base + j, a.samples[base + j], r.global_step);
  }
  __syncthreads();
  int32_t* space = a.ranking + 6 * base;
  auto* keys = reinterpret_cast<double*>(space);
  int32_t* where = space + 2 * B;
  int32_t* rank = space + 3 * B;
  auto* ranked_confidence = reinterpret_cast<float*>(space + 4 * B);
  auto* ranked_entropy = reinterpret_cast<float*>(space + 5 * B);

  // The candidates in position order, with their keys.
  const int begin = candidates_begin(r, B), end = candidates_end(r, B);
  int gathered = 0;  // ends as the number of candidates
  for (int chunk = begin; chunk < end; chunk += kCommitThreads) {
    const int j = chunk + threadIdx.x;
    const int masked = j < end && a.tokens[base + j] == p.mask_id;
    int prefix = 0, total = 0;
    cub::BlockScan<int, kCommitThreads>(sm.scan).ExclusiveSum(masked, prefix, total);
    if (masked) {
      const PositionSample& c = a.samples[base + j];
      const double random = strategy == Strategy::Random
                                ? uniform(p.seed, static_cast<uint64_t>(r.position0 + j),
                                          static_cast<uint64_t>(r.global_step), kRandomStrategyLane)
                                : 0.0;
      keys[gathered + prefix] = ranking_key(strategy, j, c.confidence, c.entropy, c.margin, random, B);
      where[gathered + prefix] = j;
    }
    gathered += total;
    __syncthreads();  // the scan storage is free again; the keys are visible to the block
  }
  const int num_masked = gathered;

  // rank = how many masked positions order before this one (ties: the lower position); the last
  // step takes them all.
  int take = num_masked;
  if (!r.is_last && num_masked > 0) {
    for (int m = threadIdx.x; m < num_masked; m += kCommitThreads) {
      const double key = keys[m];
      int before = 0;
      for (int k = 0; k < num_masked; ++k) {
        const double other = keys[k];
        before += other < key || (other == key && k < m);
      }
      rank[m] = before;
      const PositionSample& c = a.samples[base + where[m]];
      ranked_confidence[before] = c.confidence;
      ranked_entropy[before] = c.entropy;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const int count = min(max(r.n_sched, 0), num_masked);
      sm.take = prefix_length(strategy, ranked_confidence, ranked_entropy, num_masked, count, p);
    }
    __syncthreads();
    take = min(sm.take, num_masked);
  }

  for (int m = threadIdx.x; m < num_masked; m += kCommitThreads) {
    if (!r.is_last && rank[m] >= take) continue;
    record(a, base + where[m], a.samples[base + where[m]], r.global_step);
  }
  if (threadIdx.x == 0) {
    a.masks_left[r.slot] -= take;
    a.changes[r.slot] = take + edits;
  }
}

std::string shape_string(const Tensor& t) {
  std::string s = "[";
  for (int d = 0; d < t.ndim; ++d) s += str(d ? ", " : "", t.shape[d]);
  return s + "]";
}

void check_rows(const char* op, const Tensor& rows, int num_rows) {
  JET_CHECK(num_rows >= 0, op, ": negative row count ", num_rows);
  JET_CHECK(rows.nbytes() >= num_rows * sizeof(StepRow), op, ": the rows tensor holds ", rows.nbytes(),
            " bytes, fewer than ", num_rows, " StepRows");
  JET_CHECK(num_rows == 0 || rows.data != nullptr, op, ": tensor rows has no data");
}

StepArgs step_args(const Tensor& rows, int num_rows, DecodeState& st) {
  StepArgs a{};
  a.rows = rows.ptr<StepRow>();
  a.num_rows = num_rows;
  a.num_slots = st.num_slots;
  a.block_length = st.block_length;
  a.vocab = st.vocab;
  a.seen_words = st.seen_words;
  a.params = st.params.ptr<SlotParams>();
  a.seen = st.seen.ptr<uint32_t>();
  a.tokens = st.tokens.ptr<int32_t>();
  a.trajectory = st.trajectory.ptr<int32_t>();
  a.logprobs = st.logprobs.ptr<float>();
  a.entropies = st.entropies.ptr<float>();
  a.masks_left = st.masks_left.ptr<int32_t>();
  a.changes = st.changes.ptr<int32_t>();
  a.samples = reinterpret_cast<PositionSample*>(st.samples.data);
  a.ranking = st.ranking.ptr<int32_t>();
  a.fault = fault_word().device;
  return a;
}

}  // namespace

// Throws the fault an earlier (finished) step recorded, and clears it (cuda_backend.h).
void throw_decode_fault() {
  const FaultWord& word = fault_word();
  const uint64_t fault = *word.host;
  if (fault == 0) return;
  *word.host = 0;
  const uint64_t row = (fault >> 32) & 0xFFFFFF;
  const int32_t slot = static_cast<int32_t>(static_cast<uint32_t>(fault));
  std::string problem;
  switch (static_cast<RowFault>(fault >> 56)) {
    case RowFault::SlotOutOfRange:
      problem = str("has slot ", slot, ", outside the decode state's slots");
      break;
    case RowFault::RepeatedSlot:
      problem = str("repeats slot ", slot, " of an earlier row");
      break;
    case RowFault::MaskIdOutOfRange:
      problem = str("has slot ", slot, ", whose mask id is outside the vocabulary");
      break;
    case RowFault::LogitsOutOfRange:
      problem = str("has slot ", slot, " and logits rows outside the logits");
      break;
    default:
      problem = str("has slot ", slot, ", whose strategy value is invalid");
      break;
  }
  throw Error(str("commit_step: row ", row, " of an earlier step ", problem, "; that row was skipped"));
}

void CudaBackend::sample_positions(const Tensor& logits, int64_t first_row, const Tensor& rows, int num_rows,
                                   DecodeState& st) {
  throw_decode_fault();
  const int V = st.vocab;
  JET_CHECK(logits.dtype == DType::F32 && logits.ndim == 2 && logits.dim(1) == V, "sample_positions: tensor logits is ",
            dtype_name(logits.dtype), " ", shape_string(logits), ", expected F32 [*, ", V, "]");
  JET_CHECK(first_row >= 0, "sample_positions: negative first logits row ", first_row);
  check_rows("sample_positions", rows, num_rows);
  if (num_rows == 0 || logits.dim(0) == 0) return;
  JET_CHECK(logits.data != nullptr, "sample_positions: tensor logits has no data");
  JET_CHECK(logits.dim(0) <= INT32_MAX, "sample_positions: ", logits.dim(0), " logits rows in one call");
  StepArgs a = step_args(rows, num_rows, st);
  a.logits = logits.ptr<float>();
  a.first_row = first_row;
  a.logits_rows = logits.dim(0);
  launch_kernel("sample_step_positions", sample_step_positions, static_cast<unsigned>(logits.dim(0)), kSampleThreads, 0,
                stream(), a);
}

void CudaBackend::sample_vocab_parts(const Tensor& logits, int vocab0, int64_t first_row, const Tensor& rows,
                                     int num_rows, DecodeState& st, Tensor& parts, int rank) {
  throw_decode_fault();
  check_sample_vocab_parts(logits, vocab0, st.vocab, first_row, parts, rank);
  const int64_t R = logits.dim(0), n = logits.dim(1);
  JET_CHECK(R <= INT32_MAX, "sample_vocab_parts: ", R, " logits rows in one call");
  check_rows("sample_vocab_parts", rows, num_rows);
  if (parts.numel() > 0) JET_CUDA_CHECK(cudaMemsetAsync(parts.data, 0, parts.nbytes(), stream()));
  if (num_rows == 0 || R == 0) return;
  StepArgs a = step_args(rows, num_rows, st);
  a.logits = logits.ptr<float>();
  a.first_row = first_row;
  a.logits_rows = R;
  launch_kernel("sample_step_vocab_parts", sample_step_vocab_parts, static_cast<unsigned>(R), kSampleThreads, 0,
                stream(), a, vocab0, static_cast<int>(n), parts.ptr<VocabPart>() + rank * R);
}

void CudaBackend::combine_vocab_parts(const Tensor& parts, int64_t first_row, const Tensor& rows, int num_rows,
                                      DecodeState& st) {
  throw_decode_fault();
  check_combine_vocab_parts(parts, first_row);
  const int64_t ranks = parts.dim(0), R = parts.dim(1);
  JET_CHECK(R <= INT32_MAX, "combine_vocab_parts: ", R, " logits rows in one call");
  check_rows("combine_vocab_parts", rows, num_rows);
  if (num_rows == 0 || R == 0) return;
  StepArgs a = step_args(rows, num_rows, st);
  a.first_row = first_row;
  a.logits_rows = R;
  launch_kernel("combine_step_vocab_parts", combine_step_vocab_parts, static_cast<unsigned>(R), kCombineThreads, 0,
                stream(), a, static_cast<const VocabPart*>(parts.ptr<VocabPart>()), static_cast<int>(ranks));
}

void CudaBackend::place_vocab_columns(const Tensor& logits, int vocab0, Tensor& whole) {
  check_place_vocab_columns(logits, vocab0, whole);
  const int64_t R = logits.dim(0), n = logits.dim(1), V = whole.dim(1);
  if (whole.numel() == 0) return;
  JET_CUDA_CHECK(cudaMemsetAsync(whole.data, 0, whole.nbytes(), stream()));
  if (n == 0 || R == 0) return;
  JET_CUDA_CHECK(cudaMemcpy2DAsync(whole.ptr<float>() + vocab0, V * sizeof(float), logits.data, n * sizeof(float),
                                   n * sizeof(float), R, cudaMemcpyDeviceToDevice, stream()));
}

void CudaBackend::commit_step(const Tensor& rows, int num_rows, int64_t num_logits, DecodeState& st) {
  throw_decode_fault();
  check_rows("commit_step", rows, num_rows);
  if (num_rows == 0) return;
  StepArgs a = step_args(rows, num_rows, st);
  a.num_logits = num_logits;
  launch_kernel("commit_selected_positions", commit_selected_positions, static_cast<unsigned>(num_rows), kCommitThreads,
                0, stream(), a);
}

}  // namespace jet::cuda
