// libFuzzer target: arbitrary bytes through the Qwen3 tokenizer (plus SDAR's <|MASK|>).
// - As text: invalid UTF-8 (judged independently by utf8proc) must throw jet::Error and valid
//   UTF-8 must encode to known ids that decode back to the same text up to NFC:
//   NFC(decode(encode(x))) == NFC(x). The incremental decoder must agree with decode.
// - As ids (3 bytes each, covering negative and unknown ids): decode must give valid UTF-8 and
//   the incremental decoder the same text. Any other exception, crash or ASan report is a bug.
//
// Build (clang) and the short run CTest does (JET_FUZZ_SECONDS, 20 s by default):
//   cmake -S . -B build-fuzz -G Ninja -DJET_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
//         -DJET_TESTS=OFF
//   ninja -C build-fuzz fuzz_tokenizer && ctest --test-dir build-fuzz -R fuzz_tokenizer --output-on-failure
// Long run (e.g. 4 hours on every core), growing a corpus kept outside the repository:
//   mkdir -p /tmp/tokenizer-corpus
//   build-fuzz/fuzz/fuzz_tokenizer -dict=fuzz/fuzz_tokenizer.dict -jobs=$(nproc) -workers=$(nproc) \
//       -max_total_time=14400 -max_len=4096 -rss_limit_mb=4096 /tmp/tokenizer-corpus fuzz/corpus/fuzz_tokenizer
// A failure leaves crash-<sha1> (or leak-/timeout-) in the working directory; replay it with
//   build-fuzz/fuzz/fuzz_tokenizer crash-<sha1>
// and add the fixed input to fuzz/corpus/fuzz_tokenizer/ as a regression seed.
// The tokenizer folder is models/qwen3-tokenizer of this repository, or $JET_TOKENIZER_DIR.
#include <utf8proc.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "jet/tokenizer.h"

namespace {

const jet::Tokenizer& tokenizer() {
  static const jet::Tokenizer instance = [] {
    const char* dir = std::getenv("JET_TOKENIZER_DIR");
    jet::Tokenizer t = jet::Tokenizer::from_dir(dir ? dir : JET_REPO_DIR "/models/qwen3-tokenizer");
    t.add_token("<|MASK|>", 151669, false);
    return t;
  }();
  return instance;
}

// Aborts with a message: libFuzzer records the input that got here.
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_tokenizer: %s\n", what);
  std::abort();
}

// Validity as utf8proc sees it, independent of the tokenizer's own UTF-8 code.
bool is_valid_utf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  for (size_t pos = 0; pos < text.size();) {
    utf8proc_int32_t code_point = 0;
    const utf8proc_ssize_t length =
        utf8proc_iterate(bytes + pos, static_cast<utf8proc_ssize_t>(text.size() - pos), &code_point);
    if (length < 0) return false;
    pos += static_cast<size_t>(length);
  }
  return true;
}

std::string nfc(std::string_view text) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &result, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(result, &std::free);
  if (length < 0) fail("utf8proc could not normalise valid text");
  return std::string(reinterpret_cast<const char*>(result), static_cast<size_t>(length));
}

void check_incremental_decode(const std::vector<int32_t>& ids) {
  for (bool skip_special : {false, true}) {
    jet::IncrementalDecoder decoder(tokenizer(), skip_special);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = decoder.push(id);
      if (!is_valid_utf8(piece)) fail("the incremental decoder emitted invalid UTF-8");
      streamed += piece;
    }
    streamed += decoder.finish();
    const std::string decoded = tokenizer().decode(ids, skip_special);
    if (!is_valid_utf8(decoded)) fail("decode returned invalid UTF-8");
    if (streamed != decoded) fail("incremental decoding differs from decode");
  }
}

void check_text(std::string_view text) {
  const bool valid = is_valid_utf8(text);
  std::vector<int32_t> ids;
  try {
    ids = tokenizer().encode(text);
  } catch (const jet::Error&) {
    if (valid) fail("valid UTF-8 was rejected");
    return;
  }
  if (!valid) fail("invalid UTF-8 was accepted");
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= tokenizer().size()) fail("encode produced an unknown id");
  }
  if (nfc(tokenizer().decode(ids)) != nfc(text)) fail("decode(encode(x)) is not canonically equivalent to x");
  if (tokenizer().encode(text, true) != ids) fail("Qwen3's post-processor added tokens");
  check_incremental_decode(ids);
}

void check_ids(const uint8_t* data, size_t size) {
  // Ids from -100 to a few hundred past the tokenizer's end: unknown ones must decode to nothing.
  const int64_t span = static_cast<int64_t>(tokenizer().size()) + 400;
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 3 <= size; i += 3) {
    const int64_t raw = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16);
    ids.push_back(static_cast<int32_t>(raw * span / (1 << 24) - 100));
  }
  check_incremental_decode(ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_text(std::string_view(reinterpret_cast<const char*>(data), size));
  check_ids(data, size);
  return 0;
}
