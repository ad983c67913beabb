// commit_block (block_commit.h).
#include "engine/block_commit.h"

#include <algorithm>

namespace jet {

BlockCommit commit_block(Sequence& seq, const BlockRecord& block, int block_length, int max_model_len) {
  const int P = seq.prompt_len();
  const Request& req = seq.request;
  BlockCommit out;
  bool stopped = false;
  // Tokens past max_tokens are dropped, so a stop token or string there does not count.
  for (int j = 0; j < block_length && !stopped && static_cast<int>(seq.completion.size()) < req.max_tokens; ++j) {
    if (seq.block_start + j < P) continue;  // the prompt's tail shares the first block
    const int32_t tok = block.tokens[j];
    seq.completion.push_back(tok);
    seq.trajectory.push_back(block.trajectory[j]);
    seq.logprobs.push_back(block.logprobs[j]);
    seq.entropies.push_back(block.entropies[j]);
    out.new_tokens.push_back(tok);
    const bool stop_string = seq.text.push(tok);
    stopped = stop_string || std::binary_search(req.stop_ids.begin(), req.stop_ids.end(), tok);
  }
  seq.block_start += block_length;
  if (stopped) {
    seq.finish_reason = "stop";
  } else if (static_cast<int>(seq.completion.size()) >= req.max_tokens ||
             seq.block_start + block_length > max_model_len) {
    seq.finish_reason = "length";
  }
  if (!seq.finish_reason.empty()) {  // its last block is never saved: no later query attends it
    seq.text.finish();
    seq.status = SeqStatus::Finished;
    out.finished = true;
  }
  return out;
}

}  // namespace jet
