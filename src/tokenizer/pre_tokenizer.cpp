// Pre-tokenization steps, applied recursively: each piece of one step is cut by the next.
#include "tokenizer/pre_tokenizer.h"

#include "core/error.h"
#include "tokenizer/json_fields.h"

namespace jet::tokenizer {
namespace {

// The pattern HF's ByteLevel pre-tokenizer uses when use_regex is true (GPT-2's).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Regex split_regex_from_json(const nlohmann::json& spec, const std::string& where) {
  const auto& pattern = json_fields::require(spec, "pattern", where);
  const std::string pattern_where = where + ".pattern";
  JET_CHECK(pattern.is_object() && pattern.size() == 1, pattern_where,
            " must be {\"Regex\": ...} or {\"String\": ...}, got ", pattern.dump());
  if (pattern.contains("Regex")) {
    return Regex(json_fields::require_string(pattern, "Regex", pattern_where), Regex::Syntax::PATTERN);
  }
  if (pattern.contains("String")) {
    return Regex(json_fields::require_string(pattern, "String", pattern_where), Regex::Syntax::LITERAL);
  }
  throw Error(str(pattern_where, " must be {\"Regex\": ...} or {\"String\": ...}, got ", pattern.dump()));
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const nlohmann::json& spec) {
  PreTokenizer pre_tokenizer;
  JET_CHECK(!spec.is_null(), "pre_tokenizer is null, but only byte-level BPE is supported ",
            "(it needs a ByteLevel pre-tokenizer)");
  pre_tokenizer.add_from_json(spec, "pre_tokenizer");
  JET_CHECK(pre_tokenizer.has_byte_level_, "pre_tokenizer has no ByteLevel step, but only ",
            "byte-level BPE is supported");
  return pre_tokenizer;
}

void PreTokenizer::add_from_json(const nlohmann::json& spec, const std::string& where) {
  const std::string type = json_fields::component_type(spec, where);
  JET_CHECK(!has_byte_level_, where, ": a ", type, " step after ByteLevel is not supported ",
            "(ByteLevel must be the last pre-tokenizer step)");
  if (type == "Sequence") {
    const auto& steps = json_fields::require(spec, "pretokenizers", where);
    JET_CHECK(steps.is_array(), where, ".pretokenizers must be an array");
    for (size_t i = 0; i < steps.size(); ++i) {
      add_from_json(steps[i], str(where, ".pretokenizers[", i, "]"));
    }
  } else if (type == "Split") {
    const std::string behavior = json_fields::require_string(spec, "behavior", where);
    JET_CHECK(behavior == "Isolated", where, ".behavior '", behavior, "' is not supported (supported: Isolated)");
    JET_CHECK(!json_fields::optional_bool(spec, "invert", false, where), where, ".invert = true is not supported");
    steps_.push_back({false, split_regex_from_json(spec, where)});
  } else if (type == "ByteLevel") {
    Step step;
    step.add_prefix_space = json_fields::optional_bool(spec, "add_prefix_space", true, where);
    if (json_fields::optional_bool(spec, "use_regex", true, where)) {
      step.regex.emplace(kGpt2Pattern, Regex::Syntax::PATTERN);
    }
    steps_.push_back(std::move(step));
    has_byte_level_ = true;
  } else {
    throw Error(str(where, ": unsupported pre_tokenizer type '", type, "' (supported: Split, ByteLevel, Sequence)"));
  }
}

void PreTokenizer::for_each_piece(std::string_view text, const PieceSink& sink) const {
  if (!text.empty()) run_step(0, text, sink);
}

void PreTokenizer::run_step(size_t index, std::string_view piece, const PieceSink& sink) const {
  if (index == steps_.size()) {
    sink(piece);
    return;
  }
  const Step& step = steps_[index];
  std::string prefixed;
  if (step.add_prefix_space && piece.front() != ' ') {
    prefixed = " ";
    prefixed += piece;
    piece = prefixed;
  }
  if (!step.regex) {
    run_step(index + 1, piece, sink);
    return;
  }
  // Behavior "Isolated": every match is a piece, and so is every gap between matches.
  size_t done = 0;
  Regex::Match match;
  while (done < piece.size() && step.regex->find(piece, done, match)) {
    if (match.start > done) run_step(index + 1, piece.substr(done, match.start - done), sink);
    run_step(index + 1, piece.substr(match.start, match.end - match.start), sink);
    done = match.end;
  }
  if (done < piece.size()) run_step(index + 1, piece.substr(done), sink);
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string> pieces;
  for_each_piece(text, [&](std::string_view piece) { pieces.emplace_back(piece); });
  return pieces;
}

}  // namespace jet::tokenizer
