#pragma once
// Leveled logging to stderr. The threshold is the one piece of process-wide state the engine has
// (like every CLI's verbosity flag): it is an atomic set once by the front end (or MOE_LOG_LEVEL),
// and logging never changes program results.
#include <string>

#include "core/error.h"

namespace moe {

enum class LogLevel : int { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
LogLevel parse_log_level(const std::string& name);  // "debug", "info", ... ; throws on unknown
void log_message(LogLevel level, const char* component, const std::string& msg);

template <typename... Args>
void log(LogLevel level, const char* component, Args&&... args) {
    if (level < log_level()) return;
    log_message(level, component, detail::concat(std::forward<Args>(args)...));
}

}  // namespace moe

#define MOE_LOG_DEBUG(component, ...) ::moe::log(::moe::LogLevel::Debug, component, __VA_ARGS__)
#define MOE_LOG_INFO(component, ...) ::moe::log(::moe::LogLevel::Info, component, __VA_ARGS__)
#define MOE_LOG_WARN(component, ...) ::moe::log(::moe::LogLevel::Warn, component, __VA_ARGS__)
