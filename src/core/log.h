// Minimal leveled logging to stderr. JET_LOG_LEVEL=debug|info|warn|error|off (default info).
#pragma once

#include <string>

#include "core/error.h"

namespace jet {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_line(LogLevel level, const std::string& message);

template <typename... Args>
void log_info(const Args&... args) {
  if (log_level() <= LogLevel::Info) log_line(LogLevel::Info, str(args...));
}
template <typename... Args>
void log_warn(const Args&... args) {
  if (log_level() <= LogLevel::Warn) log_line(LogLevel::Warn, str(args...));
}
template <typename... Args>
void log_debug(const Args&... args) {
  if (log_level() <= LogLevel::Debug) log_line(LogLevel::Debug, str(args...));
}

}  // namespace jet
