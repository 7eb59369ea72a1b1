#pragma once
// Error policy (docs/ARCHITECTURE.md, "errors"):
//  - bad user input (files, flags, requests) -> throw moe::Error with a "[component]" prefix that
//    names the problem and what to do;
//  - broken internal invariants (kernels, planners) -> MOE_ASSERT, always on, aborts with location.
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace moe {

class Error : public std::runtime_error {
public:
    Error(std::string component, const std::string& message)
        : std::runtime_error("[" + component + "] " + message), component_(std::move(component)) {}
    const std::string& component() const { return component_; }

private:
    std::string component_;
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
}
[[noreturn]] inline void assert_fail(const char* expr, const char* file, int line, const std::string& msg) {
    std::fprintf(stderr, "moe: internal error: %s:%d: assertion '%s' failed%s%s\n", file, line, expr,
                 msg.empty() ? "" : ": ", msg.c_str());
    std::abort();
}
}  // namespace detail

// throw_error("gguf", "file ", path, " is truncated") -> "[gguf] file x is truncated"
template <typename... Args>
[[noreturn]] void throw_error(std::string component, Args&&... args) {
    throw Error(std::move(component), detail::concat(std::forward<Args>(args)...));
}

}  // namespace moe

// Internal invariant; never use on user input.
#define MOE_ASSERT(cond, ...)                                                                       \
    do {                                                                                            \
        if (!(cond)) ::moe::detail::assert_fail(#cond, __FILE__, __LINE__, ::moe::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
    } while (0)
