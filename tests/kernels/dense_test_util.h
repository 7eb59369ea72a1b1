#pragma once
// Helpers shared by the dense-op tests (header only: *_util.cpp files are linked into every test of
// the layer, including other engineers').
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/fp16.h"
#include "core/rng.h"
#include "kernels/cpu/isa.h"

namespace moe::test {

// Every ISA path this CPU can run (tests run each op under all of them).
inline std::vector<kernels::Isa> dense_isas() { return kernels::supported_isas(); }

inline std::vector<float> random_vec(Rng& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> v(n);
    for (auto& x : v) x = rng.uniform(lo, hi);
    return v;
}

// Round through f16 so an f16 copy and the f32 values are the same numbers.
inline std::vector<float> round_f16(const std::vector<float>& v) {
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = fp16_to_fp32(fp32_to_fp16(v[i]));
    return r;
}

inline std::vector<uint16_t> to_f16(const std::vector<float>& v) {
    std::vector<uint16_t> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = fp32_to_fp16(v[i]);
    return r;
}

inline double max_abs_diff(const float* a, const double* b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(static_cast<double>(a[i]) - b[i]));
    return m;
}

inline double max_abs_diff(const float* a, const float* b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(static_cast<double>(a[i]) - b[i]));
    return m;
}

}  // namespace moe::test
