// CompletionText: a sequence's completion text, decoded as its tokens are committed (special
// tokens skipped), and the search for its stop strings (SamplingParams::stop) in that text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jet/tokenizer.h"

namespace jet {

class CompletionText {
 public:
  CompletionText() = default;  // holds no text; push() must not be called
  CompletionText(const Tokenizer& tokenizer, std::vector<std::string> stop_strings);

  // Appends the text of the next committed token. Returns true when the text now holds one of the
  // stop strings: the text is then cut where the first of them begins, and is final.
  bool push(int32_t id);
  // The sequence has ended without a stop string: flushes what the decoder held back.
  void finish();
  // The completion text so far (before its first stop string once one is found).
  const std::string& text() const { return text_; }
  // What a stream may send now: the whole text once final, else all but the held-back tail that a
  // stop string could still begin in (a later token may complete it and the tail is cut off).
  std::string_view streamable() const;
  // Back to no tokens (a preempted sequence recommits from the prompt).
  void reset();

 private:
  std::vector<std::string> stops_;
  std::optional<IncrementalDecoder> decoder_;
  std::string text_;
  size_t longest_stop_ = 0;
  bool final_ = false;
};

}  // namespace jet
