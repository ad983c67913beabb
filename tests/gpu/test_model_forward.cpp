// End to end: one tiny random model per family (tools/make_tiny_model.py: SDAR, SDAR-MoE,
// LLaDA, and an SDAR with the real head_dim of 128) loaded on the CPU and on the CUDA backend,
// run teacher-forced over a prefill of two packed prompts and then over one block per sequence on
// top of the cached prefix; the logits of every row are compared. Run from the repository root
// (it calls python3 tools/make_tiny_model.py); exits non-zero on any failure.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "gpu_test_util.h"
#include "model/model.h"

using namespace jet;
using namespace jet::gpu_test;
namespace fs = std::filesystem;

namespace {

// A forward rounds every activation to bf16 about ten times per layer (norms, projections, RoPE,
// attention, residual adds), so the logits differ from the fp32 forward by a few of the 2^-9
// roundings compounded: allow 3x the single-op tolerance.
constexpr double kLogitsRtol = 3e-2;
// MoE routing is discontinuous: a token whose k-th and (k+1)-th router probabilities lie within
// bf16 noise of each other (~1%) may take another expert on the GPU, and its logits row then
// differs by far more than rounding (seen: one token of 19 with a 0.15% margin). MoE models may
// have up to one row in this many out of tolerance; dense models none.
constexpr int kMoeRowsPerFlip = 8;
constexpr int kPageSize = 4;
constexpr int kPagesPerSeq = 16;  // 64 tokens: a 12-token prompt plus a block of up to 52

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "jet_gpu_test_XXXXXX").string();
    JET_CHECK(mkdtemp(pattern.data()) != nullptr, "cannot create a temporary directory from ", pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// One forward of `ids` on a backend with its own cache; returns the logits of every row.
class Runner {
 public:
  Runner(Backend& backend, const std::string& model_dir, int num_seqs) : backend_(backend) {
    model_ = load_model(model_dir, backend_);
    const ModelConfig& c = model_->config();
    kv_ = backend_.alloc_kv_cache(static_cast<int>(c.layers), num_seqs * kPagesPerSeq, kPageSize,
                                  static_cast<int>(c.kv_heads), static_cast<int>(c.head_dim));
  }
  const ModelConfig& config() const { return model_->config(); }

  std::vector<float> forward(const BatchLayout& layout, const std::vector<int32_t>& ids) {
    std::vector<Buffer> owner;
    ForwardBatch batch;
    batch.host = layout;
    backend_.upload_batch(batch, owner);
    Tensor ids_t = backend_.alloc_tensor(owner, DType::I32, {layout.num_tokens});
    backend_.upload(ids_t.data, ids.data(), ids.size() * sizeof(int32_t));
    Tensor logits = backend_.alloc_tensor(owner, DType::F32, {layout.num_tokens, config().vocab});
    model_->forward(batch, ids_t, kv_, &logits);
    std::vector<float> out(static_cast<size_t>(logits.numel()));
    backend_.download(out.data(), logits.data, logits.nbytes());
    return out;
  }

 private:
  Backend& backend_;
  std::unique_ptr<Model> model_;
  KvCache kv_;
};

// new_lens[s] new tokens of sequence s after cached_lens[s] cached ones; sequence s owns pages
// [s * kPagesPerSeq, (s + 1) * kPagesPerSeq), listed in reverse so page order is exercised.
BatchLayout layout_for(const std::vector<int>& cached_lens, const std::vector<int>& new_lens, int mask_block) {
  BatchLayout l;
  l.num_seqs = static_cast<int>(new_lens.size());
  l.max_pages = kPagesPerSeq;
  l.mask_block = mask_block;
  l.seq_starts = {0};
  for (int s = 0; s < l.num_seqs; ++s) {
    for (int i = 0; i < new_lens[s]; ++i) l.positions.push_back(cached_lens[s] + i);
    l.seq_starts.push_back(l.seq_starts.back() + new_lens[s]);
    l.cached_lens.push_back(cached_lens[s]);
    for (int p = kPagesPerSeq - 1; p >= 0; --p) l.page_table.push_back(s * kPagesPerSeq + p);
  }
  l.num_tokens = l.seq_starts.back();
  return l;
}

void compare_family(Report& report, const std::string& name, const std::string& tool_args, std::mt19937& rng) {
  report.run(name, [&] {
    TempDir dir;
    const std::string command =
        "python3 tools/make_tiny_model.py " + tool_args + " --out " + dir.path().string() + " > /dev/null";
    JET_CHECK(std::system(command.c_str()) == 0, "failed: ", command);
    auto cpu = make_cpu_backend(0);
    auto cuda = make_cuda_backend();
    Runner on_cpu(*cpu, dir.path().string(), 2), on_cuda(*cuda, dir.path().string(), 2);
    const ModelConfig& c = on_cpu.config();
    const int B = static_cast<int>(c.block_size > 0 ? c.block_size : 4);
    const int mask_block = c.block_causal ? B : 0;
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(c.vocab - 1));
    auto random_ids = [&](int n) {
      std::vector<int32_t> ids(n);
      for (int32_t& id : ids) id = token(rng);
      return ids;
    };

    const int64_t V = c.vocab;
    const bool moe = c.num_experts > 0;
    auto compare = [&](const std::string& what, const BatchLayout& layout) {
      const std::vector<int32_t> ids = random_ids(layout.num_tokens);
      const int max_bad_rows = moe ? layout.num_tokens / kMoeRowsPerFlip : 0;
      expect_rows_close(report, name + " " + what, on_cuda.forward(layout, ids), on_cpu.forward(layout, ids), V,
                        kLogitsRtol, max_bad_rows);
    };
    compare("prefill logits", layout_for({0, 0}, {7, 12}, mask_block));
    compare("block logits over the cached prefix", layout_for({7, 12}, {B, B}, mask_block));
  });
}

}  // namespace

int main() {
  if (jet::gpu_test::skip_without_device()) return jet::gpu_test::kSkipWithoutDevice;
  Report report;
  std::mt19937 rng(99);
  compare_family(report, "sdar", "--arch sdar --seed 3", rng);
  compare_family(report, "sdar_moe", "--arch sdar_moe --seed 4", rng);
  compare_family(report, "llada", "--arch llada --seed 5", rng);
  compare_family(report, "sdar head_dim 128",
                 "--arch sdar --seed 6 --hidden 256 --heads 4 --kv-heads 2 --head-dim 128 --intermediate 384", rng);
  return report.exit_code();
}
