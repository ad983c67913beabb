// Batch construction and the prefill / denoise forwards.
#include "engine/model_runner.h"

#include <algorithm>
#include <bit>

#include "sampling/remasking.h"
#include "sampling/remasking_rules.h"
#include "sampling/vocab_parts.h"

namespace jet {

namespace {

// The batch sizes that vary from step to step in streaming (masked rows, the widest page table)
// are rounded up so that batches of nearly the same shape share one CUDA graph (the graph key is
// made of these sizes): a count above 8 to a multiple of 1/8 of its power of two, at most 12.5%
// more. Streamed requests otherwise make a new shape almost every step, captured and seldom
// replayed. (The save entries still vary, so streaming keeps a small capture cost; the buckets
// roughly halve it, as measured in bench/results.)
int64_t bucketed(int64_t n) {
  if (n <= 8) return n;
  const int64_t step = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(n))) / 8;
  return (n + step - 1) / step * step;
}

// The logits of a step's masked rows are computed and sampled a chunk of rows at a time, so that
// a step's logits take at most this much memory however many positions are masked (batch x block
// x vocab floats would not fit at pure diffusion: 32 blocks of 1,024 at vocabulary 126,464 are
// 16.6 GB).
constexpr int64_t kLogitsChunkBytes = int64_t{512} << 20;

}  // namespace

int64_t ModelRunner::logits_chunk_rows(int vocab, int max_batched_tokens) {
  const int64_t fitting = kLogitsChunkBytes / (int64_t{vocab} * static_cast<int64_t>(sizeof(float)));
  return std::max<int64_t>(1, std::min<int64_t>(fitting, max_batched_tokens));
}

ModelRunner::ModelRunner(ModelRanks& ranks, int block_length, int num_slots, int num_pages, int page_size,
                         int max_batched_tokens, bool record_forwards, RunnerStats& stats)
    : model_ranks_(ranks),
      config_(ranks.config()),
      ranks_(ranks.size()),
      block_length_(block_length),
      max_batched_tokens_(max_batched_tokens),
      record_forwards_(record_forwards),
      stats_(stats) {
  const ModelConfig& c = config_;
  on_every_rank([&](Rank& r) {
    const int rank = static_cast<int>(&r - ranks_.data());
    r.model = &ranks.model(rank);
    r.backend = &ranks.backend(rank);
    r.kv = r.backend->alloc_kv_cache(static_cast<int>(c.layers), num_pages, page_size,
                                     static_cast<int>(r.model->shard().kv_heads), static_cast<int>(c.head_dim));
    r.state = r.backend->alloc_decode_state(num_slots, block_length, static_cast<int>(c.vocab));
  });
  // Its contents reach the backends with the first forward, after the first block has started.
  host_state_.resize(state().block_region.numel());
}

ModelRunner::~ModelRunner() {
  // Each rank frees its cache and state on its own thread, where its device is current.
  try {
    on_every_rank([](Rank& r) { r = Rank{}; });
  } catch (...) {  // a destructor must not throw
  }
}

void ModelRunner::on_every_rank(const std::function<void(Rank&)>& task) {
  model_ranks_.run([&](int rank) { task(ranks_[rank]); });
}

int32_t* ModelRunner::host_part(const Tensor& part) {
  return host_state_.data() + (part.ptr<int32_t>() - state().block_region.ptr<int32_t>());
}

const int32_t* ModelRunner::host_part(const Tensor& part) const {
  return host_state_.data() + (part.ptr<int32_t>() - state().block_region.ptr<int32_t>());
}

void ModelRunner::start_forward() {
  ++stats_.forwards;
  if (!idle_since_) return;
  stats_.idle_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - *idle_since_).count();
  idle_since_.reset();
}

void ModelRunner::begin_sequence(const Sequence& seq) {
  on_every_rank([&](Rank& r) {
    r.backend->set_slot_params(r.state, seq.slot, seq.request.slot);
    if (seq.request.slot.repetition_penalty == 1.0f) return;
    r.backend->clear_seen(r.state, seq.slot);
    r.backend->mark_seen(r.state, seq.slot, seq.prompt);
  });
}

void ModelRunner::mark_committed(const Sequence& seq, const std::vector<int32_t>& tokens) {
  if (seq.request.slot.repetition_penalty == 1.0f) return;
  on_every_rank([&](Rank& r) { r.backend->mark_seen(r.state, seq.slot, tokens); });
}

void ModelRunner::start_block(int slot, const std::vector<int32_t>& tokens, int32_t mask_id) {
  const int B = block_length_;
  JET_ASSERT(slot >= 0 && slot < state().num_slots && static_cast<int>(tokens.size()) == B);
  int32_t* current = host_part(state().tokens) + slot * B;
  std::copy_n(current, B, host_part(state().saved_tokens) + slot * B);
  std::copy(tokens.begin(), tokens.end(), current);
  // Zero words are 0 and 0.0f alike.
  for (const Tensor* part : {&state().trajectory, &state().logprobs, &state().entropies}) {
    std::fill_n(host_part(*part) + slot * B, B, 0);
  }
  host_part(state().masks_left)[slot] = static_cast<int32_t>(std::count(tokens.begin(), tokens.end(), mask_id));
  host_state_newer_ = true;
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
  layout.mask_block = config_.block_causal ? block_length_ : 0;
  layout.seq_starts.push_back(0);
  for (const Sequence* s : seqs) layout.max_pages = std::max(layout.max_pages, static_cast<int>(s->pages.size()));
  layout.max_pages = static_cast<int>(bucketed(layout.max_pages));  // the rows are padded with -1
  return layout;
}

template <typename Item, typename TokensOf, typename Run>
void ModelRunner::in_token_groups(const std::vector<Item>& items, TokensOf tokens_of, Run run) const {
  std::vector<Item> group;
  int64_t tokens = 0;
  for (const Item& item : items) {
    const int64_t n = tokens_of(item);
    if (!group.empty() && tokens + n > max_batched_tokens_) {
      run(group);
      group.clear();
      tokens = 0;
    }
    group.push_back(item);
    tokens += n;
  }
  if (!group.empty()) run(group);
}

void ModelRunner::prefill(const std::vector<Sequence*>& seqs) {
  in_token_groups(
      seqs, [&](const Sequence* s) { return prefill_end(*s) - s->num_cached; },
      [&](const std::vector<Sequence*>& group) { prefill_forward(group); });
}

void ModelRunner::prefill_forward(const std::vector<Sequence*>& seqs) {
  if (seqs.empty()) return;
  BatchLayout layout = empty_layout(seqs);
  std::vector<int32_t> ids;
  for (const Sequence* s : seqs) {
    const int end = prefill_end(*s);
    fill_layout(layout, *s, s->num_cached, end - s->num_cached);
    ids.insert(ids.end(), s->prompt.begin() + s->num_cached, s->prompt.begin() + end);
  }
  start_forward();
  on_every_rank([&](Rank& r) {
    ForwardBatch rank_batch;
    rank_batch.host = layout;
    const Tensor ids_t = r.backend->upload_batch(rank_batch, r.layout_arena, {&ids})[0];
    r.model->forward(rank_batch, ids_t, r.kv, nullptr);
  });
}

std::vector<StepResult> ModelRunner::denoise(const std::vector<Sequence*>& denoising,
                                             const std::vector<Sequence*>& saving) {
  // Entries of the forwards: the saved blocks that ride alone, then each denoising sequence, with
  // its saved block when the two ride in one entry (block-causal models); split into forwards of
  // at most max_batched_tokens_ tokens. Saves go first: a next block attends its saved block's
  // final K/V, which a forward after its own would write too late.
  struct Entry {
    Sequence* denoising = nullptr;
    Sequence* saving = nullptr;
  };
  // By slot: the sequence's previous block is saved this step; it rides in its next block's entry.
  std::vector<char> saves(state().num_slots, 0), rides(state().num_slots, 0);
  for (const Sequence* s : saving) saves[s->slot] = 1;
  // A head step's entry is its saved block alone (the block's first position is sampled from
  // the save's last row).
  for (const Sequence* s : denoising) rides[s->slot] = saves[s->slot] && (config_.block_causal || s->head_pending);
  std::vector<Entry> entries;
  for (Sequence* s : saving) {
    if (!rides[s->slot]) entries.push_back({nullptr, s});
  }
  for (Sequence* s : denoising) entries.push_back({s, rides[s->slot] ? s : nullptr});
  in_token_groups(
      entries,
      [&](const Entry& e) {
        const bool head = e.denoising && e.denoising->head_pending;
        return int64_t{block_length_} * (head ? 1 : (e.denoising != nullptr) + (e.saving != nullptr));
      },
      [&](const std::vector<Entry>& group) {
        std::vector<Sequence*> group_denoising, group_saving;
        for (const Entry& e : group) {
          if (e.denoising) group_denoising.push_back(e.denoising);
          if (e.saving) group_saving.push_back(e.saving);
        }
        denoise_forward(group_denoising, group_saving);
      });
  if (denoising.empty()) return {};

  // Every rank's state is the same; rank 0's comes back.
  ranks_.front().backend->download(host_state_.data(), state().block_region.data, state().block_region.nbytes());
  idle_since_ = std::chrono::steady_clock::now();
  std::vector<StepResult> results;
  for (const Sequence* s : denoising) {
    results.push_back({host_part(state().masks_left)[s->slot], host_part(state().changes)[s->slot]});
  }
  return results;
}

void ModelRunner::denoise_forward(const std::vector<Sequence*>& denoising, const std::vector<Sequence*>& saving) {
  const int B = block_length_;
  std::vector<const Sequence*> all(denoising.begin(), denoising.end());
  all.insert(all.end(), saving.begin(), saving.end());
  BatchLayout layout = empty_layout(all);
  // The layout's entries and the block each row of ids comes from (block_slots: a row of the
  // state's block_tokens, num_slots + slot for a saved block). Every layer stores every entry's
  // K/V (qk_norm_rope) before any query reads the cache. Block-causal models hold a sequence's
  // saved block and its next block as one entry of 2B tokens: the saved block's queries see
  // exactly the keys before their block end, as in a forward of their own, and the prefix is
  // read once for both. Bidirectional ones keep them apart (the saved block must not see the
  // next one): denoising entries first, then saved ones. A head step's entry (shifted-logit
  // models, docs/decoding.md §1) is its saved block alone, whose last row gives the logits of the
  // block's first position.
  const bool merge_saves = config_.block_causal;
  const int shift = config_.shifted_logits ? 1 : 0;
  std::vector<int32_t> block_slots;
  // Each denoising sequence's row of its block's first position (past the end of a head step's
  // entry, which holds the block before it only), which the logits rows are counted from.
  std::vector<int> denoise_row0;
  std::vector<char> save_pending(state().num_slots, 0);  // by slot: a saved block not yet in an entry
  for (const Sequence* s : saving) save_pending[s->slot] = 1;
  for (const Sequence* s : denoising) {
    const bool saves = (merge_saves || s->head_pending) && save_pending[s->slot];
    JET_ASSERT(saves || !s->head_pending, "a head step without its saved block");
    if (saves) {
      save_pending[s->slot] = 0;
      block_slots.push_back(state().num_slots + s->slot);
    }
    denoise_row0.push_back(layout.num_tokens + (saves ? B : 0));
    if (s->head_pending) {
      fill_layout(layout, *s, s->block_start - B, B);
      continue;
    }
    block_slots.push_back(s->slot);
    fill_layout(layout, *s, s->block_start - (saves ? B : 0), saves ? 2 * B : B);
  }
  for (const Sequence* s : saving) {
    if (!save_pending[s->slot]) continue;  // it rode in its next block's entry
    block_slots.push_back(state().num_slots + s->slot);
    fill_layout(layout, *s, s->block_start - B, B);
  }
  const int num_rows = static_cast<int>(denoising.size());
  // Logits only for the step's candidates, the still-masked positions, and under token editing
  // the committed completion positions (has_logits_row; the host copy of the block state is
  // current; a head step has the first position only): logit_rows lists their forward rows (the
  // row before, for shifted-logit models), row by row in position order, and each StepRow points
  // at its first. A step of a block with no mask left only edits.
  std::vector<StepRow> rows;
  std::vector<int32_t> logit_rows;
  bool whole_rows = false;  // some row's draw needs whole logits rows (LM head split by vocabulary)
  for (int i = 0; i < num_rows; ++i) {
    const Sequence* s = denoising[i];
    StepRow r;
    r.slot = s->slot;
    r.position0 = s->block_start;
    r.global_step = s->global_step;
    if (!s->block_filled) {
      r.n_sched = scheduled_count(s->request.sub_block_length, s->request.denoising_steps, s->step_in_block);
      r.is_last = s->head_pending || s->step_in_block == s->request.denoising_steps - 1;
    }
    r.logits_row0 = static_cast<int32_t>(logit_rows.size());
    r.candidates_begin = s->head_pending ? 0 : s->window_begin;
    r.candidates_end = s->head_pending ? 1 : s->window_begin + s->request.sub_block_length;
    if (s->request.editing) r.edits_begin = std::max(0, s->prompt_len() - s->block_start);
    const int32_t* block = host_part(state().tokens) + s->slot * B;
    for (int j = 0; j < B; ++j) {
      if (has_logits_row(r, j, block[j] == s->request.slot.mask_id)) logit_rows.push_back(denoise_row0[i] + j - shift);
    }
    rows.push_back(r);
    whole_rows = whole_rows || needs_whole_rows(s->request.slot, static_cast<int>(config_.vocab));
  }
  whole_rows = whole_rows && ranks_.front().model->shard().vocab_split;
  JET_ASSERT(!logit_rows.empty() || num_rows == 0, "a denoising block has no position to sample");
  // Padding rows repeat the first row; no step reads them.
  if (!logit_rows.empty()) {
    const int32_t first = logit_rows[0];
    logit_rows.resize(bucketed(static_cast<int64_t>(logit_rows.size())), first);
  }
  const int64_t num_logits = static_cast<int64_t>(logit_rows.size());
  static_assert(sizeof(StepRow) % 4 == 0 && alignof(StepRow) == 4);
  std::vector<int32_t> row_words(rows.size() * sizeof(StepRow) / 4);
  std::copy_n(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(StepRow),
              reinterpret_cast<char*>(row_words.data()));
  const int V = static_cast<int>(config_.vocab);
  const int64_t chunk_rows = std::min(num_logits, logits_chunk_rows(V, max_batched_tokens_));
  const bool upload_state = host_state_newer_;
  host_state_newer_ = false;
  start_forward();
  on_every_rank([&](Rank& r) {
    Backend& backend = *r.backend;
    ForwardBatch rank_batch;
    rank_batch.host = layout;
    const std::vector<Tensor> extras =
        backend.upload_batch(rank_batch, r.layout_arena, {&block_slots, &row_words, &logit_rows});
    if (upload_state) backend.upload(r.state.block_region.data, host_state_.data(), r.state.block_region.nbytes());
    Tensor ids = backend.grow_view(r.ids_buffer, DType::I32, {layout.num_tokens});
    const ModelShard& shard = r.model->shard();
    Tensor logits, parts, whole;
    if (num_rows > 0) {
      logits = backend.grow_view(r.logits_buffer, DType::F32, {chunk_rows, shard.vocab});
      if (shard.vocab_split && whole_rows) whole = backend.grow_view(r.whole_buffer, DType::F32, {chunk_rows, V});
      if (shard.vocab_split && !whole_rows) {
        parts = backend.grow_view(r.parts_buffer, DType::F32, {shard.size, chunk_rows, kVocabPartFloats});
      }
    }
    // Each chunk's logits are sampled where they lie, or, with the LM head split by vocabulary,
    // from every rank's parts of them, or from whole rows put together from every rank's columns.
    auto sample_chunk = [&](Tensor& chunk, int64_t first) {
      if (!shard.vocab_split) return backend.sample_positions(chunk, first, extras[1], num_rows, r.state);
      const int64_t n = chunk.dim(0);
      if (whole_rows) {
        Tensor rows_whole = whole.rows(0, n);
        backend.place_vocab_columns(chunk, static_cast<int>(shard.vocab0), rows_whole);
        r.model->reduce(rows_whole);
        return backend.sample_positions(rows_whole, first, extras[1], num_rows, r.state);
      }
      Tensor chunk_parts(parts.data, DType::F32, {shard.size, n, kVocabPartFloats});
      backend.sample_vocab_parts(chunk, static_cast<int>(shard.vocab0), first, extras[1], num_rows, r.state,
                                 chunk_parts, shard.rank);
      r.model->reduce(chunk_parts);
      backend.combine_vocab_parts(chunk_parts, first, extras[1], num_rows, r.state);
    };
    auto forward_and_step = [&] {
      backend.gather_block_tokens(r.state.block_tokens, extras[0], ids);
      const Tensor hidden = r.model->forward_hidden(rank_batch, ids, r.kv, num_rows > 0 ? num_logits : 0, &extras[2]);
      if (num_rows == 0) return;
      for (int64_t first = 0; first < num_logits; first += chunk_rows) {
        const int64_t end = std::min(num_logits, first + chunk_rows);
        Tensor chunk = logits.rows(0, end - first);
        r.model->lm_head(hidden.rows(first, end), chunk);
        sample_chunk(chunk, first);
      }
      backend.commit_step(extras[1], num_rows, num_logits, r.state);
    };
    // Everything the work reads sits at addresses fixed by these sizes (the layout arena's
    // offsets, ids, logits, the model's scratch), and the attention launch depends on no more (an
    // entry holds B or 2B tokens, so the counts fix how many hold 2B); the logits count sets the
    // LM head's shape and the logits view.
    if (record_forwards_) {
      backend.run_recorded(str(layout.num_seqs, ' ', layout.num_tokens, ' ', layout.max_pages, ' ', num_rows, ' ',
                               num_logits, ' ', whole_rows),
                           forward_and_step);
    } else {
      forward_and_step();
    }
  });
}

int ModelRunner::prefill_end(const Sequence& seq) const {
  return seq.prefill_end(block_length_, config_.shifted_logits);
}

int ModelRunner::first_masked_window(int slot, int from, int width, int32_t mask_id) const {
  const int32_t* block = host_part(state().tokens) + slot * block_length_;
  for (int begin = from; begin < block_length_; begin += width) {
    if (std::count(block + begin, block + begin + width, mask_id) > 0) return begin;
  }
  return block_length_;
}

BlockRecord ModelRunner::read_block(int slot) const {
  const int B = block_length_;
  auto row = [&](const Tensor& part) { return host_part(part) + slot * B; };
  auto floats = [&](const Tensor& part) {
    std::vector<float> out(B);
    std::copy_n(reinterpret_cast<const char*>(row(part)), B * sizeof(float), reinterpret_cast<char*>(out.data()));
    return out;
  };
  BlockRecord r;
  r.tokens.assign(row(state().tokens), row(state().tokens) + B);
  r.trajectory.assign(row(state().trajectory), row(state().trajectory) + B);
  r.logprobs = floats(state().logprobs);
  r.entropies = floats(state().entropies);
  return r;
}

}  // namespace jet
