#pragma once
// The one checked size-arithmetic helper. Every parser computes sizes and offsets through these, so
// a hostile file cannot make a size wrap around. Errors name the component and what overflowed.
#include <cstdint>
#include <limits>

#include "core/error.h"

namespace moe {

inline uint64_t checked_add(uint64_t a, uint64_t b, const char* component, const char* what) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) throw_error(component, "size overflow computing ", what);
    return r;
}

inline uint64_t checked_mul(uint64_t a, uint64_t b, const char* component, const char* what) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) throw_error(component, "size overflow computing ", what);
    return r;
}

// Product of n dims; each must be > 0.
inline uint64_t checked_product(const int64_t* dims, int n, const char* component, const char* what) {
    uint64_t r = 1;
    for (int i = 0; i < n; ++i) {
        if (dims[i] <= 0) throw_error(component, what, ": dimension ", i, " is ", dims[i], " (must be > 0)");
        r = checked_mul(r, static_cast<uint64_t>(dims[i]), component, what);
    }
    return r;
}

// Round x up to a multiple of a (a > 0).
inline uint64_t checked_align(uint64_t x, uint64_t a, const char* component, const char* what) {
    uint64_t rem = x % a;
    return rem == 0 ? x : checked_add(x, a - rem, component, what);
}

// Narrowing that refuses to lose information (e.g. uint64 file count -> size_t / int64).
template <typename To, typename From>
To checked_cast(From v, const char* component, const char* what) {
    if (v < 0 && !std::numeric_limits<To>::is_signed) throw_error(component, what, " is negative");
    if (static_cast<unsigned long long>(v) > static_cast<unsigned long long>(std::numeric_limits<To>::max()))
        throw_error(component, what, " is too large (", v, ")");
    return static_cast<To>(v);
}

}  // namespace moe
