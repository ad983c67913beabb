// Batch construction and the prefill / denoise forwards.
#include "engine/model_runner.h"

#include <algorithm>

#include "sampling/remasking.h"

namespace jet {

ModelRunner::ModelRunner(Model& model, int block_length, int num_slots, int num_pages, int page_size)
    : model_(model), backend_(model.backend()), block_length_(block_length) {
  const ModelConfig& c = model.config();
  kv_ = backend_.alloc_kv_cache(c.layers, num_pages, page_size, c.kv_heads, c.head_dim);
  state_ = backend_.alloc_decode_state(num_slots, block_length, c.vocab);
}

void ModelRunner::fill_layout(BatchLayout& layout, const Sequence& seq, int first_position, int count) {
  for (int i = 0; i < count; ++i) layout.positions.push_back(first_position + i);
  layout.cached_lens.push_back(first_position);
  layout.seq_starts.push_back(layout.seq_starts.back() + count);
  for (int i = 0; i < layout.max_pages; ++i) {
    layout.page_table.push_back(i < static_cast<int>(seq.pages.size()) ? seq.pages[i] : -1);
  }
  ++layout.num_seqs;
  layout.num_tokens += count;
}

template <typename Seqs>
BatchLayout ModelRunner::empty_layout(const Seqs& seqs) const {
  BatchLayout layout;
  layout.mask_block = model_.config().block_causal ? block_length_ : 0;
  layout.seq_starts.push_back(0);
  for (const Sequence* s : seqs) layout.max_pages = std::max(layout.max_pages, static_cast<int>(s->pages.size()));
  return layout;
}

void ModelRunner::prefill(const std::vector<Sequence*>& seqs) {
  if (seqs.empty()) return;
  ForwardBatch batch;
  BatchLayout& layout = batch.host;
  layout = empty_layout(seqs);
  std::vector<int32_t> ids;
  for (const Sequence* s : seqs) {
    const int end = s->num_prefill(block_length_);
    fill_layout(layout, *s, s->num_cached, end - s->num_cached);
    ids.insert(ids.end(), s->prompt.begin() + s->num_cached, s->prompt.begin() + end);
  }
  std::vector<Buffer> owner;
  backend_.upload_batch(batch, owner);
  Tensor ids_t = backend_.alloc_tensor(owner, DType::I32, {layout.num_tokens});
  backend_.upload(ids_t.data, ids.data(), ids.size() * sizeof(int32_t));
  model_.forward(batch, ids_t, kv_, nullptr);
}

std::vector<int32_t> ModelRunner::denoise(const std::vector<Sequence*>& denoising,
                                          const std::vector<Sequence*>& saving) {
  const int B = block_length_;
  std::vector<const Sequence*> all(denoising.begin(), denoising.end());
  all.insert(all.end(), saving.begin(), saving.end());
  ForwardBatch batch;
  BatchLayout& layout = batch.host;
  layout = empty_layout(all);
  std::vector<int32_t> slots;
  for (const Sequence* s : all) {
    fill_layout(layout, *s, s->block_start, B);
    slots.push_back(s->slot);
  }
  std::vector<Buffer> owner;
  backend_.upload_batch(batch, owner);
  Tensor slots_t = backend_.alloc_tensor(owner, DType::I32, {static_cast<int64_t>(slots.size())});
  backend_.upload(slots_t.data, slots.data(), slots.size() * sizeof(int32_t));
  Tensor ids = backend_.alloc_tensor(owner, DType::I32, {layout.num_tokens});
  backend_.gather_block_tokens(state_, slots_t, ids);

  const int num_rows = static_cast<int>(denoising.size());
  if (num_rows == 0) {
    model_.forward(batch, ids, kv_, nullptr);
    return {};
  }
  Tensor logits = backend_.alloc_tensor(owner, DType::F32, {int64_t{num_rows} * B, model_.config().vocab});
  model_.forward(batch, ids, kv_, &logits);

  std::vector<StepRow> rows;
  for (const Sequence* s : denoising) {
    StepRow r;
    r.slot = s->slot;
    r.position0 = s->block_start;
    r.global_step = s->global_step;
    r.n_sched = scheduled_count(B, s->request.denoising_steps, s->step_in_block);
    r.is_last = s->step_in_block == s->request.denoising_steps - 1;
    rows.push_back(r);
  }
  static_assert(sizeof(StepRow) % 4 == 0);
  Tensor rows_t = backend_.alloc_tensor(owner, DType::I32, {num_rows, static_cast<int64_t>(sizeof(StepRow) / 4)});
  backend_.upload(rows_t.data, rows.data(), rows.size() * sizeof(StepRow));
  backend_.denoise_step(logits, rows_t, num_rows, state_);

  std::vector<int32_t> all_masks(state_.num_slots);
  backend_.download(all_masks.data(), state_.masks_left.data, all_masks.size() * sizeof(int32_t));
  std::vector<int32_t> masks_left;
  for (const Sequence* s : denoising) masks_left.push_back(all_masks[s->slot]);
  return masks_left;
}

BlockRecord ModelRunner::read_block(int slot) {
  const int B = block_length_;
  BlockRecord r;
  r.tokens.resize(B);
  r.trajectory.resize(B);
  r.logprobs.resize(B);
  r.entropies.resize(B);
  backend_.download(r.tokens.data(), state_.tokens.ptr<int32_t>() + slot * B, B * sizeof(int32_t));
  backend_.download(r.trajectory.data(), state_.trajectory.ptr<int32_t>() + slot * B, B * sizeof(int32_t));
  backend_.download(r.logprobs.data(), state_.logprobs.ptr<float>() + slot * B, B * sizeof(float));
  backend_.download(r.entropies.data(), state_.entropies.ptr<float>() + slot * B, B * sizeof(float));
  return r;
}

}  // namespace jet
