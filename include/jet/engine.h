// JetEngine's public C++ API: build an Engine from a HuggingFace model folder, then generate.
// Semantics of decoding, sampling and outputs: docs/decoding.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "jet/chat.h"
#include "jet/tokenizer.h"

namespace jet {

// Engine-wide settings (the original JetEngine's Config fields where they apply).
struct EngineOptions {
  std::string model;  // HF folder: config.json, *.safetensors, tokenizer.json
  // "auto": the folder's safetensors; "dummy": random weights of the model's shapes (seed 0; for
  // benchmarks: the folder then needs config.json and the tokenizer only, as in vLLM).
  std::string load_format = "auto";
  // "": projections as the checkpoint stores them (an FP8 checkpoint runs FP8); "fp8": float
  // projections are quantized to FP8 e4m3 as they load (docs/fp8.md; the CPU backend today).
  std::string quantization;
  std::string device = "auto";  // "cpu", "cuda", "cuda:N" or "auto" (backend.h: make_backend)
  // Tensor parallelism (docs/tensor_parallel.md): the model split over this many ranks of one
  // host, a GPU each (from the one `device` names: cuda:N takes N, N + 1, ...), or, on the CPU,
  // threads sharing its cores. Must divide the heads and MLP widths.
  int tensor_parallel_size = 1;
  // Mixture-of-experts models under tensor parallelism: each rank holds 1 / tensor_parallel_size
  // of the routed experts, whole, instead of that share of every expert's width (vLLM's
  // enable_expert_parallel). The expert count must divide by the size.
  bool enable_expert_parallel = false;
  int32_t mask_token_id = -1;   // -1: the model's (config.json, else the family default)
  int block_length = 0;         // 0: the model's training block size
  int max_num_seqs = 512;       // sequences denoised together at most
  int max_model_len = 4096;     // prompt + completion tokens of one sequence at most
  int kvcache_page_size = 256;  // tokens per KV-cache page (any size: a block may span pages)
  // Tokens of one forward at most: a step's sequences are split into as many forwards as this
  // takes (a single sequence's block, or prompt, may exceed it alone). Bounds the activation
  // memory, which the CUDA backend sets aside before sizing the KV cache.
  int max_num_batched_tokens = 16384;
  int64_t num_kvcache_pages = -1;     // -1: as many as kv_cache_memory_bytes allows
  int64_t kv_cache_memory_bytes = 0;  // 0: the backend's default budget
  // CUDA: share of the device's memory this engine may fill (the KV cache gets what the weights,
  // the activations of the largest forward and 1 GiB leave of it, never more than is free beside
  // other processes); used when kv_cache_memory_bytes is 0.
  double gpu_memory_utilization = 0.9;
  bool enable_prefix_caching = true;  // share KV pages of identical prompt prefixes (SDAR only)
  int num_threads = 0;                // CPU threads; 0 = all cores
  bool profile_ops = false;           // time every backend op (slower; see Engine::op_seconds)
  bool enforce_eager = false;         // CUDA: launch every op of every forward (no CUDA graphs)
};

// Per-request sampling settings (the original's SamplingParams; see docs/decoding.md §3-5).
struct SamplingParams {
  double temperature = 1.0;  // 0 = greedy
  int top_k = 0;             // <= 0: off
  double top_p = 1.0;        // 1: off
  double repetition_penalty = 1.0;
  int max_tokens = 64;      // completion tokens at most (exact)
  bool ignore_eos = false;  // do not stop at the model's EOS tokens
  std::vector<int32_t> stop_token_ids;
  // Stop strings: the completion ends at the first place its text (special tokens skipped) holds
  // one of them; completion_text stops before it, completion_ids end with the token that finished
  // it, finish_reason is "stop". A stream never sends text past it.
  std::vector<std::string> stop;
  int block_length = 0;     // 0: the engine's; otherwise must equal it
  int denoising_steps = 4;  // S, 1 <= S <= block_length (<= sub_block_length when that is set)
  // b > 0: the block's masks are denoised b positions at a time, left to right, each sub-block
  // with its own S steps (Fast-dLLM v2's sub-blocks; docs/decoding.md §2); b divides
  // block_length. 0: the whole block at once.
  int sub_block_length = 0;
  // Token editing (LLaDA2.1's T2T; docs/decoding.md §4), off when unset: every step also samples
  // the block's committed completion positions, and one whose sample is more confident than this
  // (in [0, 1]) and differs takes it. A block then ends only after a step that changed nothing, or
  // after max_post_steps steps begun with no mask left (in [0, 1024]). Not with sub-blocks, nor
  // for models with shifted logits.
  std::optional<double> editing_threshold;
  int max_post_steps = 16;
  std::string remasking_strategy = "low_confidence_static";
  double dynamic_threshold = 0.9;
  double dynamic_factor = 1.0;
  double eb_threshold = 0.35;
  // Exploration, the original's diversity_enforce and epsilon_greedy (docs/decoding.md §4):
  int diversity_enforce_barrier = -1;  // >= 0: a block begun with at most this many completion
                                       // tokens uses `sequential`; -1: off
  double epsilon_greedy = 0.0;         // chance that a denoise step uses `random` instead of the strategy
  std::optional<uint64_t> seed;        // reproducible output, independent of the batch
};

// The names SamplingParams::remasking_strategy accepts (docs/decoding.md §4), in a fixed order.
std::vector<std::string> remasking_strategies();

// A prompt is text (tokenized without special-token additions) or token ids.
using Prompt = std::variant<std::string, std::vector<int32_t>>;

struct GenerationOutput {
  std::string text;                 // decode(token_ids), special tokens kept
  std::vector<int32_t> token_ids;   // prompt + completion
  std::vector<int32_t> trajectory;  // per completion token: 1-based denoise step it was unmasked at
  std::vector<float> logprobs;      // per completion token
  std::vector<float> entropies;     // per completion token
  std::vector<int32_t> completion_ids;
  std::string completion_text;  // special tokens skipped
  std::string finish_reason;    // "stop" or "length" ("abort": a served request cancelled)
  int num_forwards = 0;         // prefill + denoise forwards of this sequence (saves ride in them)
  int prompt_len = 0;
};

// A weight handed over from the caller's host memory, under its HuggingFace name
// (e.g. "model.layers.0.self_attn.q_proj.weight"), for the RL weight APIs.
struct WeightView {
  enum class DType { F32, F16, BF16 };
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // contiguous, row-major
  // data is memory of the engine's GPU (CUDA backend): copied there on the device when its dtype
  // is the compute dtype (bf16), through the host otherwise.
  bool on_device = false;
};

// Progress of a generate call, called after every engine step: prompts done, total, completion
// tokens committed so far (finished prompts' and running ones'). An exception thrown from it stops
// the call (the engine stays usable).
using ProgressFn = std::function<void(size_t done, size_t total, size_t completion_tokens)>;
// Called once per finished prompt with its index in the submitted list (streaming).
using OutputFn = std::function<void(size_t index, GenerationOutput&& output)>;

// A completion token as a step committed it (what GenerationOutput holds for it, by position).
struct CommittedToken {
  int32_t id = 0;
  int32_t step = 0;      // the 1-based global denoise step that unmasked it (trajectory's value)
  float logprob = 0.0f;  // ln of its confidence
};

// One request of a serving loop (Engine::serve). The callbacks run on the thread that called serve.
struct ServeRequest {
  Prompt prompt;
  SamplingParams params;
  // After every step that commits completion text for this request: the new text (optional).
  std::function<void(const std::string& text)> on_text;
  // After every step that commits completion tokens for this request, after that step's on_text:
  // the tokens committed since the last call, in order (optional; a visualizer's view of the
  // decode). Together they are the output's completion_ids, trajectory and logprobs; a preempted
  // request recommits the same tokens, which are not sent twice (the output then has the
  // recomputed logprobs, which a different batch may round differently in the last bits).
  std::function<void(const std::vector<CommittedToken>& tokens)> on_tokens;
  // Once, when it finishes.
  std::function<void(GenerationOutput&& output)> on_output;
  // Once instead of everything else, for a request the engine rejects (bad prompt or parameters).
  std::function<void(const std::string& error)> on_error;
  // Polled before every step (optional): once it returns true the request stops where it is,
  // its slot and pages go to others, and on_output gets what it has with finish_reason "abort"
  // (a server's client that went away).
  std::function<bool()> cancelled;
};

// Where Engine::serve takes requests from. Called before every step with how many it may hand
// over now (room) and whether nothing is in flight (idle: it may then block until a request
// comes). Appends at most `room` requests to `out`; returns false to stop serving.
using RequestSource = std::function<bool(size_t room, bool idle, std::vector<ServeRequest>& out)>;

// What the loaded model is, for summaries.
struct ModelSummary {
  std::string model_type;
  int num_layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int block_length = 0;
  int32_t mask_token_id = 0;
  std::vector<int32_t> eos_token_ids;
  int64_t kv_pages = 0, kv_page_size = 0;  // per tensor-parallel rank
  std::string device;
  int tensor_parallel_size = 1;
};

class Engine {
 public:
  explicit Engine(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // One SamplingParams for all prompts, or one per prompt. Outputs in submission order.
  // Invalid arguments throw jet::Error before any work starts; the engine stays usable.
  std::vector<GenerationOutput> generate(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params,
                                         const ProgressFn& progress = {});
  // Continuous batching with at most max_active prompts in flight (<= 0: max_num_seqs);
  // on_output is called as each prompt finishes (in any order, with its index).
  void generate_streaming(const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& params, int max_active,
                          const OutputFn& on_output, const ProgressFn& progress = {});
  // Serving: requests join while others run (continuous batching, at most max_active in flight;
  // <= 0: max_num_seqs). A rejected request gets its on_error and the others go on. Returns once
  // `source` has returned false and the requests in flight have finished.
  void serve(const RequestSource& source, int max_active = 0);
  // Throws the jet::Error that generate and serve give for `params` (the field and its allowed
  // range), without a prompt: for callers that fix their parameters before prompts come.
  void check_params(const SamplingParams& params) const;

  // --- Weights between RL training steps (the original's APIs) ---
  // Overwrites the named weights in place (the KV cache and everything else stay). Every view
  // is checked (known name, shape, dtype) before any is written: on error nothing changes.
  void update_weights(const std::vector<WeightView>& weights);
  // Frees the weights (generation fails until load_weights / reload_from_path).
  void offload_parameters();
  // Frees the weights and the KV cache.
  void free_all_resources();
  // Loads a complete set of weights for the current model (after offload/free, or to replace
  // them all); every tensor the model needs must be given.
  void load_weights(const std::vector<WeightView>& weights);
  // Loads the model folder `dir` (weights, config, tokenizer) and rebuilds the KV cache.
  void reload_from_path(const std::string& dir);
  bool has_weights() const;
  // Sleep mode, for rollouts that share the device with training: frees the device memory the
  // engine holds. Level 1 copies the weights to host memory first and frees the KV cache (and its
  // CUDA graphs); level 2 frees both, like free_all_resources (the weights come back through
  // load_weights or reload_from_path). Generation and update_weights fail until wake_up.
  void sleep(int level = 1);
  // Ends a sleep: the weights come back from host memory, bit for bit (weights), and the KV cache
  // is allocated again (kv_cache; otherwise the next generation allocates it). Either may come
  // first; a KV cache made while the weights sleep leaves room for them.
  void wake_up(bool weights = true, bool kv_cache = true);
  // Whether the weights are in host memory (sleep level 1, not woken yet).
  bool is_sleeping() const;

  const Tokenizer& tokenizer() const;
  std::string apply_chat_template(const std::vector<ChatMessage>& messages,
                                  const ChatTemplateOptions& options = {}) const;
  const ModelSummary& summary() const;
  // Seconds spent in each backend op since construction (empty unless options.profile_ops).
  std::map<std::string, double> op_seconds() const;
  // Seconds since construction the device sat idle between forwards of a generation, waiting for
  // the host (scheduling, batch layouts, copies): wall time that no faster kernel removes.
  double device_idle_seconds() const;
  // Model forwards run since construction: prefills and denoise forwards (the save of a finished
  // block rides in a denoise forward; a step split at max_num_batched_tokens counts each part).
  int64_t num_forwards() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace jet
