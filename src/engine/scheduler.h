// Scheduler: who runs in the next step. Owns the waiting queue, the running set, the page pool
// and the decode slots; admits in FIFO order, grows sequences' pages block by block, and
// preempts the newest sequences when the cache is full (docs/decoding.md §7).
#pragma once

#include <deque>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace jet {

struct SchedulerLimits {
  int max_num_seqs = 0;
  int block_length = 0;
  bool prefix_caching = false;
  bool shifted_logits = false;  // the model's (Sequence::prefill_end)
};

class Scheduler {
 public:
  Scheduler(const SchedulerLimits& limits, int num_pages, int page_size);

  void add(Sequence* seq) { waiting_.push_back(seq); }
  bool idle() const { return waiting_.empty() && running_.empty(); }
  size_t num_waiting() const { return waiting_.size(); }
  const std::vector<Sequence*>& running() const { return running_; }

  // Pages a sequence needs for positions [0, tokens).
  int pages_for(int tokens) const { return (tokens + pages_.page_size() - 1) / pages_.page_size(); }
  int total_pages() const { return pages_.num_pages(); }

  // Makes sure every running sequence has pages for its current block (preempting the newest
  // when needed), then admits waiting sequences while slots and pages last. Returns the
  // sequences admitted in this call (they need their first block started).
  std::vector<Sequence*> schedule();
  // Called once a sequence's prefill forward has written its prompt pages.
  void publish_prompt(const Sequence& seq);
  void finish(Sequence* seq);  // frees its slot and pages and drops it from the running set
  // Drops a sequence wherever it is: running (as finish), waiting, or just preempted.
  void cancel(Sequence* seq);
  // Drops every sequence (running ones release their slot and pages).
  void abort_all();
  // The weights changed: no prompt may reuse K/V computed with the old ones.
  void forget_cached_prefixes() { pages_.forget_prefixes(); }
  // Preempted sequences since the last call (they lost their slot and pages and wait again).
  std::vector<Sequence*> take_preempted();

 private:
  bool grow(Sequence* seq);
  bool admit(Sequence* seq);
  void preempt(Sequence* seq);

  SchedulerLimits limits_;
  BlockManager pages_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // in admission order: the newest last
  std::vector<int> free_slots_;
  std::vector<Sequence*> preempted_;
  uint64_t arrivals_ = 0;
};

}  // namespace jet
