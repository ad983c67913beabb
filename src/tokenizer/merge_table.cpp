// Growth and insertion for MergeTable; the table is kept at most 70% full.
#include "tokenizer/merge_table.h"

#include <algorithm>
#include <bit>

namespace jet::tokenizer {

void MergeTable::reserve(size_t count) {
  const size_t wanted = std::bit_ceil(count * 10 / 7 + 1);
  if (wanted > slots_.size()) rehash(wanted);
}

void MergeTable::insert_or_assign(int32_t left, int32_t right, Merge merge) {
  if ((used_ + 1) * 10 > slots_.size() * 7) rehash(slots_.size() * 2);
  const uint64_t key = pair_key(left, right);
  size_t i = slot_of(key);
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
  if (slots_[i].key == kEmpty) ++used_;
  slots_[i] = {key, merge};
}

void MergeTable::rehash(size_t slot_count) {
  slot_count = std::max(slot_count, kMinSlots);
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(slot_count, Slot{kEmpty, {0, -1}});
  mask_ = slot_count - 1;
  shift_ = 64 - static_cast<unsigned>(std::countr_zero(slot_count));
  used_ = 0;
  for (const Slot& slot : old) {
    if (slot.key == kEmpty) continue;
    size_t i = slot_of(slot.key);
    while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
    slots_[i] = slot;
    ++used_;
  }
}

}  // namespace jet::tokenizer
