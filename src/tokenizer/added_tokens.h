// Added tokens (tokenizer.json "added_tokens", tokenizer_config.json additions, add_token):
// found in the text before anything else, leftmost-longest first, as HF does; the text between
// them goes through the normal pipeline.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace jet::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;  // only match when not inside a word
  bool lstrip = false;       // the match also takes the white space to its left
  bool rstrip = false;       // ... and to its right
  bool normalized = false;   // matched in normalised text instead of raw text
};

// A piece of text after cutting out added tokens: either plain text or one token.
struct Segment {
  std::string_view text;
  int32_t token_id;  // -1 for plain text
};

// Finds a set of added tokens in text.
class AddedTokenMatcher {
 public:
  // Adds `token`, looking for `pattern` in the text (its content, normalised if it is a
  // `normalized` token).
  void add(const AddedToken& token, std::string pattern);
  bool empty() const { return entries_.empty(); }

  using SegmentSink = std::function<void(const Segment&)>;
  // Calls `sink` with the plain-text segments (non-empty) and the tokens of `text`, in order.
  void split(std::string_view text, const SegmentSink& sink) const;

 private:
  struct Entry {
    AddedToken token;
    std::string pattern;
  };
  struct Found {
    size_t start, end;
    const Entry* entry;
  };
  bool find(std::string_view text, size_t from, Found& found) const;

  std::vector<Entry> entries_;
  // For each first byte, the entries whose pattern starts with it, longest pattern first.
  std::array<std::vector<size_t>, 256> by_first_byte_;
};

}  // namespace jet::tokenizer
