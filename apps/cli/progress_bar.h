// A one-line progress bar on stderr (done/total, tokens/s), drawn only when stderr is a terminal.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace jet::cli {

class ProgressBar {
 public:
  explicit ProgressBar(size_t total) : total_(total), enabled_(total > 1 && isatty(STDERR_FILENO)) {}
  ~ProgressBar() {
    if (enabled_ && drawn_) std::fputc('\n', stderr);
  }

  // Erases the bar before other output shares the terminal; the next update draws it again.
  void clear() {
    if (!enabled_ || !drawn_) return;
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    drawn_ = false;
  }

  void update(size_t done, size_t tokens) {
    if (!enabled_) return;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    constexpr int kWidth = 30;
    const int filled = total_ ? static_cast<int>(kWidth * done / total_) : kWidth;
    std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu  %.1f tok/s", filled, "##############################", kWidth - filled,
                 "", done, total_, secs > 0 ? tokens / secs : 0.0);
    std::fflush(stderr);
    drawn_ = true;
  }

 private:
  size_t total_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace jet::cli
