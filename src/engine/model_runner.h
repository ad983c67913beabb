// ModelRunner: turns scheduled sequences into forwards. Builds the batch layout (positions,
// cached lengths, page tables), runs the model, runs the backend's denoise step on the logits,
// and reads back the little the host needs (masks left; a finished block's records).
#pragma once

#include <vector>

#include "backend/backend.h"
#include "engine/sequence.h"
#include "model/model.h"

namespace jet {

class ModelRunner {
 public:
  ModelRunner(Model& model, int block_length, int num_slots, int num_pages, int page_size);

  Backend& backend() { return backend_; }
  DecodeState& state() { return state_; }

  // Writes the K/V of each sequence's prompt positions [num_cached, num_prefill).
  void prefill(const std::vector<Sequence*>& seqs);
  // One forward over the current blocks: `denoising` sequences (first) get a sampling +
  // remasking step, `saving` ones write their finished block's K/V. Returns, per denoising
  // sequence, the masks left in its block.
  std::vector<int32_t> denoise(const std::vector<Sequence*>& denoising, const std::vector<Sequence*>& saving);
  BlockRecord read_block(int slot);

 private:
  // A layout with no rows yet: the attention rule and a page table wide enough for every sequence.
  template <typename Seqs>
  BatchLayout empty_layout(const Seqs& seqs) const;
  // Appends `count` tokens of `seq` at positions first_position, first_position + 1, ...
  void fill_layout(BatchLayout& layout, const Sequence& seq, int first_position, int count);

  Model& model_;
  Backend& backend_;
  int block_length_;
  KvCache kv_;
  DecodeState state_;
};

}  // namespace jet
