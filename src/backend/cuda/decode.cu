// CudaBackend::denoise_step (docs/decoding.md §3-4) in two kernels: one thread block samples each
// masked (row, position) from its logits row (StepRow::logits_row0 + the masked positions before
// it) into a small candidate array (decode_sampler.cuh), then one warp per row ranks its block's
// candidates with the step's strategy (sampling/remasking_rules.h, the rules the CPU backend uses
// too) and commits the chosen ones. Nothing waits for the device: rows are validated there, and a
// bad row is skipped and reported by the next denoise_step call (see RowFault).
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/decode_sampler.cuh"
#include "backend/cuda/kernel_util.cuh"
#include "sampling/remasking_rules.h"
#include "sampling/rng.h"

namespace jet::cuda {

namespace {

constexpr unsigned kFullWarp = 0xFFFFFFFFu;
constexpr int kMaxBlockLength = 64;  // the commit kernel's warp holds a row's block, two positions per lane
constexpr int kPositionsPerLane = kMaxBlockLength / 32;
constexpr int kCommitWarps = 4;  // rows per thread block of the commit kernel

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
  const float* logits;  // [logits_rows, V]: masked positions only (StepRow::logits_row0)
  int64_t logits_rows;
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
  Candidate* candidates;  // [num_rows * B], written for masked positions only
  uint64_t* fault;
};

// The logits row of masked position j of a row: logits_row0 + the masked positions before j.
__device__ int64_t logits_row(const StepArgs& a, const StepRow& r, const SlotParams& p, int j) {
  const int32_t* block = a.tokens + int64_t{r.slot} * a.block_length;
  int before = 0;
  for (int k = 0; k < j; ++k) before += block[k] == p.mask_id;
  return int64_t{r.logits_row0} + before;
}

// Block (i, j) = blockIdx.x = i * B + j samples position j of row i when it is masked.
__global__ void __launch_bounds__(kSampleThreads, 2) sample_masked_positions(const StepArgs a) {
  await_previous_kernel();
  __shared__ SamplerShared sm;
  const int B = a.block_length;
  const int i = blockIdx.x / B, j = blockIdx.x % B;
  const StepRow r = a.rows[i];
  if (r.slot < 0 || r.slot >= a.num_slots) return;  // the commit kernel reports it
  const SlotParams& p = a.params[r.slot];
  if (a.tokens[int64_t{r.slot} * B + j] != p.mask_id) return;
  const int64_t row = logits_row(a, r, p, j);
  if (r.logits_row0 < 0 || row >= a.logits_rows) return;  // the commit kernel reports it
  const uint32_t* seen = p.repetition_penalty != 1.0f ? a.seen + int64_t{r.slot} * a.seen_words : nullptr;
  const float* logits = a.logits + row * a.vocab;
  const Candidate c = sample_position(logits, a.vocab, p, seen, r.position0 + j, r.global_step, sm);
  if (threadIdx.x == 0) a.candidates[blockIdx.x] = c;
}

// What the CPU backend rejects up front; here the row's warp finds it (all lanes call this).
__device__ RowFault find_row_fault(const StepArgs& a, int i, const StepRow& r, int lane) {
  if (r.slot < 0 || r.slot >= a.num_slots) return RowFault::SlotOutOfRange;
  bool repeated = false;
  for (int k = lane; k < i; k += 32) repeated |= a.rows[k].slot == r.slot;
  if (__any_sync(kFullWarp, repeated)) return RowFault::RepeatedSlot;
  const SlotParams& p = a.params[r.slot];
  if (p.mask_id < 0 || p.mask_id >= a.vocab) return RowFault::MaskIdOutOfRange;
  const int strategy = static_cast<int>(p.strategy);
  if (strategy < 0 || strategy > static_cast<int>(Strategy::EntropyBounded)) return RowFault::BadStrategy;
  int num_masked = 0;
  for (int h = 0; h < kPositionsPerLane; ++h) {
    const int j = lane + 32 * h;
    num_masked += __popc(__ballot_sync(kFullWarp, j < a.block_length &&
                                                      a.tokens[int64_t{r.slot} * a.block_length + j] == p.mask_id));
  }
  if (r.logits_row0 < 0 || int64_t{r.logits_row0} + num_masked > a.logits_rows) return RowFault::LogitsOutOfRange;
  return RowFault::None;
}

// The confidences and entropies of one row's masked positions, by rank.
struct RankedScores {
  float confidence[kMaxBlockLength];
  float entropy[kMaxBlockLength];
};

// Warp w of block b handles row b * kCommitWarps + w; lane l holds block positions l and l + 32.
__global__ void __launch_bounds__(kCommitWarps * 32) commit_selected_positions(const StepArgs a) {
  await_previous_kernel();
  __shared__ RankedScores ranked_scores[kCommitWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int i = blockIdx.x * kCommitWarps + warp;
  if (i >= a.num_rows) return;
  const StepRow r = a.rows[i];
  const RowFault fault = find_row_fault(a, i, r, lane);
  if (fault != RowFault::None) {
    if (lane == 0) *static_cast<volatile uint64_t*>(a.fault) = encode_fault(fault, i, r.slot);
    return;
  }
  const SlotParams& p = a.params[r.slot];
  const Strategy strategy = step_strategy(p, r);
  const int B = a.block_length;
  const int64_t base = int64_t{r.slot} * B;

  bool masked[kPositionsPerLane];
  Candidate candidate[kPositionsPerLane];
  double key[kPositionsPerLane];
  uint64_t masked_bits = 0;
#pragma unroll
  for (int h = 0; h < kPositionsPerLane; ++h) {
    const int j = lane + 32 * h;
    masked[h] = j < B && a.tokens[base + j] == p.mask_id;
    candidate[h] = masked[h] ? a.candidates[int64_t{i} * B + j] : Candidate{};
    const double random = masked[h] && strategy == Strategy::Random
                              ? uniform(p.seed, static_cast<uint64_t>(r.position0 + j),
                                        static_cast<uint64_t>(r.global_step), kRandomStrategyLane)
                              : 0.0;
    key[h] = ranking_key(strategy, j, candidate[h].confidence, candidate[h].entropy, candidate[h].margin, random, B);
    masked_bits |= static_cast<uint64_t>(__ballot_sync(kFullWarp, masked[h])) << (32 * h);
  }
  const int num_masked = __popcll(masked_bits);

  // rank = how many masked positions order before this one; the last step takes them all.
  int rank[kPositionsPerLane] = {};
  int take = num_masked;
  if (!r.is_last && num_masked > 0) {
    for (int k = 0; k < B; ++k) {
      const double other = __shfl_sync(kFullWarp, k < 32 ? key[0] : key[kPositionsPerLane - 1], k % 32);
      if (((masked_bits >> k) & 1) == 0) continue;
#pragma unroll
      for (int h = 0; h < kPositionsPerLane; ++h) {
        const int j = lane + 32 * h;
        rank[h] += other < key[h] || (other == key[h] && k < j);
      }
    }
    RankedScores& ranked = ranked_scores[warp];
#pragma unroll
    for (int h = 0; h < kPositionsPerLane; ++h) {
      if (!masked[h]) continue;
      ranked.confidence[rank[h]] = candidate[h].confidence;
      ranked.entropy[rank[h]] = candidate[h].entropy;
    }
    __syncwarp();
    const int count = min(max(r.n_sched, 0), num_masked);
    if (lane == 0) take = prefix_length(strategy, ranked.confidence, ranked.entropy, num_masked, count, p);
    take = __shfl_sync(kFullWarp, take, 0);
  }

  int committed = 0;
#pragma unroll
  for (int h = 0; h < kPositionsPerLane; ++h) {
    const bool chosen = masked[h] && rank[h] < take;
    if (chosen) {
      const int64_t at = base + lane + 32 * h;
      a.tokens[at] = candidate[h].token;
      a.trajectory[at] = r.global_step + 1;
      a.logprobs[at] = candidate[h].logprob;
      a.entropies[at] = candidate[h].entropy;
    }
    committed += __popc(__ballot_sync(kFullWarp, chosen));
  }
  if (lane == 0) a.masks_left[r.slot] -= committed;
}

std::string shape_string(const Tensor& t) {
  std::string s = "[";
  for (int d = 0; d < t.ndim; ++d) s += str(d ? ", " : "", t.shape[d]);
  return s + "]";
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
    case RowFault::SlotOutOfRange: problem = str("has slot ", slot, ", outside the decode state's slots"); break;
    case RowFault::RepeatedSlot: problem = str("repeats slot ", slot, " of an earlier row"); break;
    case RowFault::MaskIdOutOfRange: problem = str("has slot ", slot, ", whose mask id is outside the vocabulary"); break;
    case RowFault::LogitsOutOfRange: problem = str("has slot ", slot, " and logits rows outside the logits"); break;
    default: problem = str("has slot ", slot, ", whose strategy value is invalid"); break;
  }
  throw Error(str("denoise_step: row ", row, " of an earlier step ", problem, "; that row was skipped"));
}

int CudaBackend::max_block_length() const { return kMaxBlockLength; }

void CudaBackend::denoise_step(const Tensor& logits, const Tensor& rows, int num_rows, DecodeState& st) {
  throw_decode_fault();
  const int B = st.block_length, V = st.vocab;
  JET_CHECK(B >= 1 && B <= max_block_length(), "denoise_step: block length ", B, " is outside [1, ",
            max_block_length(), "], the CUDA backend's limit");
  JET_CHECK(logits.dtype == DType::F32 && logits.ndim == 2 && logits.dim(1) == V, "denoise_step: tensor logits is ",
            dtype_name(logits.dtype), " ", shape_string(logits), ", expected F32 [*, ", V, "]");
  // The rows and the masks are in device memory: their logits rows are checked there (RowFault).
  JET_CHECK(num_rows >= 0, "denoise_step: negative row count ", num_rows);
  JET_CHECK(rows.nbytes() >= num_rows * sizeof(StepRow), "denoise_step: the rows tensor holds ", rows.nbytes(),
            " bytes, fewer than ", num_rows, " StepRows");
  if (num_rows == 0) return;
  JET_CHECK(logits.data != nullptr && rows.data != nullptr, "denoise_step: tensor logits or rows has no data");

  // The candidates live in the GEMM workspace, idle after the LM head: an allocation inside the
  // step would be a graph node between two kernels, where a programmatic launch cannot follow
  // (the capture fails, kernel_util.cuh). Only more than a million positions need their own.
  const size_t positions = static_cast<size_t>(num_rows) * B;
  const bool own_candidates = positions * sizeof(Candidate) > gemm_workspace_bytes();
  auto* candidates = static_cast<Candidate*>(gemm_workspace());
  if (own_candidates) {
    JET_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&candidates), positions * sizeof(Candidate), stream()));
  }
  const StepArgs args{logits.ptr<float>(),         logits.dim(0),                rows.ptr<StepRow>(),
                      num_rows,                    st.num_slots,                 B,
                      V,                           st.seen_words,                st.params.ptr<SlotParams>(),
                      st.seen.ptr<uint32_t>(),     st.tokens.ptr<int32_t>(),     st.trajectory.ptr<int32_t>(),
                      st.logprobs.ptr<float>(),    st.entropies.ptr<float>(),    st.masks_left.ptr<int32_t>(),
                      candidates,                  fault_word().device};
  launch_kernel("sample_masked_positions", sample_masked_positions, static_cast<unsigned>(positions), kSampleThreads, 0,
                stream(), args);
  const unsigned commit_blocks = static_cast<unsigned>((num_rows + kCommitWarps - 1) / kCommitWarps);
  launch_kernel("commit_selected_positions", commit_selected_positions, commit_blocks, kCommitWarps * 32, 0, stream(),
                args);
  if (own_candidates) JET_CUDA_CHECK(cudaFreeAsync(candidates, stream()));
}

}  // namespace jet::cuda
