// Tokenizer benchmark: load time of the Qwen3 tokenizer.json, and single-thread encode and
// decode speed on ~10 MB of deterministic mixed text (English prose, C and Python code,
// Chinese, numbers). Usage: tokenizer_bench [tokenizer_dir] [megabytes]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "jet/tokenizer.h"

namespace {

// A fixed-seed linear congruential generator, so every run encodes the same text.
class Lcg {
 public:
  uint32_t next() {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(state_ >> 33);
  }
  size_t below(size_t n) { return next() % n; }
  template <typename T, size_t N>
  const T& pick(const T (&items)[N]) {
    return items[below(N)];
  }

 private:
  uint64_t state_ = 20240601;
};

const char* const kEnglishWords[] = {
    "the",           "model",     "denoises",   "a",        "block",      "of",      "tokens",    "in",
    "parallel",      "and",       "then",       "commits",  "it",         "to",      "cache",     "while",
    "scheduler",     "decides",   "which",      "sequence", "runs",       "next",    "attention", "is",
    "bidirectional", "inside",    "each",       "step",     "confidence", "remains", "high",      "for",
    "most",          "positions", "but",        "some",     "masks",      "stay",    "until",     "last",
    "researchers",   "measured",  "throughput", "on",       "long",       "prompts", "with",      "many",
    "concurrent",    "requests",  "however",    "latency",  "matters",    "more",    "than",      "we",
    "expected",      "because",   "users",      "wait",     "don't",      "it's",    "they're",   "we've",
    "I'll",          "language",  "diffusion",  "sampling", "temperature"};
const char* const kChineseWords[] = {"我们", "模型", "语言", "扩散", "生成", "文本", "并行", "解码", "注意力",
                                     "缓存", "调度", "序列", "实验", "结果", "表明", "速度", "提高", "了",
                                     "显著", "方法", "数据", "训练", "推理", "研究", "问题", "可以", "因为",
                                     "所以", "但是", "非常", "重要", "的",   "在",   "是"};
const char* const kChinesePunctuation[] = {"，", "。", "、", "；", "！", "？"};
const char* const kIdentifiers[] = {"count",  "buffer", "index",   "total", "value",      "result",   "node",
                                    "length", "offset", "weights", "scale", "block_size", "num_heads"};

void append_english(Lcg& rng, std::string& out) {
  const size_t sentences = 3 + rng.below(5);
  for (size_t s = 0; s < sentences; ++s) {
    const size_t words = 6 + rng.below(14);
    for (size_t w = 0; w < words; ++w) {
      std::string word = rng.pick(kEnglishWords);
      if (w == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
      out += word;
      out += (w + 1 == words) ? (rng.below(5) == 0 ? "? " : ". ") : (rng.below(9) == 0 ? ", " : " ");
    }
  }
  out += "\n\n";
}

void append_chinese(Lcg& rng, std::string& out) {
  const size_t clauses = 4 + rng.below(8);
  for (size_t c = 0; c < clauses; ++c) {
    const size_t words = 3 + rng.below(8);
    for (size_t w = 0; w < words; ++w) out += rng.pick(kChineseWords);
    out += rng.pick(kChinesePunctuation);
  }
  out += "\n\n";
}

void append_code(Lcg& rng, std::string& out) {
  const std::string a = rng.pick(kIdentifiers), b = rng.pick(kIdentifiers);
  const std::string n = std::to_string(rng.below(4096));
  if (rng.below(2) == 0) {
    out += "static int compute_" + a + "(const float* " + b + ", int n) {\n";
    out += "    int " + a + " = 0;\n    for (int i = 0; i < n; ++i) {\n";
    out += "        if (" + b + "[i] > " + n + ".0f) " + a + " += i % " + n + ";\n    }\n";
    out += "    return " + a + "; // " + b + " checked\n}\n\n";
  } else {
    out += "def " + a + "_of(" + b + ", limit=" + n + "):\n";
    out += "    \"\"\"Return the " + a + " of " + b + ".\"\"\"\n";
    out += "    " + a + " = [x * 2 for x in " + b + " if x < limit]\n";
    out += "    return sum(" + a + ") / max(len(" + a + "), 1)\n\n";
  }
}

void append_numbers(Lcg& rng, std::string& out) {
  const size_t rows = 3 + rng.below(6);
  for (size_t r = 0; r < rows; ++r) {
    out += "2024-" + std::to_string(1 + rng.below(12)) + "-" + std::to_string(1 + rng.below(28));
    out += ", " + std::to_string(rng.next() % 1000000) + ", " + std::to_string(rng.below(100)) + "." +
           std::to_string(rng.below(1000)) + "%, $" + std::to_string(rng.below(100000)) + "\n";
  }
  out += "\n";
}

std::string make_mixed_text(size_t bytes) {
  Lcg rng;
  std::string text;
  text.reserve(bytes + 4096);
  while (text.size() < bytes) {
    const size_t kind = rng.below(20);
    if (kind < 8) {
      append_english(rng, text);
    } else if (kind < 13) {
      append_code(rng, text);
    } else if (kind < 17) {
      append_chinese(rng, text);
    } else {
      append_numbers(rng, text);
    }
  }
  return text;
}

// Wall-clock and CPU time of one phase: on a busy machine the CPU time shows the cost itself.
class Timer {
 public:
  Timer() : wall_start_(std::chrono::steady_clock::now()), cpu_start_(thread_cpu_seconds()) {}
  double wall_seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  }
  double cpu_seconds() const { return thread_cpu_seconds() - cpu_start_; }

 private:
  static double thread_cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
  }
  std::chrono::steady_clock::time_point wall_start_;
  double cpu_start_;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : std::string(JET_REPO_DIR) + "/models/qwen3-tokenizer";
  const double megabytes = argc > 2 ? std::stod(argv[2]) : 10.0;
  try {
    const std::string text = make_mixed_text(static_cast<size_t>(megabytes * 1e6));
    const double mb = static_cast<double>(text.size()) / 1e6;

    const Timer load_timer;
    const jet::Tokenizer tokenizer = jet::Tokenizer::from_file(dir + "/tokenizer.json");
    const double load_wall = load_timer.wall_seconds(), load_cpu = load_timer.cpu_seconds();

    const Timer encode_timer;
    const std::vector<int32_t> ids = tokenizer.encode(text);
    const double encode_wall = encode_timer.wall_seconds(), encode_cpu = encode_timer.cpu_seconds();

    const Timer decode_timer;
    const std::string decoded = tokenizer.decode(ids);
    const double decode_wall = decode_timer.wall_seconds(), decode_cpu = decode_timer.cpu_seconds();

    std::printf("tokenizer.json load: %.3f s wall, %.3f s CPU\n", load_wall, load_cpu);
    std::printf("text: %.2f MB, %zu tokens (%.2f bytes/token)\n", mb, ids.size(),
                static_cast<double>(text.size()) / static_cast<double>(ids.size()));
    std::printf("encode (one thread): %.3f s wall, %.3f s CPU; %.1f MB/s wall, %.1f MB/s CPU; %.2f M tokens/s wall\n",
                encode_wall, encode_cpu, mb / encode_wall, mb / encode_cpu,
                static_cast<double>(ids.size()) / encode_wall / 1e6);
    std::printf("decode: %.3f s wall, %.3f s CPU; %.1f MB/s wall\n", decode_wall, decode_cpu, mb / decode_wall);
    std::printf("round trip: %s\n", decoded == text ? "ok" : "MISMATCH");
    return decoded == text ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
    return 1;
  }
}
