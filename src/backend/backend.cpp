// The backend-independent parts of Backend: allocation helpers, batch upload, the KV cache and
// decode-state layouts, and the small host->backend writes of slot state.
#include "backend/backend.h"

#include <cstdlib>
#include <cstring>

#include "backend/communicator.h"

namespace jet {

void Backend::all_reduce_sum(Tensor& x, Communicator& comm) { comm.all_reduce_sum(x); }

void Backend::check_device_memory(const void*, size_t, const std::string& what) const {
  throw Error(str(what, " is in GPU memory, and the ", name(),
                  " backend reads weights from host memory: move it to the CPU first (e.g. tensor.cpu())"));
}

void Backend::copy_on_device(void*, const void*, size_t) {
  JET_ASSERT(false, "the ", name(), " backend has no device memory to copy within");
}

Buffer Backend::alloc_host(size_t bytes) {
  void* ptr = std::malloc(bytes ? bytes : 1);
  JET_CHECK(ptr != nullptr, name(), " backend: out of host memory allocating ", bytes, " bytes");
  return Buffer(ptr, bytes, [](void* p) { std::free(p); });
}

Tensor Backend::alloc_tensor(std::vector<Buffer>& owner, DType dtype, std::initializer_list<int64_t> dims) {
  Tensor shape_only(nullptr, dtype, dims);
  owner.push_back(alloc(shape_only.nbytes()));
  return owner.back().view(dtype, dims);
}

Tensor Backend::grow_view(Buffer& buffer, DType dtype, std::initializer_list<int64_t> dims) {
  Tensor shape_only(nullptr, dtype, dims);
  if (buffer.bytes() < shape_only.nbytes()) {
    buffer = Buffer();  // free first: the old contents are not kept, and memory may be tight
    buffer = alloc(shape_only.nbytes() + shape_only.nbytes() / 4);
  }
  return buffer.view(dtype, dims);
}

std::vector<Tensor> Backend::upload_batch(ForwardBatch& batch, Buffer& arena,
                                          std::initializer_list<const std::vector<int32_t>*> extra) {
  const BatchLayout& h = batch.host;
  JET_ASSERT(static_cast<int>(h.positions.size()) == h.num_tokens);
  JET_ASSERT(static_cast<int>(h.seq_starts.size()) == h.num_seqs + 1);
  JET_ASSERT(static_cast<int>(h.cached_lens.size()) == h.num_seqs);
  JET_ASSERT(static_cast<int64_t>(h.page_table.size()) == int64_t{h.num_seqs} * h.max_pages);
  // Each array starts on a 16-byte boundary, as kernels may load them in vectors.
  std::vector<int32_t> packed;
  std::vector<size_t> offsets;
  auto append = [&](const std::vector<int32_t>& v) {
    offsets.push_back(packed.size());
    packed.insert(packed.end(), v.begin(), v.end());
    packed.resize((packed.size() + 3) / 4 * 4, 0);
  };
  append(h.positions);
  append(h.seq_starts);
  append(h.cached_lens);
  append(h.page_table);
  for (const std::vector<int32_t>* v : extra) append(*v);
  Tensor all = grow_view(arena, DType::I32, {static_cast<int64_t>(packed.size())});
  upload(all.data, packed.data(), packed.size() * sizeof(int32_t));
  auto at = [&](size_t i, std::initializer_list<int64_t> dims) {
    return Tensor(all.ptr<int32_t>() + offsets[i], DType::I32, dims);
  };
  batch.positions = at(0, {h.num_tokens});
  batch.seq_starts = at(1, {h.num_seqs + 1});
  batch.cached_lens = at(2, {h.num_seqs});
  batch.page_table = at(3, {h.num_seqs, h.max_pages});
  std::vector<Tensor> views;
  size_t i = 4;
  for (const std::vector<int32_t>* v : extra) {
    views.push_back(at(i++, {static_cast<int64_t>(v->size())}));
  }
  return views;
}

void Backend::upload_batch(ForwardBatch& batch, std::vector<Buffer>& owner) {
  owner.emplace_back();
  upload_batch(batch, owner.back());
}

KvCache Backend::alloc_kv_cache(int layers, int num_pages, int page_size, int kv_heads, int head_dim) {
  KvCache kv;
  kv.num_pages = num_pages;
  kv.page_size = page_size;
  kv.kv_heads = kv_heads;
  kv.head_dim = head_dim;
  for (int l = 0; l < layers; ++l) {
    kv.k.push_back(alloc_tensor(kv.storage, compute_dtype(), {num_pages, page_size, kv_heads, head_dim}));
    kv.v.push_back(alloc_tensor(kv.storage, compute_dtype(), {num_pages, page_size, kv_heads, head_dim}));
  }
  return kv;
}

DecodeState Backend::alloc_decode_state(int num_slots, int block_length, int vocab) {
  DecodeState st;
  st.num_slots = num_slots;
  st.block_length = block_length;
  st.vocab = vocab;
  st.seen_words = (vocab + 31) / 32;
  // Each part starts on a 16-byte boundary, as its own allocation would, except saved_tokens,
  // which follows tokens directly so that both are one [2 * slots, B] tensor (block_tokens).
  const int64_t words = int64_t{num_slots} * block_length;
  const int64_t stride = (words + 3) / 4 * 4, tokens_stride = (2 * words + 3) / 4 * 4;
  const int64_t masks_stride = (int64_t{num_slots} + 3) / 4 * 4;
  st.block_region = alloc_tensor(st.storage, DType::I32, {tokens_stride + 3 * stride + 2 * masks_stride});
  int32_t* region = st.block_region.ptr<int32_t>();
  st.block_tokens = Tensor(region, DType::I32, {2 * int64_t{num_slots}, block_length});
  st.tokens = Tensor(region, DType::I32, {num_slots, block_length});
  st.saved_tokens = Tensor(region + words, DType::I32, {num_slots, block_length});
  st.trajectory = Tensor(region + tokens_stride, DType::I32, {num_slots, block_length});
  st.logprobs = Tensor(region + tokens_stride + stride, DType::F32, {num_slots, block_length});
  st.entropies = Tensor(region + tokens_stride + 2 * stride, DType::F32, {num_slots, block_length});
  st.masks_left = Tensor(region + tokens_stride + 3 * stride, DType::I32, {num_slots});
  st.changes = Tensor(region + tokens_stride + 3 * stride + masks_stride, DType::I32, {num_slots});
  static_assert(sizeof(SlotParams) % 4 == 0);
  st.params = alloc_tensor(st.storage, DType::I32, {num_slots, static_cast<int64_t>(sizeof(SlotParams) / 4)});
  st.seen = alloc_tensor(st.storage, DType::I32, {num_slots, st.seen_words});
  static_assert(sizeof(PositionSample) % 4 == 0);
  st.samples = alloc_tensor(st.storage, DType::I32, {words, static_cast<int64_t>(sizeof(PositionSample) / 4)});
  st.ranking = alloc_tensor(st.storage, DType::I32, {num_slots, 6 * int64_t{block_length}});
  return st;
}

void Backend::matmul_fp8(const Tensor&, const Linear&, Tensor&) {
  throw Error(str("matmul_fp8: the ", name(), " backend has no FP8 GEMMs"));
}

void Backend::sample_vocab_parts(const Tensor&, int, int64_t, const Tensor&, int, DecodeState&, Tensor&, int) {
  throw Error(str("sample_vocab_parts: the ", name(), " backend does not split the LM head by vocabulary"));
}

void Backend::combine_vocab_parts(const Tensor&, int64_t, const Tensor&, int, DecodeState&) {
  throw Error(str("combine_vocab_parts: the ", name(), " backend does not split the LM head by vocabulary"));
}

void Backend::place_vocab_columns(const Tensor&, int, Tensor&) {
  throw Error(str("place_vocab_columns: the ", name(), " backend does not split the LM head by vocabulary"));
}

void Backend::denoise_step(const Tensor& logits, const Tensor& rows, int num_rows, DecodeState& st) {
  sample_positions(logits, 0, rows, num_rows, st);
  commit_step(rows, num_rows, logits.ndim == 2 ? logits.dim(0) : 0, st);
}

void Backend::set_slot_params(DecodeState& st, int slot, const SlotParams& p) {
  JET_ASSERT(slot >= 0 && slot < st.num_slots);
  upload(st.params.ptr<char>() + slot * sizeof(SlotParams), &p, sizeof(SlotParams));
}

void Backend::start_block(DecodeState& st, int slot, const std::vector<int32_t>& tokens, int32_t mask_id) {
  const int B = st.block_length;
  JET_ASSERT(slot >= 0 && slot < st.num_slots && static_cast<int>(tokens.size()) == B);
  std::vector<int32_t> zeros_i(B, 0);
  std::vector<float> zeros_f(B, 0.0f);
  int32_t masks = 0;
  for (int32_t t : tokens) masks += t == mask_id;
  upload(st.tokens.ptr<int32_t>() + slot * B, tokens.data(), B * sizeof(int32_t));
  upload(st.trajectory.ptr<int32_t>() + slot * B, zeros_i.data(), B * sizeof(int32_t));
  upload(st.logprobs.ptr<float>() + slot * B, zeros_f.data(), B * sizeof(float));
  upload(st.entropies.ptr<float>() + slot * B, zeros_f.data(), B * sizeof(float));
  upload(st.masks_left.ptr<int32_t>() + slot, &masks, sizeof(int32_t));
}

void Backend::clear_seen(DecodeState& st, int slot) {
  std::vector<uint32_t> zeros(st.seen_words, 0);
  upload(st.seen.ptr<uint32_t>() + size_t(slot) * st.seen_words, zeros.data(), zeros.size() * 4);
}

void Backend::mark_seen(DecodeState& st, int slot, const std::vector<int32_t>& ids) {
  std::vector<uint32_t> words(st.seen_words);
  uint32_t* row = st.seen.ptr<uint32_t>() + size_t(slot) * st.seen_words;
  download(words.data(), row, words.size() * 4);
  for (int32_t id : ids) {
    if (id >= 0 && id < st.vocab) words[id / 32] |= 1u << (id % 32);
  }
  upload(row, words.data(), words.size() * 4);
}

}  // namespace jet
