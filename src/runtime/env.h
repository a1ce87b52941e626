// Internal: environment knobs and logging. Operational variables (cache location, logging, timing)
// never enter kernel cache keys.
#pragma once
#include <string>

namespace b12x::detail {

std::string env_string(const char* name);  // "" when unset
bool env_flag(const char* name);           // set and not "", "0", "false", "off"

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };
// Threshold from B12X_LOG_LEVEL (error|warn|info|debug, default warn).
LogLevel log_threshold();
void log(LogLevel level, const std::string& message);  // "[b12x] <level>: message" on stderr

}  // namespace b12x::detail
