// forward_probe: runs the engine's model teacher-forced and prints the logits of a block, so
// tests can compare them with the NumPy reference (CPU backend) or with HF transformers on the GPU
// (--device cuda). Reads one JSON object per line on stdin: {"committed": [ids], "num_prefill": n,
// "block": [ids], "block_length": B} (committed = prompt prefill part + committed blocks), and
// prints {"logits": [[...] x B]}, the logits of the block's own positions (unshifted). With
// --quantization fp8 the model's projections are quantized to FP8 as they load.
// The K/V of the committed tokens is written as the engine writes it: one prefill forward over
// [0, num_prefill), then one save forward per committed block.
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "model/model.h"

using namespace jet;

namespace {

// One forward of `ids` at positions [start, start + n) with [0, start) already cached.
void run(Model& model, KvCache& kv, const std::vector<int32_t>& ids, int start, int mask_block, Tensor* logits) {
  Backend& be = model.backend();
  ForwardBatch batch;
  BatchLayout& l = batch.host;
  l.num_seqs = 1;
  l.num_tokens = static_cast<int>(ids.size());
  l.max_pages = kv.num_pages;
  l.mask_block = mask_block;
  for (int i = 0; i < l.num_tokens; ++i) l.positions.push_back(start + i);
  l.seq_starts = {0, l.num_tokens};
  l.cached_lens = {start};
  for (int p = 0; p < kv.num_pages; ++p) l.page_table.push_back(kv.num_pages - 1 - p);  // scrambled pages
  std::vector<Buffer> owner;
  be.upload_batch(batch, owner);
  Tensor ids_t = be.alloc_tensor(owner, DType::I32, {l.num_tokens});
  be.upload(ids_t.data, ids.data(), ids.size() * 4);
  model.forward(batch, ids_t, kv, logits);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir, device = "cpu";
  bool quantize = false, usage_ok = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--model" && has_value) {
      model_dir = argv[++i];
    } else if (arg == "--device" && has_value) {
      device = argv[++i];
    } else if (arg == "--quantization" && has_value && std::string(argv[i + 1]) == "fp8") {
      quantize = true;
      ++i;
    } else {
      usage_ok = false;
    }
  }
  if (!usage_ok || model_dir.empty()) {
    std::cerr << "usage: forward_probe --model DIR [--device cpu|cuda] [--quantization fp8] < requests.jsonl\n";
    return 2;
  }
  try {
    auto backend = make_backend(device, 0);
    auto model = load_model(model_dir, *backend, false, quantize);
    const ModelConfig& c = model->config();
    std::string line;
    while (std::getline(std::cin, line)) {
      const auto req = nlohmann::json::parse(line);
      const auto committed = req.at("committed").get<std::vector<int32_t>>();
      const auto block = req.at("block").get<std::vector<int32_t>>();
      const int B = req.at("block_length").get<int>();
      const int num_prefill = req.at("num_prefill").get<int>();
      const int mask_block = c.block_causal ? B : 0;
      constexpr int kPage = 16;
      const int pages = static_cast<int>((committed.size() + block.size()) / kPage + 2);
      KvCache kv = backend->alloc_kv_cache(c.layers, pages, kPage, c.kv_heads, c.head_dim);
      if (num_prefill > 0) {
        run(*model, kv, {committed.begin(), committed.begin() + num_prefill}, 0, mask_block, nullptr);
      }
      for (size_t s = num_prefill; s < committed.size(); s += B) {
        run(*model, kv, {committed.begin() + s, committed.begin() + s + B}, static_cast<int>(s), mask_block, nullptr);
      }
      std::vector<Buffer> owner;
      Tensor logits = backend->alloc_tensor(owner, DType::F32, {static_cast<int64_t>(block.size()), c.vocab});
      run(*model, kv, block, static_cast<int>(committed.size()), mask_block, &logits);
      std::vector<float> host(static_cast<size_t>(logits.numel()));
      backend->download(host.data(), logits.data, logits.nbytes());
      nlohmann::json rows = nlohmann::json::array();
      for (size_t r = 0; r < block.size(); ++r) {
        const float* row = host.data() + r * c.vocab;
        rows.push_back(std::vector<float>(row, row + c.vocab));
      }
      std::cout << nlohmann::json{{"logits", rows}}.dump() << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "forward_probe: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
