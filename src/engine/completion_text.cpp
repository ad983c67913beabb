// CompletionText: the completion's text as tokens are committed, and the stop-string search in it.
#include "engine/completion_text.h"

#include <algorithm>

namespace jet {

CompletionText::CompletionText(const Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    : stops_(std::move(stop_strings)), decoder_(std::in_place, tokenizer, /*skip_special_tokens=*/true) {
  for (const std::string& stop : stops_) longest_stop_ = std::max(longest_stop_, stop.size());
}

bool CompletionText::push(int32_t id) {
  if (final_) return true;
  const size_t before = text_.size();
  text_ += decoder_->push(id);
  if (stops_.empty() || text_.size() == before) return false;
  // A match new with this token ends in the new text, so it starts at most longest - 1 bytes
  // before it; the earliest start among the stop strings wins.
  const size_t from = before - std::min(before, longest_stop_ - 1);
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, text_.find(stop, from));
  if (first == std::string::npos) return false;
  text_.resize(first);
  final_ = true;
  return true;
}

void CompletionText::finish() {
  if (final_) return;
  text_ += decoder_->finish();
  final_ = true;
}

std::string_view CompletionText::streamable() const {
  std::string_view text = text_;
  if (final_) return text;
  // The longest tail of the text that is a proper prefix of some stop string is held back.
  size_t held = 0;
  for (const std::string& stop : stops_) {
    for (size_t n = std::min(stop.size() - 1, text.size()); n > held; --n) {
      if (text.substr(text.size() - n) == std::string_view(stop).substr(0, n)) {
        held = n;
        break;
      }
    }
  }
  return text.substr(0, text.size() - held);
}

void CompletionText::reset() {
  if (decoder_) decoder_->finish();
  text_.clear();
  final_ = false;
}

}  // namespace jet
