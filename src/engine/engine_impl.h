// Engine::Impl, the engine's state and its decode loop's steps, shared by the files that
// implement the Engine: engine.cpp (the decode loop and the generate entry points),
// engine_setup.cpp (options, loading, the KV cache), engine_requests.cpp (prompts into validated
// sequences), engine_serve.cpp (the request-source loop) and engine_weights.cpp (weight updates).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/profiling_backend.h"
#include "chat/chat_template.h"
#include "engine/model_ranks.h"
#include "engine/model_runner.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "jet/engine.h"
#include "jet/tokenizer.h"
#include "model/model.h"

namespace jet {

struct Engine::Impl {
  const EngineOptions user_options;  // as given (options may be adjusted, e.g. max_model_len)
  EngineOptions options;
  std::shared_ptr<OpProfile> op_profile = std::make_shared<OpProfile>();
  std::unique_ptr<ModelRanks> model;  // the model on each tensor-parallel rank (one without TP)
  Tokenizer tokenizer;
  std::optional<ChatTemplate> chat_template;
  std::string chat_template_error;  // why chat_template is empty
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<Scheduler> scheduler;
  ModelSummary summary;
  RequestLimits limits;
  int block_length = 0;
  std::mt19937_64 seed_source{std::random_device{}()};
  size_t num_preemptions = 0;  // since the engine last ran dry (reported then)
  RunnerStats runner_stats;    // see Engine::device_idle_seconds, Engine::num_forwards

  explicit Impl(const EngineOptions& opts);

  // Sizes and allocates the KV cache and decode slots (again after free_all_resources).
  void build_cache();
  // What every generate call needs: weights and a cache.
  void require_resources();

  std::vector<int32_t> encode_prompt(const Prompt& prompt) const;
  void check_fits(const Sequence& seq) const;
  // A validated sequence for one request (throws jet::Error naming the problem).
  Sequence make_sequence(const Prompt& prompt, const SamplingParams& params);
  std::vector<Sequence> make_sequences(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params);
  // The decode loop. Before every step `admit` hands over new sequences (the caller owns them, at
  // stable addresses; at most `room`; while nothing is in flight, `idle`, it may block) and
  // returns false once no more will come; `take_cancelled` (optional) then names sequences in
  // flight to drop, which end with finish_reason "abort"; each finished sequence goes to
  // on_finished, and after_step runs after every step. Returns when admission is over and
  // nothing is in flight.
  using AdmitFn = std::function<bool(size_t room, bool idle, std::vector<Sequence*>& out)>;
  using CancelFn = std::function<void(std::vector<Sequence*>& out)>;
  void loop(size_t max_active, const AdmitFn& admit, const CancelFn& take_cancelled,
            const std::function<void(Sequence&)>& on_finished, const std::function<void()>& after_step);
  // Runs until every sequence of `seqs` (in order) has been submitted and finished, never
  // holding more than max_active of them in the engine.
  void run(std::vector<Sequence>& seqs, int max_active, const OutputFn& on_output, const ProgressFn& progress);
  void start_block(Sequence& seq, std::vector<int32_t> tokens);
  void step(std::vector<Sequence*>& finished);
  // Appends the block the sequence just finished; true when that finished the sequence, else
  // the next block is started (its previous one saved by the next forward).
  bool commit(Sequence& seq, const BlockRecord& block);
  GenerationOutput make_output(const Sequence& seq) const;
};

}  // namespace jet
