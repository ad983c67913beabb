// Engine::Impl's construction: the options checked, the backend, model and tokenizer loaded,
// the request limits and chat template read, and the KV cache and decode slots sized and
// allocated (again after free_all_resources).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>

#include "core/log.h"
#include "engine/engine_impl.h"

namespace jet {

// More CPU threads than this are a typo, not a machine (OpenMP would try to start them all).
constexpr int kMaxThreads = 4096;

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
  const auto load_start = std::chrono::steady_clock::now();
  model = std::make_unique<ModelRanks>(options, options.profile_ops ? op_profile : nullptr);
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const ModelConfig& c = model->config();
  const Backend& backend = model->backend();
  log_info("weights: ", (model->model().weight_bytes() + (1 << 19)) >> 20, " MiB (", family_name(c.family), ", ",
           c.layers, " layers", model->model().fp8_projections() ? ", FP8 projections" : "", ") on ", backend.name(),
           model->size() > 1 ? str(", each of ", model->size(), " tensor-parallel ranks",
                                   model->model().shard().expert_parallel
                                       ? str(" (", model->model().shard().experts, " whole experts each)")
                                       : "")
                             : "",
           ", loaded in ", std::round(load_seconds * 10) / 10, " s");

  block_length = options.block_length > 0 ? options.block_length : c.block_size;
  JET_CHECK(options.block_length >= 0, "block_length must be >= 1 (or 0 for the model's), got ", options.block_length);
  log_info("block length ", block_length, " (from ",
           options.block_length > 0 ? std::string("the block_length option") : c.block_size_source, ")");
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
  limits.shifted_logits = c.shifted_logits;
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
  summary.device = backend.name();
  summary.tensor_parallel_size = model->size();
}

void Engine::Impl::build_cache() {
  const ModelConfig& c = model->config();
  Backend& backend = model->backend();
  const int page_size = options.kvcache_page_size;
  // Per rank: each holds its share of the key/value heads (model_shard.h).
  const size_t bytes_per_page = size_t{2} * c.layers * page_size * model->model().shard().kv_heads * c.head_dim *
                                dtype_size(backend.compute_dtype());
  int64_t pages = options.num_kvcache_pages;
  // The largest forward: max_num_batched_tokens, or one sequence's prompt or block pair alone.
  const int64_t forward_tokens =
      std::max<int64_t>({options.max_num_batched_tokens, options.max_model_len, 2 * int64_t{block_length}});
  const int64_t logits_rows = ModelRunner::logits_chunk_rows(static_cast<int>(c.vocab), options.max_num_batched_tokens);
  const size_t activations =
      model->model().activation_bytes(forward_tokens) + size_t(logits_rows) * c.vocab * sizeof(float);
  if (pages <= 0) {
    size_t budget = size_t(options.kv_cache_memory_bytes);
    if (budget == 0) {
      budget = backend.default_kv_budget_bytes(options.gpu_memory_utilization);
      // Sleeping weights come back into this memory: the cache leaves room for them.
      const size_t set_aside = activations + model->model().asleep_bytes();
      budget = budget > set_aside ? budget - set_aside : 0;
      // Ranks that take one memory (the CPU's) share its budget.
      if (model->shared_memory()) budget /= model->size();
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
  sl.shifted_logits = c.shifted_logits;
  scheduler = std::make_unique<Scheduler>(sl, static_cast<int>(pages), page_size);
  log_info("KV cache: ", pages, " pages of ", page_size, " tokens (", pages * page_size, " tokens, ",
           double(pages) * bytes_per_page / (1 << 20), " MiB) on ", backend.name(),
           model->size() > 1 ? " per rank" : "");
  summary.kv_pages = pages;
  summary.kv_page_size = page_size;
}

void Engine::Impl::require_resources() {
  JET_CHECK(!model->weights_asleep(),
            "the engine is asleep (sleep(1): its weights are in host memory); call wake_up() first");
  JET_CHECK(model->has_weights(),
            "the engine's weights were freed (offload_parameters / free_all_resources); "
            "load a whole set first (load_weights, Python's reload_from_hf_model, or reload_from_path)");
  if (!runner) build_cache();
}

}  // namespace jet
