// Engine: loads model + tokenizer, validates requests, and runs the decode loop (one
// implementation for every backend and every entry point: generate, generate_streaming, serve):
// schedule -> prefill -> denoise forward (which also saves the blocks finished in the step
// before) -> commit (block_commit.h). Slot state goes through the ModelRunner.
#include "jet/engine.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <random>

#include "backend/backend.h"
#include "backend/profiling_backend.h"
#include "core/log.h"
#include "engine/block_commit.h"
#include "engine/model_runner.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "model/tensor_source.h"
#include "model/model.h"
#include "sampling/remasking.h"
#include "chat/chat_template.h"

namespace jet {

// More CPU threads than this are a typo, not a machine (OpenMP would try to start them all).
constexpr int kMaxThreads = 4096;

struct Engine::Impl {
  const EngineOptions user_options;  // as given (options may be adjusted, e.g. max_model_len)
  EngineOptions options;
  std::shared_ptr<OpProfile> op_profile = std::make_shared<OpProfile>();
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
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

Engine::Impl::Impl(const EngineOptions& opts)
    : user_options(opts), options(opts), tokenizer(Tokenizer::from_dir(opts.model)) {
  JET_CHECK(options.max_num_seqs >= 1, "max_num_seqs must be >= 1, got ", options.max_num_seqs);
  JET_CHECK(options.max_model_len >= 1, "max_model_len must be >= 1, got ", options.max_model_len);
  JET_CHECK(options.kvcache_page_size >= 1, "kvcache_page_size must be >= 1, got ", options.kvcache_page_size);
  JET_CHECK(options.max_num_batched_tokens >= 1, "max_num_batched_tokens must be >= 1, got ",
            options.max_num_batched_tokens);
  JET_CHECK(options.gpu_memory_utilization > 0 && options.gpu_memory_utilization <= 1,
            "gpu_memory_utilization must be in (0, 1], got ", options.gpu_memory_utilization);
  JET_CHECK(options.load_format == "auto" || options.load_format == "dummy",
            "load_format must be 'auto' or 'dummy', got '", options.load_format, "'");
  JET_CHECK(options.quantization.empty() || options.quantization == "fp8",
            "quantization must be empty (as the checkpoint stores its weights) or 'fp8', got '", options.quantization,
            "'");
  JET_CHECK(options.num_threads >= 0 && options.num_threads <= kMaxThreads, "num_threads must be in [0, ", kMaxThreads,
            "] (0 = all cores), got ", options.num_threads);
  backend = make_backend(options.device, options.num_threads);
  if (options.profile_ops) backend = make_profiling_backend(std::move(backend), op_profile);
  model = load_model(options.model, *backend, options.load_format == "dummy", options.quantization == "fp8");
  const ModelConfig& c = model->config();
  log_info("weights: ", (model->weight_bytes() + (1 << 19)) >> 20, " MiB (", family_name(c.family), ", ", c.layers,
           " layers", model->fp8_projections() ? ", FP8 projections" : "", ") on ", backend->name());

  block_length = options.block_length > 0 ? options.block_length : c.block_size;
  JET_CHECK(options.block_length >= 0, "block_length must be >= 1 (or 0 for the model's), got ", options.block_length);
  if (c.trained_block_size && block_length != *c.trained_block_size) {
    log_warn("block_length ", block_length, " differs from the block size the model was trained with (",
             *c.trained_block_size, "); quality may suffer");
  }
  const int32_t mask_id = options.mask_token_id >= 0 ? options.mask_token_id : c.mask_token_id;
  JET_CHECK(mask_id >= 0 && mask_id < c.vocab, "mask_token_id ", mask_id, " is outside the vocabulary [0, ", c.vocab,
            ")");
  if (options.max_model_len > c.max_positions) {
    log_warn("max_model_len ", options.max_model_len, " exceeds the model's max_position_embeddings ", c.max_positions,
             "; using ", c.max_positions);
    options.max_model_len = c.max_positions;
  }
  JET_CHECK(block_length <= options.max_model_len, "block_length ", block_length, " exceeds max_model_len ",
            options.max_model_len, ": no block would fit in a sequence");

  build_cache();

  limits.block_length = block_length;
  limits.vocab = c.vocab;
  limits.mask_id = mask_id;
  limits.eos_ids.assign(c.eos_token_ids.begin(), c.eos_token_ids.end());

  const std::string tokenizer_config = options.model + "/tokenizer_config.json";
  try {
    chat_template = ChatTemplate::from_tokenizer_config(tokenizer_config);
  } catch (const Error& e) {
    chat_template_error = e.what();
    // Base models have no template, which is no fault; a template that does not load is one.
    if (has_chat_template_source(tokenizer_config)) {
      log_warn("the model's chat template cannot be used, so chat requests will fail: ", e.what());
    } else {
      log_debug("no chat template: ", e.what());
    }
  }

  summary.model_type = c.model_type;
  summary.num_layers = c.layers;
  summary.hidden = c.hidden;
  summary.heads = c.heads;
  summary.kv_heads = c.kv_heads;
  summary.head_dim = c.head_dim;
  summary.vocab = c.vocab;
  summary.block_length = block_length;
  summary.mask_token_id = mask_id;
  summary.eos_token_ids = limits.eos_ids;
  summary.device = backend->name();
}

void Engine::Impl::build_cache() {
  const ModelConfig& c = model->config();
  const int page_size = options.kvcache_page_size;
  const size_t bytes_per_page =
      size_t{2} * c.layers * page_size * c.kv_heads * c.head_dim * dtype_size(backend->compute_dtype());
  int64_t pages = options.num_kvcache_pages;
  // The largest forward: max_num_batched_tokens, or one sequence's prompt or block pair alone.
  const int64_t forward_tokens =
      std::max<int64_t>({options.max_num_batched_tokens, options.max_model_len, 2 * int64_t{block_length}});
  const int64_t logits_rows = ModelRunner::logits_chunk_rows(static_cast<int>(c.vocab), options.max_num_batched_tokens);
  const size_t activations = model->activation_bytes(forward_tokens) + size_t(logits_rows) * c.vocab * sizeof(float);
  if (pages <= 0) {
    size_t budget = size_t(options.kv_cache_memory_bytes);
    if (budget == 0) {
      budget = backend->default_kv_budget_bytes(options.gpu_memory_utilization);
      budget = budget > activations ? budget - activations : 0;
      log_info("activations: ", activations >> 20, " MiB set aside for forwards of up to ", forward_tokens,
               " tokens and logits chunks of ", logits_rows, " rows");
    }
    // Never more than every slot at full length needs.
    const int64_t useful = int64_t{options.max_num_seqs} * ((options.max_model_len + page_size - 1) / page_size);
    pages = std::min<int64_t>(static_cast<int64_t>(budget / bytes_per_page), useful);
  }
  JET_CHECK(pages <= INT32_MAX, "num_kvcache_pages ", pages, " is more than the engine can address (2^31 - 1)");
  JET_CHECK(pages >= 1, "the KV-cache budget holds no page of ", bytes_per_page,
            " bytes; raise kv_cache_memory_bytes (or gpu_memory_utilization) or lower kvcache_page_size");
  // A profile times each op by synchronising after it, which a recorded forward would hide.
  runner = std::make_unique<ModelRunner>(*model, block_length, options.max_num_seqs, static_cast<int>(pages), page_size,
                                         options.max_num_batched_tokens, !options.enforce_eager && !options.profile_ops,
                                         runner_stats);
  SchedulerLimits sl;
  sl.max_num_seqs = options.max_num_seqs;
  sl.block_length = block_length;
  sl.prefix_caching = options.enable_prefix_caching && c.block_causal;
  scheduler = std::make_unique<Scheduler>(sl, static_cast<int>(pages), page_size);
  log_info("KV cache: ", pages, " pages of ", page_size, " tokens (", pages * page_size, " tokens, ",
           double(pages) * bytes_per_page / (1 << 20), " MiB) on ", backend->name());
  summary.kv_pages = pages;
  summary.kv_page_size = page_size;
}

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

void Engine::Impl::require_resources() {
  JET_CHECK(model->has_weights(),
            "the engine's weights were freed (offload_parameters / free_all_resources); "
            "load a whole set first (load_weights, Python's reload_from_hf_model, or reload_from_path)");
  if (!runner) build_cache();
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

void Engine::Impl::start_block(Sequence& seq, std::vector<int32_t> tokens) {
  tokens.resize(block_length, limits.mask_id);
  runner->start_block(seq.slot, tokens, limits.mask_id);
  seq.step_in_block = 0;
  seq.status = SeqStatus::Denoising;
}

void Engine::Impl::step(std::vector<Sequence*>& finished) {
  for (Sequence* seq : scheduler->schedule()) {
    runner->begin_sequence(*seq);
    start_block(*seq, std::vector<int32_t>(seq->prompt.begin() + seq->num_prefill(block_length), seq->prompt.end()));
    // The prefill counts as one forward even when the prefix cache spared it: num_forwards
    // describes the decode, not the cache's luck.
    seq->num_forwards = seq->num_prefill(block_length) > 0 ? 1 : 0;
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

  std::vector<int32_t> masks_left = runner->denoise(denoising, saving);
  for (Sequence* seq : saving) seq->save_pending = false;
  for (size_t i = 0; i < denoising.size(); ++i) {
    Sequence& seq = *denoising[i];
    ++seq.step_in_block;
    ++seq.global_step;
    ++seq.num_forwards;
    JET_ASSERT(masks_left[i] == 0 || seq.step_in_block < seq.request.denoising_steps,
               "the last step must commit every mask");
    if (masks_left[i] == 0 && commit(seq, runner->read_block(seq.slot))) {
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
Engine::~Engine() = default;

std::vector<GenerationOutput> Engine::generate(const std::vector<Prompt>& prompts,
                                               const std::vector<SamplingParams>& params, const ProgressFn& progress) {
  std::vector<Sequence> seqs = impl_->make_sequences(prompts, params);
  std::vector<GenerationOutput> outputs(seqs.size());
  impl_->run(
      seqs, 0, [&](size_t i, GenerationOutput&& out) { outputs[i] = std::move(out); }, progress);
  return outputs;
}

void Engine::generate_streaming(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params,
                                int max_active, const OutputFn& on_output, const ProgressFn& progress) {
  std::vector<Sequence> seqs = impl_->make_sequences(prompts, params);
  impl_->run(seqs, max_active > 0 ? max_active : impl_->options.max_num_seqs, on_output, progress);
}

void Engine::serve(const RequestSource& source, int max_active) {
  // The requests in flight, by the id their Sequence carries as its index (map nodes stay put).
  struct Live {
    Sequence seq;
    ServeRequest request;
    size_t streamed = 0;  // bytes of the completion text sent
    // The completion text since the last call; a preempted sequence restarts with the same
    // seed and so recommits the same tokens, which are not sent twice.
    std::string new_text() {
      const std::string_view text = seq.text.streamable();
      if (text.size() <= streamed) return {};
      std::string out(text.substr(streamed));
      streamed = text.size();
      return out;
    }
    size_t tokens_sent = 0;  // completion tokens handed to on_tokens
    // The committed tokens since the last call (a restarted sequence's recommits excluded).
    std::vector<CommittedToken> new_tokens() {
      std::vector<CommittedToken> out;
      for (; tokens_sent < seq.completion.size(); ++tokens_sent) {
        out.push_back({seq.completion[tokens_sent], seq.trajectory[tokens_sent], seq.logprobs[tokens_sent]});
      }
      return out;
    }
    // What this step committed, to the request's callbacks.
    void send_progress() {
      if (request.on_text) {
        const std::string text = new_text();
        if (!text.empty()) request.on_text(text);
      }
      if (request.on_tokens) {
        const std::vector<CommittedToken> tokens = new_tokens();
        if (!tokens.empty()) request.on_tokens(tokens);
      }
    }
  };
  std::map<size_t, Live> live;
  size_t next_id = 0;
  Impl& impl = *impl_;
  impl.loop(
      max_active > 0 ? static_cast<size_t>(max_active) : static_cast<size_t>(impl.options.max_num_seqs),
      [&](size_t room, bool idle, std::vector<Sequence*>& out) {
        std::vector<ServeRequest> incoming;
        const bool open = source(room, idle, incoming);
        for (ServeRequest& request : incoming) {
          try {
            Sequence seq = impl.make_sequence(request.prompt, request.params);
            seq.index = next_id;
            Live& entry = live.try_emplace(next_id++, Live{std::move(seq), std::move(request)}).first->second;
            out.push_back(&entry.seq);
          } catch (const Error& e) {
            if (request.on_error) request.on_error(e.what());
          }
        }
        return open;
      },
      [&](std::vector<Sequence*>& out) {
        for (auto& [id, entry] : live) {
          if (entry.request.cancelled && entry.request.cancelled()) out.push_back(&entry.seq);
        }
      },
      [&](Sequence& seq) {
        Live& entry = live.at(seq.index);
        entry.send_progress();
        if (entry.request.on_output) entry.request.on_output(impl.make_output(seq));
        live.erase(seq.index);
      },
      [&] {
        for (auto& [id, entry] : live) entry.send_progress();
      });
}

void Engine::check_params(const SamplingParams& params) const {
  // No prompt yet: its length only places diversity_enforce's barrier, and the fallback seed only
  // fills an unset one; neither is checked.
  (void)resolve_request(params, impl_->limits, /*prompt_len=*/0, /*fallback_seed=*/0);
}

namespace {

// The caller's views as a TensorSource (no copy: the data stays where the caller keeps it).
TensorMap as_tensor_map(const std::vector<WeightView>& views, const std::string& what) {
  TensorMap map(what);
  for (const WeightView& v : views) {
    TensorInfo t;
    t.name = v.name;
    t.dtype = v.dtype == WeightView::DType::F32   ? DType::F32
              : v.dtype == WeightView::DType::F16 ? DType::F16
                                                  : DType::BF16;
    t.shape = v.shape;
    int64_t n = 1;
    for (int64_t d : v.shape) {
      JET_CHECK(d >= 0, what, ": tensor '", v.name, "' has a negative dimension");
      n *= d;
    }
    JET_CHECK(v.data || n == 0, what, ": tensor '", v.name, "' has no data");
    t.data = v.data;
    t.nbytes = static_cast<size_t>(n) * dtype_size(t.dtype);
    map.add(std::move(t));
  }
  return map;
}

}  // namespace

void Engine::update_weights(const std::vector<WeightView>& weights) {
  impl_->model->update(as_tensor_map(weights, "update_weights"));
  if (impl_->scheduler) impl_->scheduler->forget_cached_prefixes();  // their K/V came from the old weights
}

void Engine::offload_parameters() { impl_->model->release(); }

void Engine::free_all_resources() {
  impl_->model->release();
  impl_->scheduler.reset();
  impl_->runner.reset();
}

void Engine::load_weights(const std::vector<WeightView>& weights) {
  impl_->model->load(as_tensor_map(weights, "load_weights"));
  if (impl_->scheduler) impl_->scheduler->forget_cached_prefixes();
}

void Engine::reload_from_path(const std::string& dir) {
  EngineOptions opts = impl_->user_options;
  opts.model = dir;
  // Free the old engine's memory first (RL loops reload a model the size of the current one);
  // if the new one fails to load, this engine has no weights and says so.
  free_all_resources();
  impl_ = std::make_unique<Impl>(opts);
}

bool Engine::has_weights() const { return impl_->model->has_weights(); }

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
