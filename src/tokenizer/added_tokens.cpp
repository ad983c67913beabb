// Leftmost-longest matching of added tokens with HF's single_word / lstrip / rstrip rules.
#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/unicode_classes.h"
#include "core/utf8.h"

namespace jet::tokenizer {
namespace {

// Offset of the character that ends just before `end` (end > 0, valid UTF-8).
size_t previous_character_start(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return start;
}

char32_t code_point_before(std::string_view text, size_t end) {
  return utf8::decode_one(text, previous_character_start(text, end)).code_point;
}

// Start of the run of white space that ends at `end`.
size_t white_space_run_start(std::string_view text, size_t end) {
  while (end > 0 && unicode::is_white_space(code_point_before(text, end))) {
    end = previous_character_start(text, end);
  }
  return end;
}

// End of the run of white space that starts at `start`.
size_t white_space_run_end(std::string_view text, size_t start) {
  while (start < text.size()) {
    const utf8::Sequence seq = utf8::decode_one(text, start);
    if (!unicode::is_white_space(seq.code_point)) break;
    start += seq.length;
  }
  return start;
}

}  // namespace

void AddedTokenMatcher::add(const AddedToken& token, std::string pattern) {
  JET_CHECK(!pattern.empty(), "added token id ", token.id, " has empty content");
  entries_.push_back({token, std::move(pattern)});
  std::vector<size_t>& bucket = by_first_byte_[static_cast<unsigned char>(entries_.back().pattern[0])];
  bucket.push_back(entries_.size() - 1);
  std::stable_sort(bucket.begin(), bucket.end(),
                   [&](size_t a, size_t b) { return entries_[a].pattern.size() > entries_[b].pattern.size(); });
}

bool AddedTokenMatcher::find(std::string_view text, size_t from, Found& found) const {
  for (size_t start = from; start < text.size(); ++start) {
    for (size_t index : by_first_byte_[static_cast<unsigned char>(text[start])]) {
      const std::string& pattern = entries_[index].pattern;
      if (text.compare(start, pattern.size(), pattern) == 0) {
        found = {start, start + pattern.size(), &entries_[index]};
        return true;
      }
    }
  }
  return false;
}

void AddedTokenMatcher::split(std::string_view text, const SegmentSink& sink) const {
  size_t emitted = 0;  // text before this offset has been handed to `sink`
  size_t search_from = 0;
  Found found;
  while (!entries_.empty() && find(text, search_from, found)) {
    // Like HF's automaton, the next search starts after this match even if it is rejected.
    search_from = found.end;
    const AddedToken& token = found.entry->token;
    if (token.single_word) {
      const bool word_before = found.start > 0 && unicode::is_word_character(code_point_before(text, found.start));
      const bool word_after =
          found.end < text.size() && unicode::is_word_character(utf8::decode_one(text, found.end).code_point);
      if (word_before || word_after) continue;
    }
    size_t start = found.start;
    size_t end = found.end;
    if (token.lstrip) start = std::max(white_space_run_start(text, start), emitted);
    if (token.rstrip) end = white_space_run_end(text, end);
    if (start > emitted) sink({text.substr(emitted, start - emitted), -1});
    sink({text.substr(start, end - start), token.id});
    emitted = end;
    search_from = std::max(search_from, end);
  }
  if (emitted < text.size()) sink({text.substr(emitted), -1});
}

}  // namespace jet::tokenizer
