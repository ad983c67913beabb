// BlockManager: the pool of KV-cache pages, with reference counts and prefix caching of full
// prompt pages (shared between sequences whose prompts start with the same pages).
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

namespace jet {

class BlockManager {
 public:
  BlockManager(int num_pages, int page_size);

  int num_pages() const { return static_cast<int>(ref_counts_.size()); }
  int page_size() const { return page_size_; }
  int num_free() const { return static_cast<int>(free_.size()); }

  // Pages that a prompt can reuse: the longest run of leading full pages of `tokens` (only the
  // first `cacheable` tokens count) whose K/V some sequence already computed and which ends on a
  // multiple of `boundary` tokens. Takes a reference on each; returns their ids.
  std::vector<int32_t> acquire_cached_prefix(const std::vector<int32_t>& tokens, int cacheable, int boundary);
  // Takes n fresh pages; false (and nothing taken) if fewer than n are free.
  bool allocate(int n, std::vector<int32_t>& pages);
  // Records that pages[i] holds the K/V of tokens [i*page_size, (i+1)*page_size) for every full
  // page below `cacheable` tokens, so later prompts can share them.
  void publish_prefix(const std::vector<int32_t>& tokens, int cacheable, const std::vector<int32_t>& pages);
  void release(std::vector<int32_t>& pages);  // drops one reference per page; clears the list
  // Forgets every published prefix (the weights changed, so their K/V is stale); the pages stay
  // with whoever holds them.
  void forget_prefixes();

 private:
  uint64_t page_hash(uint64_t previous, const int32_t* tokens) const;
  void take(int32_t page);

  int page_size_;
  std::vector<int> ref_counts_;
  std::vector<uint64_t> page_hashes_;             // 0 = page holds no published prefix
  std::deque<int32_t> free_;                      // least recently freed last: cached pages live longest
  std::unordered_map<uint64_t, int32_t> cached_;  // prefix hash -> page
};

}  // namespace jet
