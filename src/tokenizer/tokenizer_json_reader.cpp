// A SAX handler that builds a JSON tree like nlohmann's own DOM parser, except under
// model.vocab and model.merges, whose entries it collects into BpeTables.
#include "tokenizer/tokenizer_json_reader.h"

#include <limits>

#include "core/error.h"

namespace jet::tokenizer {
namespace {

using Json = nlohmann::json;

// "left right" (the older merge notation) -> (left, right).
std::pair<std::string, std::string> split_merge_string(const std::string& text, size_t rank) {
  const size_t space = text.find(' ');
  JET_CHECK(space != std::string::npos && text.find(' ', space + 1) == std::string::npos, "model.merges[", rank,
            "] = \"", text, "\" must be two tokens separated by one space");
  return {text.substr(0, space), text.substr(space + 1)};
}

class Reader : public nlohmann::json_sax<Json> {
 public:
  TokenizerJson result;
  std::string error;

  bool null() override { return add_scalar(Json(nullptr), "null"); }
  bool boolean(bool value) override { return add_scalar(Json(value), "a boolean"); }
  bool number_integer(number_integer_t value) override {
    if (capture_ == Capture::VOCAB) return add_vocab_id(value);
    return add_scalar(Json(value), "a number");
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (capture_ == Capture::VOCAB) {
      return add_vocab_id(value > static_cast<number_unsigned_t>(std::numeric_limits<int64_t>::max())
                              ? -1
                              : static_cast<int64_t>(value));
    }
    return add_scalar(Json(value), "a number");
  }
  bool number_float(number_float_t value, const string_t&) override { return add_scalar(Json(value), "a number"); }
  bool binary(binary_t&) override { return add_scalar(Json(), "binary"); }
  bool string(string_t& value) override {
    if (capture_ == Capture::MERGES) {
      if (pair_open_) {
        pair_parts_.push_back(std::move(value));
      } else {
        result.bpe.merges.push_back(split_merge_string(value, result.bpe.merges.size()));
      }
      return true;
    }
    return add_scalar(Json(std::move(value)), "a string");
  }
  bool key(string_t& value) override {
    key_ = std::move(value);
    return true;
  }

  bool start_object(std::size_t) override {
    reject_in_capture("an object");
    if (stack_.size() == 2 && stack_[1] == model_ && key_ == "vocab") {
      capture_ = Capture::VOCAB;
      result.bpe.has_vocab = true;
      result.bpe.vocab.clear();
      return true;
    }
    const bool is_model = stack_.size() == 1 && stack_[0]->is_object() && key_ == "model";
    Json* object = open(Json::object());
    if (is_model) model_ = object;
    return true;
  }
  bool end_object() override {
    if (capture_ == Capture::VOCAB) {
      capture_ = Capture::NONE;
    } else {
      stack_.pop_back();
    }
    return true;
  }
  bool start_array(std::size_t) override {
    if (capture_ == Capture::MERGES && !pair_open_) {
      pair_open_ = true;
      pair_parts_.clear();
      return true;
    }
    reject_in_capture("an array");
    if (stack_.size() == 2 && stack_[1] == model_ && key_ == "merges") {
      capture_ = Capture::MERGES;
      result.bpe.has_merges = true;
      result.bpe.merges.clear();
      return true;
    }
    open(Json::array());
    return true;
  }
  bool end_array() override {
    if (capture_ == Capture::MERGES) {
      if (!pair_open_) {
        capture_ = Capture::NONE;
        return true;
      }
      JET_CHECK(pair_parts_.size() == 2, "model.merges[", result.bpe.merges.size(),
                "] must be [\"left\", \"right\"], got ", pair_parts_.size(), " strings");
      result.bpe.merges.emplace_back(std::move(pair_parts_[0]), std::move(pair_parts_[1]));
      pair_open_ = false;
      return true;
    }
    stack_.pop_back();
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error = e.what();
    return false;
  }

 private:
  enum class Capture { NONE, VOCAB, MERGES };

  void reject_in_capture(const char* what) {
    JET_CHECK(capture_ != Capture::VOCAB, "model.vocab[\"", key_, "\"] must be an integer token id, got ", what);
    JET_CHECK(capture_ != Capture::MERGES, "model.merges[", result.bpe.merges.size(),
              "] must be \"left right\" or [\"left\", \"right\"], found ", what, " in it");
  }

  bool add_vocab_id(int64_t id) {
    JET_CHECK(id >= 0 && id <= std::numeric_limits<int32_t>::max(), "model.vocab[\"", key_, "\"] = ", id,
              " is not a valid token id (0 .. 2^31-1)");
    result.bpe.vocab.emplace_back(std::move(key_), static_cast<int32_t>(id));
    return true;
  }

  bool add_scalar(Json value, const char* what) {
    reject_in_capture(what);
    place(std::move(value));
    return true;
  }

  // Puts `value` where the parser is (the root, the pending key of an object, or the end of an
  // array) and returns its address. Addresses stay valid: objects are std::maps, and an array
  // only grows at its end, after its open child (the last element) has been closed.
  Json* place(Json value) {
    if (stack_.empty()) {
      result.root = std::move(value);
      return &result.root;
    }
    Json& parent = *stack_.back();
    if (parent.is_object()) {
      Json& slot = parent[key_];
      slot = std::move(value);
      return &slot;
    }
    parent.push_back(std::move(value));
    return &parent.back();
  }

  Json* open(Json container) {
    Json* opened = place(std::move(container));
    stack_.push_back(opened);
    return opened;
  }

  std::vector<Json*> stack_;  // the open objects and arrays, outermost first
  std::string key_;           // the last object key read
  Json* model_ = nullptr;     // the root's "model" object, once opened
  Capture capture_ = Capture::NONE;
  bool pair_open_ = false;  // inside a ["left", "right"] merge
  std::vector<std::string> pair_parts_;
};

}  // namespace

TokenizerJson read_tokenizer_json(std::string_view text) {
  Reader reader;
  if (!Json::sax_parse(text, &reader)) throw Error(str("not valid JSON: ", reader.error));
  return std::move(reader.result);
}

}  // namespace jet::tokenizer
