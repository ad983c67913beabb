// `jetengine tokenize` and `jetengine detokenize`: text <-> token ids with a model folder's
// tokenizer, through stdin and stdout, as one JSON document or one JSON value per line (--jsonl).
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "arg_parser.h"
#include "commands.h"
#include "core/error.h"
#include "core/json_object.h"
#include "jet/tokenizer.h"
#include "token_ids_json.h"

namespace jet::cli {
namespace {

constexpr const char* kTokenizeUsage =
    "usage: jetengine tokenize --model DIR [--jsonl] [--add-special-tokens]\n"
    "  Reads UTF-8 text from stdin and prints its token ids as one JSON array.\n"
    "  --model DIR            a HuggingFace folder with tokenizer.json, or Qwen2's vocab.json + merges.txt\n"
    "  --jsonl                each input line is a JSON string; prints one JSON array per line\n"
    "  --add-special-tokens   add the tokenizer's template tokens such as BOS (none for Qwen3/SDAR)\n";

constexpr const char* kDetokenizeUsage =
    "usage: jetengine detokenize --model DIR [--jsonl] [--skip-special-tokens]\n"
    "  Reads a JSON array of token ids from stdin and prints the text they decode to.\n"
    "  --model DIR             a HuggingFace folder with tokenizer.json, or Qwen2's vocab.json + merges.txt\n"
    "  --jsonl                 each input line is a JSON array; prints one JSON string per line\n"
    "                          (non-ASCII characters written as \\uXXXX escapes)\n"
    "  --skip-special-tokens   leave special tokens (<|im_start|>, ...) out of the text\n"
    "  Ids the tokenizer does not know decode to nothing.\n";

std::string read_all_stdin() {
  std::ios::sync_with_stdio(false);
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

// Calls `handle(line)` for each '\n'-terminated line of `input` (a last line may lack the '\n'),
// prefixing any error with its 1-based line number.
template <typename Handle>
void for_each_line(std::string_view input, Handle&& handle) {
  size_t number = 0;
  while (!input.empty()) {
    ++number;
    const size_t end = input.find('\n');
    const std::string_view line = input.substr(0, end);
    input = end == std::string_view::npos ? std::string_view() : input.substr(end + 1);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank lines, as JSONL allows
    try {
      handle(line);
    } catch (const std::exception& e) {
      throw Error(str("line ", number, ": ", e.what()));
    }
  }
}

nlohmann::json parse_json(std::string_view text, const char* expected) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // syntax, and numbers past double's range
    throw Error(str("expected ", expected, ": ", e.what()));
  }
}

void print_line(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace

int cmd_tokenize(const Args& args) {
  const ArgParser flags(args, {"--model"}, {"--jsonl", "--add-special-tokens", "--help"});
  if (flags.has("--help")) {
    std::fputs(kTokenizeUsage, stdout);
    return 0;
  }
  const Tokenizer tokenizer = Tokenizer::from_dir(flags.require("--model"));
  const bool add_special_tokens = flags.has("--add-special-tokens");
  const std::string input = read_all_stdin();
  if (!flags.has("--jsonl")) {
    print_line(nlohmann::json(tokenizer.encode(input, add_special_tokens)).dump());
    return 0;
  }
  for_each_line(input, [&](std::string_view line) {
    const nlohmann::json text = parse_json(line, "a JSON string");
    JET_CHECK(text.is_string(), "expected a JSON string, got ", text.type_name());
    print_line(nlohmann::json(tokenizer.encode(text.get_ref<const std::string&>(), add_special_tokens)).dump());
  });
  return 0;
}

int cmd_detokenize(const Args& args) {
  const ArgParser flags(args, {"--model"}, {"--jsonl", "--skip-special-tokens", "--help"});
  if (flags.has("--help")) {
    std::fputs(kDetokenizeUsage, stdout);
    return 0;
  }
  const Tokenizer tokenizer = Tokenizer::from_dir(flags.require("--model"));
  const bool skip_special_tokens = flags.has("--skip-special-tokens");
  const std::string input = read_all_stdin();
  if (!flags.has("--jsonl")) {
    // The text exactly as decoded: no newline is added, so output can be compared byte for byte.
    const std::string text =
        tokenizer.decode(ids_from_json(parse_json(input, "a JSON array of token ids")), skip_special_tokens);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  for_each_line(input, [&](std::string_view line) {
    const std::vector<int32_t> ids = ids_from_json(parse_json(line, "a JSON array of token ids"));
    // ASCII-only output (\uXXXX escapes), so that no line splitter breaks a line at U+2028 & co.
    print_line(nlohmann::json(tokenizer.decode(ids, skip_special_tokens)).dump(-1, ' ', true));
  });
  return 0;
}

}  // namespace jet::cli
