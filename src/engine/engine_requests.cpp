// Engine::Impl's request intake: prompts (text or ids) and their sampling parameters into
// validated Sequences, each checked to fit the model length and the KV cache on its own.
#include <algorithm>
#include <cstdint>
#include <variant>

#include "engine/engine_impl.h"

namespace jet {

std::vector<int32_t> Engine::Impl::encode_prompt(const Prompt& prompt) const {
  const auto* text = std::get_if<std::string>(&prompt);
  std::vector<int32_t> ids = text ? tokenizer.encode(*text) : std::get<std::vector<int32_t>>(prompt);
  for (int32_t id : ids) {
    JET_CHECK(id >= 0 && id < limits.vocab, "prompt token id ", id, " is outside the vocabulary [0, ", limits.vocab,
              ")");
    // A mask in the prompt would be denoised as if it were part of the completion.
    JET_CHECK(id != limits.mask_id, "the prompt contains the mask token (id ", id, "); prompts cannot hold masks");
  }
  return ids;
}

void Engine::Impl::check_fits(const Sequence& seq) const {
  const int B = block_length;
  const int P = seq.prompt_len();
  // The messages name no prompt index: generate prefixes "prompt i: ", and a served request has none.
  JET_CHECK(P >= 1, "the prompt is empty");
  JET_CHECK(P <= options.max_model_len, "the prompt has ", P, " tokens, more than max_model_len ",
            options.max_model_len);
  const int prefill = seq.num_prefill(B);
  JET_CHECK(prefill + B <= options.max_model_len, "the prompt has ", P, " tokens: with block_length ", B,
            " its first block would end at ", prefill + B, ", past max_model_len ", options.max_model_len);
  // The longest this sequence can get; it must fit in the cache alone, so preemption always
  // leaves the oldest sequence able to finish. (64-bit: max_tokens may be up to INT32_MAX.)
  const int tail = P - prefill;
  const int64_t wanted = prefill + (int64_t{tail} + seq.request.max_tokens + B - 1) / B * B;
  const int allowed = prefill + (options.max_model_len - prefill) / B * B;
  const int longest = static_cast<int>(std::min<int64_t>(wanted, allowed));
  JET_CHECK(scheduler->pages_for(longest) <= scheduler->total_pages(), "the sequence may grow to ", longest,
            " tokens, more than the whole KV cache holds (", scheduler->total_pages(), " pages of ",
            options.kvcache_page_size, "); lower max_tokens or give the cache more memory");
}

std::vector<Sequence> Engine::Impl::make_sequences(const std::vector<Prompt>& prompts,
                                                   const std::vector<SamplingParams>& params) {
  require_resources();
  JET_CHECK(!prompts.empty(), "the prompt list is empty");
  JET_CHECK(params.size() == 1 || params.size() == prompts.size(), "got ", params.size(), " sampling params for ",
            prompts.size(), " prompts: give one, or one per prompt");
  std::vector<Sequence> seqs;
  seqs.reserve(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    try {
      seqs.push_back(make_sequence(prompts[i], params.size() == 1 ? params[0] : params[i]));
    } catch (const Error& e) {
      throw Error(str("prompt ", i, ": ", e.what()));
    }
    seqs.back().index = i;
  }
  return seqs;
}

Sequence Engine::Impl::make_sequence(const Prompt& prompt, const SamplingParams& params) {
  require_resources();
  Sequence s;
  s.prompt = encode_prompt(prompt);
  s.request = resolve_request(params, limits, s.prompt_len(), seed_source());
  s.text = CompletionText(tokenizer, s.request.stop_strings);
  check_fits(s);
  return s;
}

}  // namespace jet
