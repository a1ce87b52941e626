#include "runtime/env.h"

#include <cstdlib>
#include <iostream>
#include <mutex>

namespace b12x::detail {

std::string env_string(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool env_flag(const char* name) {
  const std::string v = env_string(name);
  return !(v.empty() || v == "0" || v == "false" || v == "off" || v == "no");
}

LogLevel log_threshold() {
  const std::string v = env_string("B12X_LOG_LEVEL");
  if (v == "error") return LogLevel::error;
  if (v == "info") return LogLevel::info;
  if (v == "debug") return LogLevel::debug;
  return LogLevel::warn;
}

void log(LogLevel level, const std::string& message) {
  if (level > log_threshold()) return;
  static const char* kNames[] = {"error", "warn", "info", "debug"};
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::cerr << "[b12x] " << kNames[static_cast<int>(level)] << ": " << message << std::endl;
}

}  // namespace b12x::detail
