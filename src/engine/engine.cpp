// The Engine's decode loop (one implementation for every backend and every entry point: generate,
// generate_streaming, serve): schedule -> prefill -> denoise forward (which also saves the blocks
// finished in the step before, and for shifted-logit models takes their head steps) -> commit
// (block_commit.h), slot state through the ModelRunner;
// generate and generate_streaming on it, and the Engine's accessors. Setup, request intake,
// serve and the weight API are in the other engine_*.cpp files (engine_impl.h).
#include <cstdint>
#include <map>

#include "core/log.h"
#include "engine/block_commit.h"
#include "engine/engine_impl.h"
#include "sampling/remasking.h"

namespace jet {

void Engine::Impl::start_block(Sequence& seq, std::vector<int32_t> tokens) {
  tokens.resize(block_length, limits.mask_id);
  runner->start_block(seq.slot, tokens, limits.mask_id);
  seq.step_in_block = seq.post_steps = 0;
  seq.block_filled = false;
  seq.window_begin = runner->first_masked_window(seq.slot, 0, seq.request.sub_block_length, limits.mask_id);
  seq.status = SeqStatus::Denoising;
}

void Engine::Impl::step(std::vector<Sequence*>& finished) {
  const bool shifted = model->config().shifted_logits;
  for (Sequence* seq : scheduler->schedule()) {
    runner->begin_sequence(*seq);
    const int first_block = seq->num_prefill(block_length), prefill_end = seq->prefill_end(block_length, shifted);
    if (prefill_end < first_block) {  // the prompt's last block is saved by the first block's head step
      runner->start_block(seq->slot, std::vector<int32_t>(seq->prompt.begin() + prefill_end, seq->prompt.end()),
                          limits.mask_id);
      start_block(*seq, {});
      seq->save_pending = seq->head_pending = true;
    } else {
      start_block(*seq, std::vector<int32_t>(seq->prompt.begin() + first_block, seq->prompt.end()));
    }
    // The prefill counts as one forward even when the prefix cache spared it: num_forwards
    // describes the decode, not the cache's luck.
    seq->num_forwards = prefill_end > 0 ? 1 : 0;
  }
  num_preemptions += scheduler->take_preempted().size();

  // Every running sequence denoises its current block; those that just finished one also save it.
  std::vector<Sequence*> to_prefill, denoising, saving;
  for (Sequence* seq : scheduler->running()) {
    if (seq->needs_prefill) to_prefill.push_back(seq);
    denoising.push_back(seq);
    if (seq->save_pending) saving.push_back(seq);
  }
  runner->prefill(to_prefill);
  for (Sequence* seq : to_prefill) {
    seq->needs_prefill = false;
    scheduler->publish_prompt(*seq);
  }
  if (denoising.empty()) return;

  const std::vector<StepResult> results = runner->denoise(denoising, saving);
  for (Sequence* seq : saving) seq->save_pending = false;
  for (size_t i = 0; i < denoising.size(); ++i) {
    Sequence& seq = *denoising[i];
    const int32_t masks_left = results[i].masks_left;
    // A head step is not one of the block's denoising steps (docs/decoding.md §1), nor is a
    // token-editing step begun with no mask left (§4); a sub-block whose masks are gone hands on
    // to the next one that has some, with steps of its own (§2).
    if (seq.head_pending) {
      seq.head_pending = false;
    } else if (seq.block_filled) {
      ++seq.post_steps;
    } else {
      ++seq.step_in_block;
    }
    const int width = seq.request.sub_block_length;
    if (width < block_length && masks_left > 0) {  // without sub-blocks the window is the block
      const int next_window = runner->first_masked_window(seq.slot, seq.window_begin, width, limits.mask_id);
      if (next_window != seq.window_begin) {
        seq.window_begin = next_window;
        seq.step_in_block = 0;
      }
    }
    ++seq.global_step;
    ++seq.num_forwards;
    JET_ASSERT(masks_left == 0 || seq.step_in_block < seq.request.denoising_steps,
               "the last step must commit every mask");
    if (masks_left > 0) continue;
    // Under token editing a filled block ends with a step that changed nothing, or when its
    // steps without masks are spent.
    if (seq.request.editing && results[i].changes > 0 && seq.post_steps < seq.request.max_post_steps) {
      seq.block_filled = true;
      continue;
    }
    if (commit(seq, runner->read_block(seq.slot))) {
      scheduler->finish(&seq);
      finished.push_back(&seq);
    }
  }
}

bool Engine::Impl::commit(Sequence& seq, const BlockRecord& block) {
  const BlockCommit done = commit_block(seq, block, block_length, options.max_model_len);
  if (done.finished) return true;
  runner->mark_committed(seq, done.new_tokens);
  start_block(seq, {});
  seq.save_pending = true;
  seq.head_pending = model->config().shifted_logits;
  return false;
}

GenerationOutput Engine::Impl::make_output(const Sequence& seq) const {
  GenerationOutput out;
  out.token_ids = seq.prompt;
  out.token_ids.insert(out.token_ids.end(), seq.completion.begin(), seq.completion.end());
  out.text = tokenizer.decode(out.token_ids);
  out.trajectory = seq.trajectory;
  out.logprobs = seq.logprobs;
  out.entropies = seq.entropies;
  out.completion_ids = seq.completion;
  out.completion_text = seq.text.text();
  out.finish_reason = seq.finish_reason;
  out.num_forwards = seq.num_forwards;
  out.prompt_len = seq.prompt_len();
  return out;
}

void Engine::Impl::loop(size_t max_active, const AdmitFn& admit, const CancelFn& take_cancelled,
                        const std::function<void(Sequence&)>& on_finished, const std::function<void()>& after_step) {
  size_t in_flight = 0;
  bool open = true;
  std::vector<Sequence*> incoming, finished, cancelled;
  // Whatever stops the loop early (an interrupt from a callback, an out-of-memory error), the
  // engine must come out empty and usable for the next call.
  struct DrainOnExit {
    Scheduler& scheduler;
    ~DrainOnExit() { scheduler.abort_all(); }
  } drain{*scheduler};
  num_preemptions = 0;
  // Said whenever the engine runs dry, so a server that never stops says it too.
  auto report_preemptions = [this] {
    if (num_preemptions == 0) return;
    log_warn(num_preemptions, " preemptions: the KV cache could not hold every running sequence, so some were ",
             "restarted (same outputs, lost work); give the cache more memory or lower max_num_seqs");
    num_preemptions = 0;
  };
  if (runner) runner->restart_idle_clock();
  while (open || in_flight > 0) {
    if (open) {
      incoming.clear();
      open = admit(max_active > in_flight ? max_active - in_flight : 0, in_flight == 0, incoming);
      for (Sequence* seq : incoming) scheduler->add(seq);
      in_flight += incoming.size();
    }
    if (take_cancelled) {
      cancelled.clear();
      take_cancelled(cancelled);
      for (Sequence* seq : cancelled) {
        scheduler->cancel(seq);
        seq->status = SeqStatus::Finished;
        seq->finish_reason = "abort";
        seq->text.finish();
        --in_flight;
        on_finished(*seq);
      }
    }
    if (in_flight == 0) continue;
    finished.clear();
    step(finished);
    for (Sequence* seq : finished) {
      --in_flight;
      on_finished(*seq);
    }
    after_step();
    if (in_flight == 0) report_preemptions();
  }
}

void Engine::Impl::run(std::vector<Sequence>& seqs, int max_active, const OutputFn& on_output,
                       const ProgressFn& progress) {
  size_t submitted = 0, done = 0, tokens = 0;
  loop(
      max_active > 0 ? static_cast<size_t>(max_active) : seqs.size(),
      [&](size_t room, bool, std::vector<Sequence*>& out) {
        for (; submitted < seqs.size() && room > 0; --room) out.push_back(&seqs[submitted++]);
        return submitted < seqs.size();
      },
      {},
      [&](Sequence& seq) {
        ++done;
        tokens += seq.completion.size();
        on_output(seq.index, make_output(seq));
      },
      // Every step, not only when a prompt finishes: the callback is also where a front end
      // (Python's Ctrl-C) gets to stop a long generation.
      [&] {
        if (!progress) return;
        size_t committed = tokens;  // finished prompts', and what the running ones have committed
        for (const Sequence* seq : scheduler->running()) committed += seq->completion.size();
        progress(done, seqs.size(), committed);
      });
}

std::vector<std::string> remasking_strategies() {
  std::vector<std::string> names;
  for (int i = 0; i <= static_cast<int>(Strategy::EntropyBounded); ++i) {
    names.emplace_back(strategy_name(static_cast<Strategy>(i)));
  }
  return names;
}

Engine::Engine(const EngineOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Engine::~Engine() {
  if (impl_) impl_->model->use_on_this_thread();  // its buffers are freed on the engine's device
}

std::vector<GenerationOutput> Engine::generate(const std::vector<Prompt>& prompts,
                                               const std::vector<SamplingParams>& params, const ProgressFn& progress) {
  impl_->model->use_on_this_thread();
  std::vector<Sequence> seqs = impl_->make_sequences(prompts, params);
  std::vector<GenerationOutput> outputs(seqs.size());
  impl_->run(
      seqs, 0, [&](size_t i, GenerationOutput&& out) { outputs[i] = std::move(out); }, progress);
  return outputs;
}

void Engine::generate_streaming(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params,
                                int max_active, const OutputFn& on_output, const ProgressFn& progress) {
  impl_->model->use_on_this_thread();
  std::vector<Sequence> seqs = impl_->make_sequences(prompts, params);
  impl_->run(seqs, max_active > 0 ? max_active : impl_->options.max_num_seqs, on_output, progress);
}

void Engine::check_params(const SamplingParams& params) const {
  // No prompt yet: its length only places diversity_enforce's barrier, and the fallback seed only
  // fills an unset one; neither is checked.
  (void)resolve_request(params, impl_->limits, /*prompt_len=*/0, /*fallback_seed=*/0);
}

const Tokenizer& Engine::tokenizer() const { return impl_->tokenizer; }

std::string Engine::apply_chat_template(const std::vector<ChatMessage>& messages,
                                        const ChatTemplateOptions& options) const {
  JET_CHECK(impl_->chat_template, "the model folder ", impl_->options.model,
            " has no usable chat template: ", impl_->chat_template_error);
  ChatTemplateOptions opts = options;
  if (opts.bos_token.empty() && impl_->tokenizer.bos_id() >= 0) {
    opts.bos_token = impl_->tokenizer.id_to_token(impl_->tokenizer.bos_id());
  }
  if (opts.eos_token.empty() && impl_->tokenizer.eos_id() >= 0) {
    opts.eos_token = impl_->tokenizer.id_to_token(impl_->tokenizer.eos_id());
  }
  return impl_->chat_template->render(messages, opts);
}

const ModelSummary& Engine::summary() const { return impl_->summary; }

std::map<std::string, double> Engine::op_seconds() const { return *impl_->op_profile; }

double Engine::device_idle_seconds() const { return impl_->runner_stats.idle_seconds; }

int64_t Engine::num_forwards() const { return impl_->runner_stats.forwards; }

}  // namespace jet
