// Log level from JET_LOG_LEVEL, and the line writer.
#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace jet {

namespace {

LogLevel level_from_env() {
  const char* v = std::getenv("JET_LOG_LEVEL");
  if (!v) return LogLevel::Info;
  if (!std::strcmp(v, "debug")) return LogLevel::Debug;
  if (!std::strcmp(v, "warn")) return LogLevel::Warn;
  if (!std::strcmp(v, "error")) return LogLevel::Error;
  if (!std::strcmp(v, "off")) return LogLevel::Off;
  return LogLevel::Info;
}

std::atomic<LogLevel>& current_level() {
  static std::atomic<LogLevel> level{level_from_env()};
  return level;
}

}  // namespace

LogLevel log_level() { return current_level().load(std::memory_order_relaxed); }
void set_log_level(LogLevel level) { current_level().store(level); }

void log_line(LogLevel level, const std::string& message) {
  static const char* const names[] = {"debug", "info", "warning", "error"};
  std::fprintf(stderr, "[jetengine] %s: %s\n", names[static_cast<int>(level)], message.c_str());
}

}  // namespace jet
