// Getting weights onto the backend, for every family: Model::load / update / release and
// load_model. Tensor names come from weight_map (the one place that knows each family's names);
// projections that run as one GEMM are stacked here (q|k|v, gate|up) and converted to the
// backend's compute dtype, or kept / quantized as FP8 (docs/fp8.md). Each checkpoint tensor's place is remembered for
// in-place updates. load_model can also fill the model with random weights (model/random_weights.h) instead.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "core/fp8.h"
#include "core/log.h"
#include "model/checkpoint.h"
#include "model/fp8_weights.h"
#include "model/model.h"
#include "model/random_weights.h"
#include "model/weight_map.h"

namespace jet {

namespace {

constexpr std::chrono::seconds kLoadProgressInterval{10};

// Elements of `part` of t.
int64_t part_numel(const TensorInfo& t, const TensorPart& part) {
  if (part.whole()) return t.numel();
  int64_t rows = 0;
  for (const auto& [begin, end] : part.row_ranges(t.shape[0])) rows += end - begin;
  const int64_t cols = t.shape.size() == 2 ? t.shape[1] : 1;
  return rows * (part.col_stop(cols) - part.col_begin);
}

// The scales of `part` of a projection [rows, cols]: its rows' under PerChannel (a split of the
// columns keeps every row's scale), its tiles' under Block128, whose rows and columns it must
// not cut.
std::vector<float> scales_of_part(const std::string& name, const float* scales, int64_t rows, int64_t cols,
                                  Fp8Scaling scaling, const TensorPart& part) {
  const int64_t count = fp8_scale_count(scaling, rows, cols);
  if (part.whole()) return std::vector<float>(scales, scales + count);
  const std::vector<std::pair<int64_t, int64_t>> row_ranges = part.row_ranges(rows);
  std::vector<float> out;
  if (scaling == Fp8Scaling::PerChannel) {
    for (const auto& [begin, end] : row_ranges) out.insert(out.end(), scales + begin, scales + end);
    return out;
  }
  const int64_t col_begin = part.col_begin, col_end = part.col_stop(cols);
  auto on_tiles = [](int64_t begin, int64_t end, int64_t size) {
    return begin % 128 == 0 && (end % 128 == 0 || end == size);
  };
  bool aligned = on_tiles(col_begin, col_end, cols);
  for (const auto& [begin, end] : row_ranges) aligned = aligned && on_tiles(begin, end, rows);
  JET_CHECK(aligned, "tensor '", name, "' has 128x128 FP8 scale tiles, and this tensor-parallel rank's part of it ",
            "(rows and columns split by the heads and widths) does not keep whole tiles; use a "
            "tensor_parallel_size whose shares of the heads and widths are multiples of 128");
  const int64_t tile_cols = (cols + 127) / 128;
  for (const auto& [begin, end] : row_ranges) {
    for (int64_t tr = begin / 128; tr < (end + 127) / 128; ++tr) {
      for (int64_t tc = col_begin / 128; tc < (col_end + 127) / 128; ++tc) out.push_back(scales[tr * tile_cols + tc]);
    }
  }
  return out;
}

// Converts one source tensor to the compute dtype, or quantizes it to FP8, and copies it to
// backend memory. A device tensor in the compute dtype is copied on the device; any other comes
// to the host first, since conversion and quantization run there.
class TensorWriter {
 public:
  explicit TensorWriter(Backend& backend) : backend_(backend) {}

  // Writes `part` of t (model_shard.h; all of it when whole). dtype: the compute dtype, or F32
  // for the few tensors kept in fp32 (a router's expert bias).
  void write(const TensorInfo& t, const TensorPart& part, void* dst, DType dtype) {
    if (part.whole() && t.dtype == dtype) {  // a bf16 checkpoint on the GPU: no conversion (8 GB for SDAR-4B)
      const size_t bytes = static_cast<size_t>(t.numel()) * dtype_size(dtype);
      if (t.on_device) {
        backend_.copy_on_device(dst, t.data, bytes);
      } else {
        backend_.upload(dst, t.data, bytes);
      }
      return;
    }
    const void* src = part.whole() ? host_data(t) : gathered(t, part);
    const size_t n = static_cast<size_t>(part_numel(t, part));
    if (t.dtype == dtype) {
      backend_.upload(dst, src, n * dtype_size(dtype));
      return;
    }
    staging_f32_.resize(n);
    convert_to_f32(t.dtype, src, staging_f32_.data(), n);
    const void* out = staging_f32_.data();
    if (dtype != DType::F32) {
      staging_16_.resize(n);
      convert_from_f32(dtype, staging_f32_.data(), staging_16_.data(), n);
      out = staging_16_.data();
    }
    backend_.upload(dst, out, n * dtype_size(dtype));
  }

  // A float tensor [rows, cols] quantized on the host (quantize_e4m3_matrix) as a whole, so a
  // rank's part has the codes and scales the whole model has: `part`'s codes go to `codes`, its
  // scales to `scales`.
  void write_quantized(const TensorInfo& t, const TensorPart& part, Fp8Scaling scaling, void* codes, void* scales) {
    const size_t n = static_cast<size_t>(t.numel());
    staging_f32_.resize(n);
    staging_codes_.resize(n);
    staging_scales_.resize(fp8_scale_count(scaling, t.shape[0], t.shape[1]));
    convert_to_f32(t.dtype, host_data(t), staging_f32_.data(), n);
    quantize_e4m3_matrix(staging_f32_.data(), t.shape[0], t.shape[1], scaling, staging_codes_.data(),
                         staging_scales_.data());
    write_fp8(t.name, staging_codes_.data(), staging_scales_.data(), t.shape[0], t.shape[1], scaling, part, codes,
              scales);
  }

  // `part` of a projection [rows, cols] whose codes and scales (whole, host memory) are given.
  // Under Block128 a part must keep whole 128x128 tiles.
  void write_fp8(const std::string& name, const uint8_t* codes, const float* scales, int64_t rows, int64_t cols,
                 Fp8Scaling scaling, const TensorPart& part, void* codes_dst, void* scales_dst) {
    TensorInfo whole;
    whole.name = name;
    whole.dtype = DType::F8E4M3;
    whole.shape = {rows, cols};
    whole.data = codes;
    whole.nbytes = static_cast<size_t>(rows * cols);
    backend_.upload(codes_dst, part.whole() ? codes : gathered(whole, part),
                    static_cast<size_t>(part_numel(whole, part)));
    const std::vector<float> part_scales = scales_of_part(name, scales, rows, cols, scaling, part);
    backend_.upload(scales_dst, part_scales.data(), part_scales.size() * sizeof(float));
  }

  // t's bytes in host memory: its own, or a copy of a device tensor's (valid until the next call).
  const void* host_data(const TensorInfo& t) {
    if (!t.on_device) return t.data;
    staging_device_.resize(t.nbytes);
    backend_.download(staging_device_.data(), t.data, t.nbytes);
    return staging_device_.data();
  }

  // The elements of `part` of t, row by row, in host memory (valid until the next call).
  const void* gathered(const TensorInfo& t, const TensorPart& part) {
    const char* src = static_cast<const char*>(host_data(t));
    const size_t elem = dtype_size(t.dtype);
    const int64_t cols = t.shape.size() == 2 ? t.shape[1] : 1;
    const int64_t col_begin = part.col_begin, col_end = part.col_stop(cols);
    staging_part_.resize(static_cast<size_t>(part_numel(t, part)) * elem);
    char* dst = reinterpret_cast<char*>(staging_part_.data());
    const size_t row_bytes = static_cast<size_t>(col_end - col_begin) * elem;
    for (const auto& [begin, end] : part.row_ranges(t.shape[0])) {
      for (int64_t r = begin; r < end; ++r) {
        std::memcpy(dst, src + (static_cast<size_t>(r * cols + col_begin)) * elem, row_bytes);
        dst += row_bytes;
      }
    }
    return staging_part_.data();
  }

 private:
  Backend& backend_;
  std::vector<std::byte> staging_device_, staging_part_;
  std::vector<float> staging_f32_, staging_scales_;
  std::vector<uint16_t> staging_16_;
  std::vector<uint8_t> staging_codes_;
};

// A checkpoint tensor, or the part of it that this rank holds.
struct Piece {
  std::string name;
  TensorPart part;
};

// Allocates the model's tensors and fills them from a source, recording each name's slot.
class WeightBuilder {
 public:
  WeightBuilder(Backend& backend, const TensorSource& source, ModelWeights& weights,
                std::map<std::string, WeightSlot>& slots)
      : backend_(backend), source_(source), weights_(weights), slots_(slots), writer_(backend) {}

  // The pieces stacked along their first dimension, as one backend tensor of `dims`, in the
  // compute dtype unless `f32`.
  Tensor stacked(const std::vector<Piece>& pieces, std::initializer_list<int64_t> dims, bool f32 = false) {
    const DType dtype = f32 ? DType::F32 : backend_.compute_dtype();
    Tensor out = backend_.alloc_tensor(weights_.storage, dtype, dims);
    char* dst = out.ptr<char>();
    for (const Piece& piece : pieces) {
      const TensorInfo* t = source_.find(piece.name);
      JET_ASSERT(t, "tensor ", piece.name, " passed validation but is missing");
      const int64_t numel = part_numel(*t, piece.part);
      const size_t bytes = static_cast<size_t>(numel) * dtype_size(dtype);
      JET_ASSERT(dst + bytes <= out.ptr<char>() + out.nbytes(), "tensor ", piece.name, " overflows its stack");
      writer_.write(*t, piece.part, dst, dtype);
      slots_[piece.name] = WeightSlot{dst, numel, nullptr, Fp8Scaling::PerChannel, dtype, piece.part};
      dst += bytes;
    }
    JET_ASSERT(dst == out.ptr<char>() + out.nbytes(), "stacked tensors do not fill their destination");
    return out;
  }

  // A whole tensor (a norm, router or embedding: every rank holds all of it).
  Tensor single(const std::string& name, bool f32 = false) {
    const TensorInfo* t = source_.find(name);
    JET_ASSERT(t && t->shape.size() >= 1 && t->shape.size() <= 2, "tensor ", name, " passed validation but is odd");
    if (t->shape.size() == 1) return stacked({{name}}, {t->shape[0]}, f32);
    return stacked({{name}}, {t->shape[0], t->shape[1]}, f32);
  }

  // A projection: the pieces of [rows_i, cols] tensors stacked into one Linear of `dims` ([N, K],
  // or [E, N, K] for experts). FP8 when the checkpoint's tensors are (validation made a stack all
  // FP8 or none) or when quantizing at load; else as `stacked`.
  Linear projection(const std::vector<Piece>& pieces, std::initializer_list<int64_t> dims, bool quantize) {
    const bool from_checkpoint = source_.find(pieces.front().name)->dtype == DType::F8E4M3;
    if (!from_checkpoint && !quantize) return {stacked(pieces, dims)};
    Linear w;
    w.weight = backend_.alloc_tensor(weights_.storage, DType::F8E4M3, dims);
    std::string problem;
    if (from_checkpoint) {
      const TensorInfo& first = *source_.find(pieces.front().name);
      w.scaling = find_fp8_scale(source_, first.name, first.shape[0], first.shape[1], problem).scaling;
    }
    const std::vector<int64_t> d(dims);
    const int64_t cols = d.back(), rows = d[d.size() - 2], experts = d.size() == 3 ? d[0] : 1;
    // Scales [rows] or [row blocks, col blocks], with the experts' dimension first when stacked.
    std::vector<int64_t> scale_dims = w.scaling == Fp8Scaling::PerChannel
                                          ? std::vector<int64_t>{rows}
                                          : std::vector<int64_t>{(rows + 127) / 128, (cols + 127) / 128};
    if (d.size() == 3) scale_dims.insert(scale_dims.begin(), experts);
    w.scale = backend_.alloc_tensor(weights_.storage, DType::F32, {experts * fp8_scale_count(w.scaling, rows, cols)});
    w.scale.ndim = static_cast<int>(scale_dims.size());
    std::copy(scale_dims.begin(), scale_dims.end(), w.scale.shape.begin());
    uint8_t* codes = w.weight.ptr<uint8_t>();
    float* scales = w.scale.ptr<float>();
    for (const Piece& piece : pieces) {
      const TensorInfo& t = *source_.find(piece.name);
      const int64_t numel = part_numel(t, piece.part);
      const int64_t part_rows = numel / cols;
      if (from_checkpoint) {
        host_scales_.resize(fp8_scale_count(w.scaling, t.shape[0], t.shape[1]));
        read_fp8_scale(find_fp8_scale(source_, piece.name, t.shape[0], t.shape[1], problem), t.shape[0], t.shape[1],
                       host_scales_.data());
        writer_.write_fp8(piece.name, static_cast<const uint8_t*>(t.data), host_scales_.data(), t.shape[0], t.shape[1],
                          w.scaling, piece.part, codes, scales);
      } else {
        writer_.write_quantized(t, piece.part, w.scaling, codes, scales);
      }
      slots_[piece.name] = WeightSlot{codes, numel, scales, w.scaling, DType::F32, piece.part};
      codes += numel;
      scales += fp8_scale_count(w.scaling, part_rows, cols);
    }
    JET_ASSERT(codes == w.weight.ptr<uint8_t>() + w.weight.nbytes(), "stacked FP8 tensors do not fill their weight");
    return w;
  }

 private:
  Backend& backend_;
  const TensorSource& source_;
  ModelWeights& weights_;
  std::map<std::string, WeightSlot>& slots_;
  TensorWriter writer_;
  std::vector<float> host_scales_;
};

// The parts of a layer's split tensors that one rank holds (all of each on a whole shard).
class ShardParts {
 public:
  ShardParts(const ModelConfig& c, const ModelShard& s) : c_(c), s_(s) {}

  // Rows of the q, k and v projections (and biases); fused, the three ranges of one tensor.
  TensorPart q() const { return rows(s_.head0 * c_.head_dim, s_.heads * c_.head_dim); }
  TensorPart kv() const { return rows(s_.kv_head0 * c_.head_dim, s_.kv_heads * c_.head_dim); }
  TensorPart fused_qkv() const {
    if (s_.whole()) return {};
    const int64_t q_rows = c_.heads * c_.head_dim, kv_rows = c_.kv_heads * c_.head_dim;
    const auto [kv_begin, kv_end] = kv().rows[0];
    TensorPart p = q();
    for (int64_t offset : {q_rows, q_rows + kv_rows}) p.rows.emplace_back(offset + kv_begin, offset + kv_end);
    return p;
  }
  TensorPart o() const { return cols(s_.head0 * c_.head_dim, s_.heads * c_.head_dim); }
  // Column-parallel (gate, up: output rows) and row-parallel (down: input columns) MLP parts of
  // a width that this rank holds `width` of.
  TensorPart mlp_in(int64_t width) const { return rows(s_.rank * width, width); }
  TensorPart mlp_out(int64_t width) const { return cols(s_.rank * width, width); }

 private:
  TensorPart rows(int64_t begin, int64_t count) const {
    return s_.whole() ? TensorPart{} : TensorPart::row_range(begin, begin + count);
  }
  TensorPart cols(int64_t begin, int64_t count) const {
    return s_.whole() ? TensorPart{} : TensorPart::col_range(begin, begin + count);
  }
  const ModelConfig& c_;
  const ModelShard& s_;
};

LayerWeights build_layer(const ModelConfig& c, const ModelShard& s, int64_t layer, bool quantize, WeightBuilder& b) {
  const LayerWeightNames n = layer_weight_names(c, layer);
  const ShardParts part(c, s);
  const int64_t hd = c.head_dim, qkv_rows = (s.heads + 2 * s.kv_heads) * hd;
  LayerWeights w;
  w.attn_norm = b.single(n.attn_norm);
  std::vector<Piece> qkv;
  if (n.k_proj.empty()) {
    qkv.push_back({n.q_proj, part.fused_qkv()});
  } else {
    qkv.push_back({n.q_proj, part.q()});
    qkv.push_back({n.k_proj, part.kv()});
    qkv.push_back({n.v_proj, part.kv()});
  }
  w.qkv = b.projection(qkv, {qkv_rows, c.hidden}, quantize);
  if (c.qkv_bias) {
    w.qkv_bias = b.stacked({{n.q_bias, part.q()}, {n.k_bias, part.kv()}, {n.v_bias, part.kv()}}, {qkv_rows});
  }
  if (c.qk_norm) {
    w.q_norm = b.single(n.q_norm);
    w.k_norm = b.single(n.k_norm);
  }
  w.o = b.projection({{n.o_proj, part.o()}}, {c.hidden, s.heads * hd}, quantize);
  w.mlp_norm = b.single(n.mlp_norm);
  w.is_moe = c.is_moe_layer(layer);
  if (!w.is_moe) {
    const int64_t I = s.intermediate;
    w.gate_up = b.projection({{n.gate_proj, part.mlp_in(I)}, {n.up_proj, part.mlp_in(I)}}, {2 * I, c.hidden}, quantize);
    w.down = b.projection({{n.down_proj, part.mlp_out(I)}}, {c.hidden, I}, quantize);
    return w;
  }
  // Under expert parallelism this rank's experts are whole (their width is the model's).
  const int64_t I = s.moe_intermediate;
  const TensorPart expert_in = s.expert_parallel ? TensorPart{} : part.mlp_in(I);
  const TensorPart expert_out = s.expert_parallel ? TensorPart{} : part.mlp_out(I);
  std::vector<Piece> gate_up, down;
  for (int64_t e = s.expert0; e < s.expert0 + s.experts; ++e) {
    const ExpertWeightNames en = expert_weight_names(c, layer, e);
    gate_up.push_back({en.gate_proj, expert_in});
    gate_up.push_back({en.up_proj, expert_in});
    down.push_back({en.down_proj, expert_out});
  }
  w.moe.router = b.single(n.router);
  w.moe.gate_up = b.projection(gate_up, {s.experts, 2 * I, c.hidden}, quantize);
  w.moe.down = b.projection(down, {s.experts, c.hidden, I}, quantize);
  w.moe.expert0 = s.expert0;
  w.moe.top_k = static_cast<int>(c.experts_per_token);
  MoeRouting& routing = w.moe.routing;
  routing.score = c.sigmoid_router ? MoeRouting::Score::Sigmoid : MoeRouting::Score::Softmax;
  if (c.router_bias) routing.bias = b.single(n.router_bias, /*f32=*/true);
  routing.n_group = static_cast<int>(c.n_group);
  routing.topk_group = static_cast<int>(c.topk_group);
  routing.renormalize = c.norm_topk_prob;
  routing.scaling = static_cast<float>(c.routed_scaling);
  if (c.shared_expert_intermediate > 0) {
    const int64_t S = s.shared_intermediate;
    w.moe.shared_gate_up =
        b.projection({{n.shared_gate, part.mlp_in(S)}, {n.shared_up, part.mlp_in(S)}}, {2 * S, c.hidden}, quantize);
    w.moe.shared_down = b.projection({{n.shared_down, part.mlp_out(S)}}, {c.hidden, S}, quantize);
  }
  return w;
}

// Whether two tensors of one size hold the same bytes, wherever they are.
bool same_bytes(const TensorInfo& a, const TensorInfo& b, Backend& backend) {
  if (!a.on_device && !b.on_device) return std::memcmp(a.data, b.data, a.nbytes) == 0;
  std::vector<std::byte> host_a(a.nbytes), host_b(b.nbytes);
  for (auto [t, host] : {std::pair{&a, &host_a}, std::pair{&b, &host_b}}) {
    if (t->on_device) {
      backend.download(host->data(), t->data, t->nbytes);
    } else {
      std::memcpy(host->data(), t->data, t->nbytes);
    }
  }
  return host_a == host_b;
}

}  // namespace

void Model::load(const TensorSource& source) {
  require_valid_weights(config_, source);
  const std::vector<ExpectedTensor> expected = expected_tensors(config_);
  const bool fp8_source = [&] {
    for (const ExpectedTensor& t : expected) {
      if (source.find(t.name)->dtype == DType::F8E4M3) return true;
    }
    return false;
  }();
  JET_CHECK(!(quantize_fp8_ || fp8_source) || backend_.supports_fp8(), source.description(), ": ",
            fp8_source ? "an FP8 checkpoint" : "quantization fp8", " needs FP8 GEMMs, which the ", backend_.name(),
            " backend does not have yet (the cpu backend does)");
  bool has_experts = false;
  for (int64_t l = 0; l < config_.layers; ++l) has_experts = has_experts || config_.is_moe_layer(l);
  JET_CHECK(!(quantize_fp8_ || fp8_source) || !has_experts || backend_.supports_fp8_experts(), source.description(),
            ": ", fp8_source ? "an FP8 checkpoint" : "quantization fp8",
            " of a mixture-of-experts model needs FP8 expert ", "GEMMs, which the ", backend_.name(),
            " backend does not have yet (the cpu backend does)");
  release();  // free the old weights first: a model rarely fits twice
  // A model larger than the memory left would get the process killed part way (the CPU's memory
  // is granted before it is touched) or fail on some later tensor: refused up front.
  const bool fp8 = quantize_fp8_ || fp8_source;
  // Split projections take a share on each rank, and ranks that share one memory (the CPU
  // backend's all take host memory) need their sum there.
  size_t needed = 0;
  for (const ExpectedTensor& t : expected) {
    const size_t bytes =
        static_cast<size_t>(t.numel()) * (fp8 && t.projection ? 1 : dtype_size(backend_.compute_dtype()));
    needed += t.projection ? bytes / shard_.size : bytes;
  }
  needed *= shard_.ranks_per_memory;
  const size_t available = backend_.available_memory_bytes();
  JET_CHECK(available == 0 || needed <= available, source.description(), ": the weights need ", needed >> 20,
            " MiB in ", fp8 ? "FP8 and " : "", dtype_name(backend_.compute_dtype()), " on the ", backend_.name(),
            " backend, more than the ", available >> 20, " MiB of memory available");
  ModelWeights w;
  std::map<std::string, WeightSlot> slots;
  WeightBuilder b(backend_, source, w, slots);
  const ModelWeightNames names = model_weight_names(config_);
  w.embed = b.single(names.embed);
  // A large model takes a while (conversion and quantization run on the host): rank 0 says how
  // far it is every few seconds, as other engines show a progress bar.
  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  for (int64_t l = 0; l < config_.layers; ++l) {
    w.layers.push_back(build_layer(config_, shard_, l, quantize_fp8_, b));
    const auto now = std::chrono::steady_clock::now();
    if (shard_.rank == 0 && l + 1 < config_.layers && now - last_report >= kLoadProgressInterval) {
      last_report = now;
      log_info("weights: ", l + 1, " of ", config_.layers, " layers loaded (",
               std::lround(std::chrono::duration<double>(now - start).count()), " s)");
    }
  }
  w.final_norm = b.single(names.final_norm);
  // The LM head's rows of this rank's vocabulary slice (a view of the embedding when tied).
  const ModelShard& s = shard_;
  if (names.lm_head == names.embed) {
    w.lm_head = w.embed.rows(s.vocab0, s.vocab0 + s.vocab);
  } else {
    const TensorPart rows = s.vocab_split ? TensorPart::row_range(s.vocab0, s.vocab0 + s.vocab) : TensorPart{};
    w.lm_head = b.stacked({{names.lm_head, rows}}, {s.vocab, config_.hidden});
  }
  weights_ = std::move(w);
  slots_ = std::move(slots);
  // A model that runs FP8 keeps doing so when a later whole set comes in floats (an RL trainer's).
  quantize_fp8_ = quantize_fp8_ || fp8_source;
}

void Model::update(const TensorSource& source) {
  JET_CHECK(!weights_asleep(),
            "update_weights: the engine is asleep; wake_up() first (its weights are in host memory)");
  JET_CHECK(has_weights(),
            "update_weights: the weights were freed; load a whole set first (load_weights, "
            "Python's reload_from_hf_model, or reload_from_path)");
  std::map<std::string, std::vector<int64_t>> expected;
  for (const ExpectedTensor& t : expected_tensors(config_)) expected[t.name] = t.shape;
  // A tied head given under its own name (a state_dict gathered tensor by tensor holds two copies)
  // is the embedding: written there, and when the embedding comes too, it must be the same.
  const ModelWeightNames names = model_weight_names(config_);
  std::vector<std::pair<const TensorInfo*, std::string>> writes;  // tensor, the slot it goes to
  for (const std::string& name : source.names()) {
    const TensorInfo& t = *source.find(name);
    if (!names.tied_alias.empty() && name == names.tied_alias) {
      const TensorInfo* embed = source.find(names.embed);
      JET_CHECK(!embed || (embed->dtype == t.dtype && embed->shape == t.shape && embed->nbytes == t.nbytes &&
                           same_bytes(*embed, t, backend_)),
                source.description(), ": '", name, "' is this model's tied embedding '", names.embed,
                "', and differs from it: give one of them, or both equal");
      if (!embed) writes.emplace_back(&t, names.embed);
      continue;
    }
    writes.emplace_back(&t, name);
  }
  for (const auto& [tensor, slot] : writes) {
    const std::string& name = tensor->name;
    auto it = expected.find(slot);
    JET_CHECK(it != expected.end(), source.description(), ": '", name, "' is not a weight of this ",
              family_name(config_.family), " model");
    const TensorInfo& t = *tensor;
    JET_CHECK(t.shape == it->second, source.description(), ": tensor '", name, "' has shape ", shape_string(t.shape),
              ", expected ", shape_string(it->second));
    JET_CHECK(t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16, source.description(),
              ": tensor '", name, "' has dtype ", dtype_name(t.dtype), ", expected BF16, F16 or F32");
  }
  TensorWriter writer(backend_);
  for (const auto& [tensor, slot_name] : writes) {
    const auto held = slots_.find(slot_name);
    if (held == slots_.end()) continue;  // an expert another expert-parallel rank holds
    const WeightSlot& slot = held->second;
    if (slot.scale) {  // an FP8 projection takes new weights as floats and quantizes them as its load did
      writer.write_quantized(*tensor, slot.part, slot.scaling, slot.data, slot.scale);
    } else {
      writer.write(*tensor, slot.part, slot.data, slot.dtype);
    }
  }
}

void Model::release() {
  asleep_.reset();
  host_copy_ = Buffer();
  weights_ = ModelWeights{};
  slots_.clear();
  scratch_.clear();
}

std::unique_ptr<Model> load_model(const std::string& dir, Backend& backend, bool random_weights, bool quantize_fp8) {
  auto model = std::make_unique<Model>(load_model_config(dir), backend, quantize_fp8);
  if (random_weights) {
    model->load(RandomWeights(model->config(), 0));
  } else {
    model->load(Checkpoint(dir));
  }
  return model;
}

}  // namespace jet
