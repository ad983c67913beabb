// ModelRunner: turns scheduled sequences into forwards. Builds the batch layout (positions,
// cached lengths, page tables), runs the model, runs the backend's denoise step on the logits of
// the still-masked positions, and keeps a host copy of the block state: blocks start there (it
// says which positions are masked), the whole state goes to the backend in one copy before a
// forward that needs it and comes back in one copy after a denoise step (masks left, finished
// blocks' records). Per-forward buffers are reused, never reallocated once sizes stop growing.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "engine/model_ranks.h"
#include "engine/sequence.h"
#include "model/model.h"

namespace jet {

// What a denoise step left of one sequence's block.
struct StepResult {
  int32_t masks_left = 0;
  int32_t changes = 0;  // positions the step committed or edited
};

// What a ModelRunner has done, kept by its owner across runners (the engine rebuilds its runner
// with the cache).
struct RunnerStats {
  // Seconds the device sat idle between forwards waiting for the host (scheduling, layouts,
  // copies): from a denoise step's download to the next forward's launch.
  double idle_seconds = 0;
  // Forwards launched: prefills and denoise forwards, each part of a split step counted.
  int64_t forwards = 0;
};

class ModelRunner {
 public:
  // record_forwards: let the backend record the denoise forward and replay it (CUDA graphs) for
  // dense models; false runs every op eagerly. `stats` accumulates what the runner does.
  // A forward holds at most max_batched_tokens tokens (a sequence's entry alone may hold more):
  // a step's sequences are split into as many forwards as that takes.
  // Every forward and decode step runs on each of `ranks`' tensor-parallel ranks, which hold a
  // cache and decode state each and commit the same tokens; the host copy of the block state is
  // one, read back from rank 0.
  ModelRunner(ModelRanks& ranks, int block_length, int num_slots, int num_pages, int page_size, int max_batched_tokens,
              bool record_forwards, RunnerStats& stats);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // The logits rows a denoise step computes and samples at a time: at most 512 MiB of logits, and
  // no more rows than a forward's tokens (max_batched_tokens).
  static int64_t logits_chunk_rows(int vocab, int max_batched_tokens);

  // Gives a newly admitted sequence its slot: its sampling parameters and, when it penalises
  // repetition, its prompt as the set of seen ids.
  void begin_sequence(const Sequence& seq);
  // Adds a sequence's newly committed tokens to its seen ids (when it penalises repetition).
  void mark_committed(const Sequence& seq, const std::vector<int32_t>& tokens);
  // Starts a block in `slot`: its B tokens (mask ids where masked); records zeroed. The block the
  // slot held becomes its saved block (the tokens a later forward writes the K/V of).
  void start_block(int slot, const std::vector<int32_t>& tokens, int32_t mask_id);

  // Writes the K/V of each sequence's prompt positions [num_cached, prefill_end).
  void prefill(const std::vector<Sequence*>& seqs);
  // One step: `denoising` sequences' current blocks get a sampling + remasking step, and
  // `saving` sequences' previous blocks (committed, at block_start - B) write their final K/V.
  // A sequence may be in both: its finished block is saved in the same forward as its next
  // block's first denoising step, which attends it (docs/decoding.md §1; one entry of 2B tokens
  // for block-causal models), or, for a sequence whose head_pending is set, as its head step
  // (an entry of the saved block alone). Under token editing a block with no mask left takes
  // further steps that only edit (Sequence::block_filled). Returns, per denoising sequence, what
  // the step left of its block.
  std::vector<StepResult> denoise(const std::vector<Sequence*>& denoising, const std::vector<Sequence*>& saving);
  // The records of the block in `slot`, as of the last denoise step.
  BlockRecord read_block(int slot) const;
  // The first position of the first sub-block of `width` positions, at or after `from`, that
  // holds a mask of the block in `slot` (as of the last denoise step or block start); the block
  // length if none does.
  int first_masked_window(int slot, int from, int width, int32_t mask_id) const;

  // A new decode loop restarts the device-idle clock, so the time between loops is not counted.
  void restart_idle_clock() { idle_since_.reset(); }

 private:
  // Calls run(group) for consecutive groups of `items` of at most max_batched_tokens_ tokens
  // (tokens_of(item) each; an item above the limit forms a group alone).
  template <typename Item, typename TokensOf, typename Run>
  void in_token_groups(const std::vector<Item>& items, TokensOf tokens_of, Run run) const;
  void prefill_forward(const std::vector<Sequence*>& seqs);
  int prefill_end(const Sequence& seq) const;  // Sequence::prefill_end for this model
  // One forward of denoise(): launches it and its step, without waiting for them.
  void denoise_forward(const std::vector<Sequence*>& denoising, const std::vector<Sequence*>& saving);
  // A layout with no rows yet: the attention rule and a page table wide enough for every sequence.
  template <typename Seqs>
  BatchLayout empty_layout(const Seqs& seqs) const;
  // Appends `count` tokens of `seq` at positions first_position, first_position + 1, ...
  void fill_layout(BatchLayout& layout, const Sequence& seq, int first_position, int count);
  // The host copy of one part of the block state (a tensor inside state_.block_region).
  int32_t* host_part(const Tensor& part);
  const int32_t* host_part(const Tensor& part) const;
  // Called just before a forward is launched: ends the device's idle stretch, if one is open, and
  // counts the forward.
  void start_forward();

  // What one tensor-parallel rank keeps on its backend.
  struct Rank {
    Model* model = nullptr;
    Backend* backend = nullptr;
    KvCache kv;
    DecodeState state;
    Buffer layout_arena, ids_buffer, logits_buffer;
    Buffer parts_buffer, whole_buffer;  // with the LM head split by vocabulary
  };
  // The rank-independent layout of the block state (rank 0's: every rank's has the same offsets).
  const DecodeState& state() const { return ranks_.front().state; }
  // Runs task(rank) on every rank at once.
  void on_every_rank(const std::function<void(Rank&)>& task);

  ModelRanks& model_ranks_;
  const ModelConfig& config_;
  std::vector<Rank> ranks_;
  int block_length_;
  int max_batched_tokens_;
  bool record_forwards_;
  std::vector<int32_t> host_state_;                                  // mirror of the block state's block_region
  bool host_state_newer_ = false;                                    // a block started since the last upload
  std::optional<std::chrono::steady_clock::time_point> idle_since_;  // the device has nothing queued
  RunnerStats& stats_;
};

}  // namespace jet
