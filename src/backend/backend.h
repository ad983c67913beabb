// The backend interface: memory, the op table the models need, and the per-step decode op
// (sampling + remasking, whose plain-data types are in sampling/sampling_types.h). The engine and the models see only
// this; the CPU backend is the reference, the CUDA backend its twin. Batch data reaches ops as explicit arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/tensor.h"
#include "core/fp8.h"
#include "core/host_device.h"
#include "backend/communicator.h"
#include "sampling/sampling_types.h"

namespace jet {

// --- Batch description -------------------------------------------------------------------------

// One forward over several sequences. Sequence s contributes the packed rows
// [seq_starts[s], seq_starts[s+1]): new tokens at positions cached_lens[s], cached_lens[s] + 1, ...
// Every forward first writes the K/V of its tokens into the cache at their positions, then a query
// at position p attends every key at position q < cached_lens[s] + num_new[s] such that, when
// mask_block > 0, floor(q / mask_block) <= floor(p / mask_block) (block-causal, SDAR); with
// mask_block == 0 the attention is bidirectional (LLaDA). See docs/decoding.md §1.
struct BatchLayout {
  int num_seqs = 0;
  int num_tokens = 0;
  int max_pages = 0;                 // width of page_table
  int mask_block = 0;                // 0 = bidirectional, else the block length
  std::vector<int32_t> positions;    // [num_tokens]
  std::vector<int32_t> seq_starts;   // [num_seqs + 1]
  std::vector<int32_t> cached_lens;  // [num_seqs]
  std::vector<int32_t> page_table;   // [num_seqs, max_pages], row-major, -1 for unused entries
};

// The cache slot (page * page_size + offset in the page) holding `position` of sequence `seq`,
// through a page table [sequences, max_pages]: the one rule every K/V store and load follows.
JET_HOST_DEVICE inline int64_t paged_slot(const int32_t* page_table, int max_pages, int page_size, int seq,
                                          int64_t position) {
  return int64_t{page_table[int64_t{seq} * max_pages + position / page_size]} * page_size + position % page_size;
}

// The same, as tensors in backend memory (filled by Backend::upload_batch).
struct ForwardBatch {
  BatchLayout host;
  Tensor positions;    // i32 [num_tokens]
  Tensor seq_starts;   // i32 [num_seqs + 1]
  Tensor cached_lens;  // i32 [num_seqs]
  Tensor page_table;   // i32 [num_seqs, max_pages]
};

// Paged KV cache: per layer K and V of shape [num_pages, page_size, kv_heads, head_dim].
struct KvCache {
  int num_pages = 0;
  int page_size = 0;
  int kv_heads = 0;
  int head_dim = 0;
  std::vector<Tensor> k, v;  // one per layer
  std::vector<Buffer> storage;
};

// --- Per-layer weights the ops take --------------------------------------------------------------

// A projection's weight w [N, K] (per expert [E, N, K], scales then [E, ...] too): in the
// backend's compute dtype, or FP8: e4m3 codes (DType::F8E4M3) and the fp32 scales that
// dequantize them, w = code * scale.
struct Linear {
  Tensor weight;
  Tensor scale;  // FP8 only
  Fp8Scaling scaling = Fp8Scaling::PerChannel;

  bool fp8() const { return weight.dtype == DType::F8E4M3; }
};

// How a MoE layer picks its experts from the router logits.
struct MoeRouting {
  // Softmax (Qwen3-MoE): probabilities over all experts, the top_k of them. Sigmoid (LLaDA2,
  // BailingMoeV2): per-expert sigmoid scores; `bias` (f32 [E], no data = none) is added for the
  // choice only; experts lie in n_group consecutive groups, a group scores the sum of its two
  // best biased scores, and the top_k come from the topk_group best groups. Ties go to the lower
  // group and expert.
  enum class Score { Softmax, Sigmoid } score = Score::Softmax;
  Tensor bias;
  int n_group = 1, topk_group = 1;
  bool renormalize = true;  // divide the chosen (unbiased) scores by their sum
  float scaling = 1.0f;     // then multiply them by this (routed_scaling_factor)
};

struct MoeWeights {
  Tensor router;  // [E, H] (never FP8: it decides the routing)
  // The experts [expert0, expert0 + N) of the E (N < E: an expert-parallel rank's; the routes to
  // the others add nothing here).
  Linear gate_up;  // [N, 2I, H]: rows [0, I) gate, [I, 2I) up
  Linear down;     // [N, H, I]
  int top_k = 0;
  MoeRouting routing;
  // A shared expert every token also runs, unweighted (LLaDA2): [2S, H] and [H, S]; no data = none.
  Linear shared_gate_up, shared_down;
  int64_t expert0 = 0;
};

// --- Decode state (lives in backend memory; docs/decoding.md §3-4) -------------------------------

// Block state of every slot. A slot holds one running sequence's current block (and its previous
// one, until that block's K/V is saved). tokens, saved_tokens, trajectory, logprobs, entropies,
// masks_left and changes lie back to back in `block_region`, so the engine moves the whole block state
// between host and backend in one copy; tokens and saved_tokens are also one tensor,
// block_tokens, whose row num_slots + s is slot s's saved block.
struct DecodeState {
  int num_slots = 0;
  int block_length = 0;
  int vocab = 0;
  int seen_words = 0;   // uint32 words per slot of the repetition-penalty token bitmap
  Tensor tokens;        // i32 [slots, B]: block tokens (mask id where still masked)
  Tensor trajectory;    // i32 [slots, B]: global step + 1 at which a position was unmasked, 0 if not
  Tensor logprobs;      // f32 [slots, B]
  Tensor entropies;     // f32 [slots, B]
  Tensor masks_left;    // i32 [slots]
  Tensor changes;       // i32 [slots]: the positions the slot's last step committed or edited
  Tensor saved_tokens;  // i32 [slots, B]: the slot's previous block, whose K/V a forward may still write
  Tensor block_tokens;  // i32 [2 * slots, B]: tokens, then saved_tokens
  Tensor block_region;  // i32: the tensors above, as raw words
  Tensor params;        // SlotParams [slots], stored as bytes
  Tensor seen;          // u32 [slots, seen_words]: ids in prompt ∪ committed completion
  Tensor samples;       // PositionSample [slots, B] as i32 words: a step's samples, by (slot, position)
  Tensor ranking;       // i32 [slots, 6 * B]: commit_step's working space (backends that rank in place)
  std::vector<Buffer> storage;
};

// --- The backend ---------------------------------------------------------------------------------

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  // Makes the calling thread's device calls go to this backend's device (CUDA's current device is
  // per thread; the engine may be driven from any thread). Every Engine entry point calls it.
  virtual void use_on_this_thread() {}
  // Element type of weights and activations on this backend (CPU: F32; CUDA: BF16).
  virtual DType compute_dtype() const = 0;

  // Memory. upload/download copy between host memory and backend memory.
  virtual Buffer alloc(size_t bytes) = 0;
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() = 0;
  // Host memory that upload / download copy fastest from and to (CUDA: pinned), for the weights
  // while an engine sleeps.
  virtual Buffer alloc_host(size_t bytes);
  // For the weight APIs' device tensors: throws jet::Error naming `what` unless [p, p + bytes) is
  // this backend's device memory (the CPU backend has none), then copies within it once the
  // device's other work is done (the tensor's producer may still be writing it).
  virtual void check_device_memory(const void* p, size_t bytes, const std::string& what) const;
  virtual void copy_on_device(void* dst, const void* src, size_t bytes);
  // Bytes the KV cache may use when the user gives no explicit budget; memory_utilization is the
  // share of the device's memory the engine may fill (backends with a device of their own).
  virtual size_t default_kv_budget_bytes(double memory_utilization) const = 0;
  // Memory an allocation can still get (CPU: MemAvailable; CUDA: the device's free memory); 0
  // when unknown.
  virtual size_t available_memory_bytes() const { return 0; }

  // Allocates a tensor of compute_dtype (or the given dtype) with its own buffer, kept in `owner`.
  Tensor alloc_tensor(std::vector<Buffer>& owner, DType dtype, std::initializer_list<int64_t> dims);
  // A view of `buffer`, which is reallocated (larger by a quarter, contents lost) when too small:
  // buffers reused across forwards, so no step allocates memory once sizes stop growing.
  Tensor grow_view(Buffer& buffer, DType dtype, std::initializer_list<int64_t> dims);
  // Uploads the layout's arrays, followed by the i32 arrays `extra`, in one copy into `arena`
  // (grown as by grow_view); returns views of the extras, in order.
  std::vector<Tensor> upload_batch(ForwardBatch& batch, Buffer& arena,
                                   std::initializer_list<const std::vector<int32_t>*> extra = {});
  void upload_batch(ForwardBatch& batch, std::vector<Buffer>& owner);
  KvCache alloc_kv_cache(int layers, int num_pages, int page_size, int kv_heads, int head_dim);
  DecodeState alloc_decode_state(int num_slots, int block_length, int vocab);

  // Small host<->backend helpers for the decode state (one copy each).
  void set_slot_params(DecodeState& st, int slot, const SlotParams& p);
  // Starts a block: tokens (B ids), trajectory/logprobs/entropies zeroed, masks_left = #mask ids.
  // Five copies: for the backend tests, which drive the decode ops slot by slot. The engine
  // stages blocks in ModelRunner's host copy of the state and uploads it once per forward.
  void start_block(DecodeState& st, int slot, const std::vector<int32_t>& tokens, int32_t mask_id);
  // Repetition-penalty set: clear, or add ids.
  void clear_seen(DecodeState& st, int slot);
  void mark_seen(DecodeState& st, int slot, const std::vector<int32_t>& ids);

  // --- Ops. Shapes: T tokens (rows), H hidden, V vocab. All tensors row-major, contiguous. ---
  // out[t] = table[ids[t]]
  virtual void embedding(const Tensor& ids, const Tensor& table, Tensor& out) = 0;
  // out[M, N] = x[M, K] · w[N, K]ᵀ
  virtual void matmul(const Tensor& x, const Tensor& w, Tensor& out) = 0;
  // The same for an FP8 weight (Linear::fp8): x is quantized to e4m3 with dynamic scales (one
  // per row, or per row and 128 columns under Block128; fp8.h's rule), the products of codes
  // are summed in fp32 and scaled back (docs/fp8.md). Backends without FP8 GEMMs refuse it;
  // supports_fp8_experts says whether moe takes FP8 experts too.
  virtual bool supports_fp8() const { return false; }
  virtual bool supports_fp8_experts() const { return false; }
  virtual void matmul_fp8(const Tensor& x, const Linear& w, Tensor& out);
  // out = x / rms(x) * w, statistics in fp32
  virtual void rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& out) = 0;
  // residual += x; out = rmsnorm(residual, w)
  virtual void add_rmsnorm(Tensor& residual, const Tensor& x, const Tensor& w, float eps, Tensor& out) = 0;
  // On packed qkv [T, (nh + 2*nkv) * hd]: the bias [(nh + 2*nkv) * hd] added (when the bias
  // tensor has data; the sum rounded to the activation dtype, as a biased projection's output
  // is), per-head RMSNorm of q and k (skipped when the norm tensor has no data), then NeoX
  // rotate-half RoPE of q and k at batch positions over their first rotary_dim dimensions (the
  // rest pass; 0: all of them; LLaDA2 rotates half). q is rewritten in place; k (normed and
  // rotated) and v go into the cache layer [pages, page_size, nkv, hd], each token at its
  // (sequence, position) slot through the page table, where attention reads them (qkv's k and v
  // columns are left as they were). Storing them here, in the same pass, spares the GPU a
  // kernel per layer.
  virtual void qk_norm_rope(Tensor& qkv, const Tensor& bias, const Tensor& q_norm, const Tensor& k_norm, float eps,
                            const ForwardBatch& batch, float rope_theta, int nh, int nkv, int hd, Tensor& k_cache,
                            Tensor& v_cache, int page_size, int rotary_dim = 0) = 0;
  // Every query of qkv (its q columns) attends its sequence's keys in the cache layer, this
  // forward's own included (qk_norm_rope wrote them), per BatchLayout's rule; out [T, nh * hd].
  // Scale 1/sqrt(hd); GQA: q head h reads kv head h / (nh / nkv).
  virtual void attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, int page_size,
                         const ForwardBatch& batch, int nh, int nkv, int hd, Tensor& out) = 0;
  // out[T, I] = silu(gate_up[:, :I]) * gate_up[:, I:]
  virtual void swiglu(const Tensor& gate_up, Tensor& out) = 0;
  // out[T, H] = Σ_top-k routing weight * expert(x) (+ the shared expert's output); routing in
  // fp32 (MoeRouting). FP8 experts (w.gate_up.fp8()) quantize their inputs as matmul_fp8 does.
  virtual void moe(const Tensor& x, const MoeWeights& w, Tensor& out) = 0;
  // x becomes the sum of x over the tensor-parallel ranks of `comm` (backend/communicator.h),
  // queued after this backend's earlier work.
  virtual void all_reduce_sum(Tensor& x, Communicator& comm);

  // Runs `work`, a fixed sequence of op calls whose launch shapes `key` determines (same key, same
  // shapes, same buffers). A backend that can record work (CUDA graphs) records it at the key's
  // second run and replays the recording from then on; this default just runs it. The caller
  // keeps the data the work reads at the same addresses for a key; recordings are discarded
  // whenever the backend allocates or frees memory, so a reallocated buffer is never replayed.
  virtual void run_recorded(const std::string& key, const std::function<void()>& work) {
    (void)key;
    work();
  }

  // Decode ops. ids[i*B + j] = blocks[slots[i], j]; blocks is i32 [rows, B] (a decode state's
  // tokens, saved_tokens or block_tokens).
  virtual void gather_block_tokens(const Tensor& blocks, const Tensor& slots, Tensor& ids) = 0;
  // A denoise step (docs/decoding.md §3-4) in two ops, so that the logits of a step's masked
  // positions can be computed and sampled a chunk of rows at a time. rows: StepRow [n] bytes.
  // sample_positions samples the positions (StepRow: masked candidates, and under token editing
  // committed ones) whose logits rows are first_row, ..., first_row + R - 1 (logits: f32 [R, V])
  // into st.samples; rows past the last such position (padding) are skipped.
  virtual void sample_positions(const Tensor& logits, int64_t first_row, const Tensor& rows, int num_rows,
                                DecodeState& st) = 0;
  // Once every position with a logits row is sampled (num_logits: the step's logits rows), applies
  // each slot's strategy to its block's samples and commits the selected positions, and under
  // token editing rewrites the committed positions its samples edit (edits_token), judged on the
  // block as it was before this step. changes[slot] = positions committed + positions edited.
  virtual void commit_step(const Tensor& rows, int num_rows, int64_t num_logits, DecodeState& st) = 0;
  // Both, for a step whose logits (f32 [R, V]) hold every row's masked positions.
  void denoise_step(const Tensor& logits, const Tensor& rows, int num_rows, DecodeState& st);

  // Tensor-parallel ranks that hold the LM head by vocabulary (docs/tensor_parallel.md): a rank's
  // logits f32 [R, n] are the ids [vocab0, vocab0 + n) of st.vocab. Without these ops every rank
  // holds the whole LM head.
  virtual bool supports_vocab_parts() const { return false; }
  // As sample_positions, but each position's row is reduced to its VocabPart over this rank's
  // ids (sampling/vocab_parts.h): parts f32 [ranks, R, kVocabPartFloats] gets this rank's at
  // [rank] and zeros elsewhere, so that a sum over the ranks gives every rank every part.
  virtual void sample_vocab_parts(const Tensor& logits, int vocab0, int64_t first_row, const Tensor& rows, int num_rows,
                                  DecodeState& st, Tensor& parts, int rank);
  // The positions' samples (into st.samples) from every rank's parts.
  virtual void combine_vocab_parts(const Tensor& parts, int64_t first_row, const Tensor& rows, int num_rows,
                                   DecodeState& st);
  // whole f32 [R, V] = logits [R, n] in columns [vocab0, vocab0 + n), zeros elsewhere (a sum over
  // the ranks then gives the whole rows, for draws that need them: needs_whole_rows).
  virtual void place_vocab_columns(const Tensor& logits, int vocab0, Tensor& whole);
};

// "cpu", "cuda", "cuda:N" or "auto" (CUDA when built and a GPU is visible, else CPU). "cuda" and
// "auto" take the GPU of LOCAL_RANK when a launcher (torchrun, accelerate) set it and more than one
// GPU is visible, else the first. Throws jet::Error for an unknown name or a GPU that is not there.
std::unique_ptr<Backend> make_backend(const std::string& device, int num_threads);

// Tensor-parallel ranks in one process, at most this many (the GPUs of one host).
constexpr int kMaxTensorParallel = 64;

// The backends of a tensor-parallel group of `size` ranks and the communicators that join them
// (backend/communicator.h; none for one rank): `size` GPUs from the first that make_backend
// would take ("cuda:N": N, N + 1, ...; under a launcher's LOCAL_RANK, that process's own run of
// `size` GPUs, from LOCAL_RANK x size), or `size` CPU backends sharing num_threads cores.
struct BackendGroup {
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<Communicator>> comms;
  bool shared_memory = false;  // every rank's backend takes the host's memory (CPU)
};
BackendGroup make_backend_group(const std::string& device, int num_threads, int size);

}  // namespace jet
