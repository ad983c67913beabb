// Admission, page growth and preemption.
#include "engine/scheduler.h"

#include <algorithm>
#include <utility>

#include "core/log.h"

namespace jet {

Scheduler::Scheduler(const SchedulerLimits& limits, int num_pages, int page_size)
    : limits_(limits), pages_(num_pages, page_size) {
  for (int s = limits.max_num_seqs - 1; s >= 0; --s) free_slots_.push_back(s);
}

bool Scheduler::grow(Sequence* seq) {
  int need = pages_for(seq->block_start + limits_.block_length) - static_cast<int>(seq->pages.size());
  return need <= 0 || pages_.allocate(need, seq->pages);
}

void Scheduler::preempt(Sequence* seq) {
  log_debug("preempting request ", seq->index, " (KV cache full)");
  pages_.release(seq->pages);
  free_slots_.push_back(seq->slot);
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  seq->reset_progress();
  waiting_.push_front(seq);
  preempted_.push_back(seq);
}

bool Scheduler::admit(Sequence* seq) {
  if (free_slots_.empty()) return false;
  const int B = limits_.block_length;
  const int first_block = seq->num_prefill(B);
  const int prefill = seq->prefill_end(B, limits_.shifted_logits);
  std::vector<int32_t> pages;
  // Cached pages are full pages below the prefill end, reused only up to a block boundary: a
  // block-causal prefill attends its whole block, so a page that ends inside a block holds K/V
  // that depends on the tokens after it. The prefill of the rest then starts on a block boundary.
  if (limits_.prefix_caching) pages = pages_.acquire_cached_prefix(seq->prompt, prefill, B);
  const int cached = static_cast<int>(pages.size()) * pages_.page_size();
  int need = pages_for(first_block + B) - static_cast<int>(pages.size());
  if (!pages_.allocate(need, pages)) {
    pages_.release(pages);
    return false;
  }
  seq->pages = std::move(pages);
  seq->num_cached = cached;
  seq->needs_prefill = cached < prefill;
  seq->block_start = first_block;
  seq->slot = free_slots_.back();
  free_slots_.pop_back();
  seq->arrival = ++arrivals_;
  seq->status = SeqStatus::Denoising;
  running_.push_back(seq);
  return true;
}

std::vector<Sequence*> Scheduler::schedule() {
  // Running sequences first, oldest first: each must get its block's pages, even if that means
  // preempting newer ones. The oldest always fits alone (checked when requests are submitted).
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence* seq = running_[i];
    while (!grow(seq)) {
      Sequence* victim = running_.back();
      preempt(victim);
      if (victim == seq) break;  // it was the newest: the loop ends, since it was last
    }
  }
  std::vector<Sequence*> admitted;
  while (!waiting_.empty() && static_cast<int>(running_.size()) < limits_.max_num_seqs) {
    if (!admit(waiting_.front())) break;
    admitted.push_back(waiting_.front());
    waiting_.pop_front();
  }
  return admitted;
}

void Scheduler::publish_prompt(const Sequence& seq) {
  if (limits_.prefix_caching) {
    pages_.publish_prefix(seq.prompt, seq.prefill_end(limits_.block_length, limits_.shifted_logits), seq.pages);
  }
}

void Scheduler::finish(Sequence* seq) {
  pages_.release(seq->pages);
  free_slots_.push_back(seq->slot);
  seq->slot = -1;
  running_.erase(std::find(running_.begin(), running_.end(), seq));
}

void Scheduler::cancel(Sequence* seq) {
  if (std::find(running_.begin(), running_.end(), seq) != running_.end()) return finish(seq);
  std::erase(waiting_, seq);
  std::erase(preempted_, seq);
}

void Scheduler::abort_all() {
  while (!running_.empty()) finish(running_.back());
  waiting_.clear();
  preempted_.clear();
}

std::vector<Sequence*> Scheduler::take_preempted() { return std::exchange(preempted_, {}); }

}  // namespace jet
