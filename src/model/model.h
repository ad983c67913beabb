// Model: the transformer of every supported family, loaded onto a backend. One forward runs the
// layers over a batch (writing K/V into the paged cache) and, on request, the LM head for chosen
// rows. The families differ only in weight names and options (their architectures,
// model/architecture.h and src/model/arch/), so one forward serves them all.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model_config.h"
#include "model/model_shard.h"
#include "model/tensor_source.h"
#include "backend/communicator.h"

namespace jet {

// Projections are Linear: in the compute dtype, or FP8 (docs/fp8.md); norms never are.
struct LayerWeights {
  Tensor attn_norm;       // [H]
  Linear qkv;             // [(nh + 2 nkv) hd, H]: q, k, v projections stacked
  Tensor qkv_bias;        // [(nh + 2 nkv) hd]: their biases stacked; no data when the family has none
  Tensor q_norm, k_norm;  // [hd] each; no data when the family has no q/k norm
  Linear o;               // [H, nh hd]
  Tensor mlp_norm;        // [H]
  Linear gate_up;         // [2I, H] (dense layers)
  Linear down;            // [H, I]  (dense layers)
  MoeWeights moe;         // (MoE layers)
  bool is_moe = false;
};

struct ModelWeights {
  Tensor embed;       // [V, H]
  Tensor final_norm;  // [H]
  Tensor lm_head;     // [V, H]
  std::vector<LayerWeights> layers;
  std::vector<Buffer> storage;
};

// Where one checkpoint tensor lives inside the (possibly stacked) backend tensors: its rows of
// the weight and, for an FP8 projection, of the scales (rows / 128 of them under Block128).
struct WeightSlot {
  void* data = nullptr;  // first element of this tensor's part
  int64_t numel = 0;
  float* scale = nullptr;  // FP8 only: the part's first scale
  Fp8Scaling scaling = Fp8Scaling::PerChannel;
  DType dtype = DType::F32;  // of a float part: the compute dtype, or F32 (a router's expert bias)
  TensorPart part;           // of the checkpoint tensor, on a tensor-parallel rank
};

class Model {
 public:
  // quantize_fp8: projections given in a float dtype are quantized to FP8 as they load
  // (per-channel scales, docs/fp8.md); an FP8 checkpoint's projections are FP8 either way, and
  // after one the model quantizes float weights it loads later too. A tensor-parallel rank gets
  // its group's communicator (which outlives it) and holds `shard` of the weights
  // (model_shard.h; whole experts under expert_parallel); its forward sums the ranks' attention
  // and MLP outputs through `comm`.
  Model(ModelConfig config, Backend& backend, bool quantize_fp8 = false, Communicator* comm = nullptr,
        int ranks_per_memory = 1, bool expert_parallel = false);

  const ModelConfig& config() const { return config_; }
  // What this rank holds: the heads and widths its forward runs (all of them without tensor
  // parallelism).
  const ModelShard& shard() const { return shard_; }
  Backend& backend() const { return backend_; }
  bool has_weights() const { return !weights_.storage.empty(); }
  // Bytes of backend memory the weights hold.
  size_t weight_bytes() const;
  // Whether the layers' projections run in FP8.
  bool fp8_projections() const;

  // Replaces every weight with the source's (each expected tensor must be there, see
  // weight_map.h); throws before touching the current weights if the source does not match.
  void load(const TensorSource& source);
  // Overwrites the source's tensors in place, after checking every name, shape and dtype.
  void update(const TensorSource& source);
  // Frees the weights.
  void release();
  // Sleep: copies the weights to host memory and frees their backend memory (and the activation
  // scratch); has_weights() is false until wake_weights puts them back, bit for bit, in new
  // backend memory (a no-op when not asleep). load and release end the sleep too. The host
  // memory stays for the next sleep until release (RL loops sleep every step).
  void sleep_weights();
  void wake_weights();
  bool weights_asleep() const { return asleep_.has_value(); }
  // Backend bytes the weights will take again on wake (0 when not asleep).
  size_t asleep_bytes() const;

  // Runs every layer over the batch's tokens `ids` (i32 [T]), writing their K/V into `kv`, and
  // returns the final-normed hidden states [R, H] of rows logit_rows[0..R) (i32 [R], in [0, T))
  // or, without logit_rows, of rows [0, R) (R <= T): the LM head's input, a view of the model's
  // scratch, valid until the next forward. A denoise forward asks for its masked rows only, so
  // the last layer past its K/V skips the committed positions nobody samples; with R = 0 the
  // forward stops after the last layer's K/V and returns an empty tensor.
  Tensor forward_hidden(const ForwardBatch& batch, const Tensor& ids, KvCache& kv, int64_t num_rows,
                        const Tensor* logit_rows = nullptr);
  // logits [R, n] (f32) = hidden [R, H] · lm_headᵀ: the ids [shard().vocab0, + n = shard().vocab)
  // (the whole vocabulary unless the LM head is split).
  void lm_head(const Tensor& hidden, Tensor& logits);
  // x becomes its sum over the tensor-parallel ranks (nothing with one rank).
  void reduce(Tensor& x);
  // The most backend memory forward_hidden's scratch takes for a forward of `tokens` tokens.
  size_t activation_bytes(int64_t tokens) const;
  // forward_hidden, then the logits of its R = logits->dim(0) rows (when logits is given).
  void forward(const ForwardBatch& batch, const Tensor& ids, KvCache& kv, Tensor* logits,
               const Tensor* logit_rows = nullptr);

 private:
  Tensor scratch(int slot, DType dtype, std::initializer_list<int64_t> dims);
  void project(const Tensor& x, const Linear& w, Tensor& out);

  ModelConfig config_;
  Backend& backend_;
  bool quantize_fp8_ = false;
  Communicator* comm_ = nullptr;
  ModelShard shard_;
  ModelWeights weights_;
  std::map<std::string, WeightSlot> slots_;  // checkpoint name -> place in weights_
  std::vector<Buffer> scratch_;              // activation buffers, grown on demand and reused
  struct HostWeights {  // where each of weights_.storage's buffers was and where host_copy_ holds it
    struct Part {
      const void* old_base;
      size_t bytes, offset;
    };
    std::vector<Part> parts;
    size_t bytes = 0;  // of host_copy_ in use, and of the device buffer the weights wake in
  };
  std::optional<HostWeights> asleep_;
  Buffer host_copy_;  // the weights while asleep; kept for the next sleep, freed by release()
};

// Reads config.json and the checkpoint in `dir`, validates every tensor, and uploads the weights;
// with random_weights, reads config.json only and uploads RandomWeights (seed 0) instead.
std::unique_ptr<Model> load_model(const std::string& dir, Backend& backend, bool random_weights = false,
                                  bool quantize_fp8 = false);

}  // namespace jet
