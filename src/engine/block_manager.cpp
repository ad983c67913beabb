// Page pool and prefix cache. A page's hash chains the hash of the page before it, so equal
// hashes mean equal prefixes (up to 64-bit hash collisions).
#include "engine/block_manager.h"

#include <algorithm>

#include "core/error.h"
#include "core/hash.h"

namespace jet {

BlockManager::BlockManager(int num_pages, int page_size)
    : page_size_(page_size), ref_counts_(num_pages, 0), page_hashes_(num_pages, 0) {
  JET_CHECK(num_pages > 0, "the KV cache must have at least one page, got ", num_pages);
  for (int32_t p = 0; p < num_pages; ++p) free_.push_back(p);
}

uint64_t BlockManager::page_hash(uint64_t previous, const int32_t* tokens) const {
  uint64_t h = mix64(previous ^ 0x51ED270B27D1C4A3ull);
  for (int i = 0; i < page_size_; ++i) h = mix64(h + static_cast<uint32_t>(tokens[i]));
  return h | 1;  // never 0, which marks "no hash"
}

void BlockManager::take(int32_t page) {
  if (ref_counts_[page]++ == 0) free_.erase(std::find(free_.begin(), free_.end(), page));
}

std::vector<int32_t> BlockManager::acquire_cached_prefix(const std::vector<int32_t>& tokens, int cacheable,
                                                         int boundary) {
  JET_CHECK(boundary >= 1, "acquire_cached_prefix: boundary must be >= 1, got ", boundary);
  std::vector<int32_t> pages;
  uint64_t h = 0;
  for (int start = 0; start + page_size_ <= cacheable; start += page_size_) {
    h = page_hash(h, tokens.data() + start);
    auto it = cached_.find(h);
    if (it == cached_.end()) break;
    pages.push_back(it->second);
  }
  while (!pages.empty() && int64_t{page_size_} * static_cast<int64_t>(pages.size()) % boundary != 0) pages.pop_back();
  for (int32_t p : pages) take(p);
  return pages;
}

bool BlockManager::allocate(int n, std::vector<int32_t>& pages) {
  if (n > num_free()) return false;
  for (int i = 0; i < n; ++i) {
    int32_t p = free_.front();
    free_.pop_front();
    if (page_hashes_[p]) {  // reusing a cached page: forget what it held
      cached_.erase(page_hashes_[p]);
      page_hashes_[p] = 0;
    }
    ref_counts_[p] = 1;
    pages.push_back(p);
  }
  return true;
}

void BlockManager::publish_prefix(const std::vector<int32_t>& tokens, int cacheable,
                                  const std::vector<int32_t>& pages) {
  uint64_t h = 0;
  for (int i = 0; (i + 1) * page_size_ <= cacheable && i < static_cast<int>(pages.size()); ++i) {
    h = page_hash(h, tokens.data() + i * page_size_);
    if (page_hashes_[pages[i]] == h) continue;  // already published (a shared page)
    if (cached_.count(h)) continue;             // another page holds the same prefix
    JET_ASSERT(page_hashes_[pages[i]] == 0);
    page_hashes_[pages[i]] = h;
    cached_[h] = pages[i];
  }
}

void BlockManager::release(std::vector<int32_t>& pages) {
  for (int32_t p : pages) {
    JET_ASSERT(ref_counts_[p] > 0, "page ", p, " released twice");
    if (--ref_counts_[p] == 0) free_.push_back(p);
  }
  pages.clear();
}

void BlockManager::forget_prefixes() {
  cached_.clear();
  std::fill(page_hashes_.begin(), page_hashes_.end(), 0);
}

}  // namespace jet
