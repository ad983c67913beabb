// ModelShard: what one tensor-parallel rank holds of a model (docs/tensor_parallel.md). Megatron's
// split: the attention heads and the MLP and expert widths are divided among the ranks (q, k, v,
// gate and up by their output rows, o and down by their input columns), and the rest is whole on
// every rank: norms, routers, the embedding and the LM head. Key/value heads fewer than the ranks
// are repeated, each rank holding the one its query heads read. Under expert parallelism the
// routed experts are divided instead of their widths: each rank holds a run of whole experts.
// On backends that sample from vocabulary parts (Backend::supports_vocab_parts) the LM head is
// divided too, by vocabulary rows.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "model/model_config.h"

namespace jet {

struct ModelShard {
  int rank = 0, size = 1;
  int64_t heads = 0, kv_heads = 0;  // of this rank
  int64_t head0 = 0, kv_head0 = 0;  // the model's first query / key-value head that this rank holds
  int64_t intermediate = 0, moe_intermediate = 0, shared_intermediate = 0;  // this rank's widths
  // The routed experts this rank holds: [expert0, expert0 + experts) of the model's (all of them
  // unless expert_parallel).
  bool expert_parallel = false;
  int64_t experts = 0, expert0 = 0;
  // The LM head rows (vocabulary ids) this rank holds: [vocab0, vocab0 + vocab) (all of them
  // unless vocab_split).
  bool vocab_split = false;
  int64_t vocab = 0, vocab0 = 0;
  // Ranks whose backends take one memory (the CPU backend's ranks all use the host's): the
  // weights' memory check counts them all.
  int ranks_per_memory = 1;

  bool whole() const { return size == 1; }
};

// Rank `rank` of `size`, with the routed experts split among the ranks when expert_parallel
// (else their widths), and the LM head by vocabulary when vocab_split (in slices that differ
// by at most one id); throws naming every count and width that `size` does not divide.
ModelShard make_shard(const ModelConfig& config, int rank, int size, bool expert_parallel = false,
                      bool vocab_split = false);

// The part of a checkpoint tensor [rows, cols] (or [rows]) that a rank holds: the listed row
// ranges, stacked, of the columns [col_begin, col_end); col_end < 0 means every column.
struct TensorPart {
  std::vector<std::pair<int64_t, int64_t>> rows;  // [begin, end) each; empty: every row
  int64_t col_begin = 0, col_end = -1;

  bool whole() const { return rows.empty() && col_end < 0; }
  // The row ranges of a tensor of `tensor_rows` rows (all of them when none are listed), and the
  // end of the column range in one of `tensor_cols` columns.
  std::vector<std::pair<int64_t, int64_t>> row_ranges(int64_t tensor_rows) const {
    return rows.empty() ? std::vector<std::pair<int64_t, int64_t>>{{0, tensor_rows}} : rows;
  }
  int64_t col_stop(int64_t tensor_cols) const { return col_end < 0 ? tensor_cols : col_end; }
  static TensorPart row_range(int64_t begin, int64_t end) { return {{{begin, end}}, 0, -1}; }
  static TensorPart col_range(int64_t begin, int64_t end) { return {{}, begin, end}; }
};

}  // namespace jet
