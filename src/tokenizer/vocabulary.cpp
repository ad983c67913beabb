// Vocabulary storage. Decoded bytes are computed once per token so decoding is a table lookup.
#include "tokenizer/vocabulary.h"

#include <functional>

#include "core/error.h"
#include "tokenizer/byte_level.h"

namespace jet::tokenizer {

void Vocabulary::add(int32_t id, std::string text, bool special, std::string_view where) {
  JET_CHECK(id >= 0 && id < kMaxTokenId, where, ": token '", text, "' has id ", id,
            ", outside the supported range 0 .. ", kMaxTokenId - 1);
  if (contains(id)) {
    JET_CHECK(entries_[id].text == text, where, ": id ", id, " is given to both '", entries_[id].text, "' and '", text,
              "'");
    entries_[id].special = special;
    return;
  }
  const size_t hash = std::hash<std::string_view>{}(text);
  const int32_t existing = find(text, hash);
  JET_CHECK(existing < 0, where, ": token '", text, "' has two ids, ", existing, " and ", id);
  if ((slots_used_ + 1) * 2 > slots_.size()) grow_slots(slots_.size() * 2);
  if (static_cast<size_t>(id) >= entries_.size()) entries_.resize(static_cast<size_t>(id) + 1);
  Entry& entry = entries_[id];
  // HF's ByteLevel decoder maps every character back to its byte, or keeps the token's own
  // UTF-8 if any character lies outside the byte alphabet (typical for added tokens).
  entry.bytes = byte_level::decode(text).value_or(text);
  entry.text = std::move(text);
  entry.known = true;
  entry.special = special;
  insert_slot(id, hash);
}

int32_t Vocabulary::find(std::string_view text) const { return find(text, std::hash<std::string_view>{}(text)); }

int32_t Vocabulary::find(std::string_view text, size_t hash) const {
  if (slots_.empty()) return -1;
  const size_t mask = slots_.size() - 1;
  const auto tag = static_cast<uint32_t>(hash >> 32);
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot slot = slots_[i];
    if (slot.id < 0) return -1;
    if (slot.tag == tag && entries_[slot.id].text == text) return slot.id;
  }
}

void Vocabulary::insert_slot(int32_t id, size_t hash) {
  const size_t mask = slots_.size() - 1;
  size_t i = hash & mask;
  while (slots_[i].id >= 0) i = (i + 1) & mask;
  slots_[i] = {static_cast<uint32_t>(hash >> 32), id};
  ++slots_used_;
}

void Vocabulary::grow_slots(size_t min_slots) {
  size_t size = 1024;
  while (size < min_slots) size *= 2;
  if (size <= slots_.size()) return;
  slots_.assign(size, Slot{0, -1});
  slots_used_ = 0;
  for (size_t id = 0; id < entries_.size(); ++id) {
    if (entries_[id].known) {
      insert_slot(static_cast<int32_t>(id), std::hash<std::string_view>{}(entries_[id].text));
    }
  }
}

void Vocabulary::reserve(size_t count) {
  entries_.reserve(count);
  grow_slots(count * 2);
}

}  // namespace jet::tokenizer
