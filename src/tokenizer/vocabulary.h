// Every token the tokenizer knows (model vocabulary and added tokens): id <-> text, the bytes
// each id decodes to, and which ids are special. Ids may have gaps; unknown ids decode to nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace jet::tokenizer {

class Vocabulary {
 public:
  // Ids index a table, so they are bounded; real vocabularies stay far below (~260K at most).
  static constexpr int32_t kMaxTokenId = 1 << 24;

  // Registers `text` under `id`. Registering the same pair again only updates `special`;
  // an id or a text that is already taken by something else throws, naming `where`.
  void add(int32_t id, std::string text, bool special, std::string_view where);

  int32_t find(std::string_view text) const;  // -1 if absent
  bool contains(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < entries_.size() && entries_[id].known; }
  const std::string& text(int32_t id) const { return entries_[id].text; }  // needs contains(id)
  std::string_view bytes(int32_t id) const { return entries_[id].bytes; }  // needs contains(id)
  bool is_special(int32_t id) const { return contains(id) && entries_[id].special; }
  size_t size() const { return entries_.size(); }  // largest id + 1
  void reserve(size_t count);

 private:
  struct Entry {
    std::string text;
    std::string bytes;  // what the ByteLevel decoder turns `text` into
    bool known = false;
    bool special = false;
  };
  // text -> id as an open-addressing table (linear probing, at most half full) whose keys are
  // the entries' own texts: with ~150K tokens and ~450K lookups while loading merges, this is
  // several times faster than std::unordered_map, whose nodes miss the cache.
  int32_t find(std::string_view text, size_t hash) const;
  struct Slot {
    uint32_t tag;  // upper hash bits, compared before the text
    int32_t id;    // -1: empty
  };
  void insert_slot(int32_t id, size_t hash);  // needs a free slot beyond half the table
  void grow_slots(size_t min_slots);

  std::vector<Entry> entries_;
  std::vector<Slot> slots_;
  size_t slots_used_ = 0;
};

}  // namespace jet::tokenizer
