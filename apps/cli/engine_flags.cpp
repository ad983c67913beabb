// The shared engine flags (engine_flags.h).
#include "engine_flags.h"

namespace jet::cli {

const char* const kEngineFlagsHelp = R"(Engine
  --device cpu|cuda|cuda:N|auto  (default auto; cuda and auto take LOCAL_RANK's GPU under a launcher)
  --tensor-parallel-size N  split the model over N GPUs of this host from --device's (or N
                            CPU threads sharing its cores); N divides the heads and MLP widths
                            (default 1; docs/tensor_parallel.md)
  --enable-expert-parallel  with --tensor-parallel-size N on a mixture-of-experts model:
                            each rank holds 1/N of the routed experts, whole, instead of 1/N of
                            every expert's width; N divides the expert count
  --block-length B          block length (default: the model's)
  --max-num-seqs N          sequences denoised together at most (default 512)
  --max-model-len N         prompt + completion at most (default 4096)
  --kv-page-size N          tokens per KV-cache page, any size (default 256)
  --max-num-batched-tokens N
                            tokens of one forward at most; a step's sequences are split into
                            several forwards past it (default 16384)
  --kv-cache-mb N           KV-cache memory budget in MiB (default: the backend's)
  --kv-pages N              exact number of KV-cache pages (overrides --kv-cache-mb)
  --gpu-memory-utilization X
                            CUDA: share of the GPU's memory to fill, KV cache included (default 0.9)
  --mask-token-id ID        override the model's mask token
  --threads N               CPU threads (default: all cores)
  --no-prefix-caching       do not share KV pages of identical prompt prefixes
  --enforce-eager           CUDA: no CUDA graphs (launch every op of every forward)
  --quantization fp8        quantize the projections to FP8 e4m3 as they load (an FP8
                            checkpoint runs FP8 without it; CPU backend today; docs/fp8.md)
  --load-format auto|dummy  dummy: random weights of the model's shapes instead of its
                            safetensors (benchmarks; the folder needs config.json and the
                            tokenizer only) (default auto)
)";

std::set<std::string> with_engine_value_flags(std::set<std::string> flags) {
  flags.insert({"--model", "--device", "--tensor-parallel-size", "--block-length", "--max-num-seqs", "--max-model-len",
                "--kv-page-size", "--max-num-batched-tokens", "--kv-cache-mb", "--kv-pages", "--gpu-memory-utilization",
                "--mask-token-id", "--threads", "--load-format", "--quantization"});
  return flags;
}

std::set<std::string> with_engine_bool_flags(std::set<std::string> flags) {
  flags.insert({"--no-prefix-caching", "--enforce-eager", "--enable-expert-parallel"});
  return flags;
}

EngineOptions read_engine_options(const ArgParser& args) {
  EngineOptions o;
  o.model = args.require("--model");
  o.device = args.get("--device").value_or(o.device);
  o.tensor_parallel_size = args.get_int32("--tensor-parallel-size", o.tensor_parallel_size);
  o.enable_expert_parallel = args.has("--enable-expert-parallel");
  o.block_length = args.get_int32("--block-length", o.block_length);
  o.max_num_seqs = args.get_int32("--max-num-seqs", o.max_num_seqs);
  o.max_model_len = args.get_int32("--max-model-len", o.max_model_len);
  o.kvcache_page_size = args.get_int32("--kv-page-size", o.kvcache_page_size);
  o.max_num_batched_tokens = args.get_int32("--max-num-batched-tokens", o.max_num_batched_tokens);
  const long long kv_cache_mb = args.get_int("--kv-cache-mb", 0);
  JET_CHECK(kv_cache_mb >= 0 && kv_cache_mb <= (INT64_MAX >> 20), "flag --kv-cache-mb expects a size in MiB, got ",
            kv_cache_mb);
  o.kv_cache_memory_bytes = static_cast<int64_t>(kv_cache_mb) << 20;
  o.num_kvcache_pages = args.get_int("--kv-pages", o.num_kvcache_pages);
  o.gpu_memory_utilization = args.get_double("--gpu-memory-utilization", o.gpu_memory_utilization);
  o.mask_token_id = args.get_int32("--mask-token-id", o.mask_token_id);
  o.num_threads = args.get_int32("--threads", o.num_threads);
  o.enable_prefix_caching = !args.has("--no-prefix-caching");
  o.enforce_eager = args.has("--enforce-eager");
  o.load_format = args.get("--load-format").value_or(o.load_format);
  o.quantization = args.get("--quantization").value_or(o.quantization);
  return o;
}

}  // namespace jet::cli
