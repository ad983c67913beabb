// make_shard: one rank's share of the heads and widths.
#include "model/model_shard.h"

#include <string>

#include "core/error.h"

namespace jet {

ModelShard make_shard(const ModelConfig& c, int rank, int size, bool expert_parallel, bool vocab_split) {
  JET_CHECK(size >= 1 && rank >= 0 && rank < size, "tensor parallel: rank ", rank, " of ", size,
            " is not a rank of that group");
  std::string problems;
  auto divides = [&](const char* key, int64_t value) {
    if (value % size != 0) problems += str("; ", key, " ", value, " is not a multiple of ", size);
  };
  divides("num_attention_heads", c.heads);
  if (c.kv_heads >= size) divides("num_key_value_heads", c.kv_heads);
  if (c.kv_heads < size && size % c.kv_heads != 0) {
    problems += str("; ", size, " is not a multiple of num_key_value_heads ", c.kv_heads,
                    " (fewer key/value heads than ranks are repeated)");
  }
  bool dense = false, moe = false;
  for (int64_t l = 0; l < c.layers; ++l) (c.is_moe_layer(l) ? moe : dense) = true;
  if (dense) divides("intermediate_size", c.intermediate);
  JET_CHECK(!expert_parallel || moe, "expert parallelism: this ", family_name(c.family),
            " model has no mixture-of-experts layers to split");
  if (moe && expert_parallel) divides("num_experts", c.num_experts);
  if (moe && !expert_parallel) divides("moe_intermediate_size", c.moe_intermediate);
  if (moe && c.shared_expert_intermediate > 0) divides("the shared expert's width", c.shared_expert_intermediate);
  JET_CHECK(problems.empty(), "tensor_parallel_size ", size, " does not divide this model",
            expert_parallel ? " (with expert parallelism)" : "", ": ", problems.substr(2),
            "; choose a size that divides them");
  ModelShard s;
  s.rank = rank;
  s.size = size;
  s.heads = c.heads / size;
  s.head0 = rank * s.heads;
  s.kv_heads = c.kv_heads >= size ? c.kv_heads / size : 1;
  // The key/value head of this rank's first query head (all of its query heads share it when
  // the key/value heads are repeated).
  s.kv_head0 = c.kv_heads >= size ? rank * s.kv_heads : s.head0 / (c.heads / c.kv_heads);
  s.intermediate = dense ? c.intermediate / size : 0;
  s.expert_parallel = expert_parallel;
  s.moe_intermediate = moe ? (expert_parallel ? c.moe_intermediate : c.moe_intermediate / size) : 0;
  s.experts = expert_parallel ? c.num_experts / size : c.num_experts;
  s.expert0 = expert_parallel ? rank * s.experts : 0;
  // Vocabulary ids travel as floats in the sampling parts (exact below 2^24).
  s.vocab_split = vocab_split && size > 1 && c.vocab >= size && c.vocab < (int64_t{1} << 24);
  s.vocab0 = s.vocab_split ? c.vocab * rank / size : 0;
  s.vocab = s.vocab_split ? c.vocab * (rank + 1) / size - s.vocab0 : c.vocab;
  s.shared_intermediate = moe ? c.shared_expert_intermediate / size : 0;
  return s;
}

}  // namespace jet
