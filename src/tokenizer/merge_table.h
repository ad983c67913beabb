// The BPE merge rules as a flat open-addressing hash table: (left id, right id) -> (rank,
// merged id). BPE looks a pair up for every candidate merge, so this lookup is the hottest
// operation of encoding; one probe usually costs a single cache miss.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace jet::tokenizer {

class MergeTable {
 public:
  struct Merge {
    uint32_t rank;
    int32_t merged_id;
  };

  void reserve(size_t count);
  // Sets the rule for (left, right), replacing an earlier one (HF keeps the last).
  void insert_or_assign(int32_t left, int32_t right, Merge merge);
  // The rule for (left, right), or nullptr.
  const Merge* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pair_key(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.key == key) return &slot.merge;
      if (slot.key == kEmpty) return nullptr;
    }
  }

 private:
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  // Ids are non-negative, so a key with both halves all ones never occurs.
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  // Table sizes are powers of two from here on, which keeps the hash shift below 64.
  static constexpr size_t kMinSlots = 1024;

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  size_t slot_of(uint64_t key) const {  // Fibonacci hashing: the top bits of key * 2^64/phi
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift_);
  }
  void rehash(size_t slot_count);

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t used_ = 0;
};

}  // namespace jet::tokenizer
