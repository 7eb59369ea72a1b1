#pragma once
#include <chrono>
#include <cstdint>

namespace moe {

// Monotonic wall-clock timer.
class Timer {
public:
    Timer() : start_(clock::now()) {}
    void reset() { start_ = clock::now(); }
    double seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }
    double ms() const { return seconds() * 1e3; }
    static uint64_t now_ns() {
        return static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count());
    }

private:
    using clock = std::chrono::steady_clock;
    clock::time_point start_;
};

}  // namespace moe
