#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace moe {
namespace {
LogLevel initial_level() {
    const char* env = std::getenv("MOE_LOG_LEVEL");
    if (!env) return LogLevel::Warn;
    try {
        return parse_log_level(env);
    } catch (const Error&) {
        return LogLevel::Warn;
    }
}
std::atomic<int>& level_ref() {
    static std::atomic<int> level{static_cast<int>(initial_level())};
    return level;
}
}  // namespace

void set_log_level(LogLevel level) { level_ref().store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(level_ref().load(std::memory_order_relaxed)); }

LogLevel parse_log_level(const std::string& name) {
    if (name == "debug") return LogLevel::Debug;
    if (name == "info") return LogLevel::Info;
    if (name == "warn") return LogLevel::Warn;
    if (name == "error") return LogLevel::Error;
    if (name == "off") return LogLevel::Off;
    throw_error("log", "unknown log level '", name, "' (use debug, info, warn, error or off)");
}

void log_message(LogLevel level, const char* component, const std::string& msg) {
    static const char* names[] = {"debug", "info", "warn", "error", "off"};
    std::fprintf(stderr, "moe %s [%s] %s\n", names[static_cast<int>(level)], component, msg.c_str());
}

}  // namespace moe
