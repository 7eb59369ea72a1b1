#include "kernels/ref/elementwise.h"

#include <cmath>

#include "kernels/ref/exp_f32.h"

namespace moe::ref {

void add(int64_t n, const float* a, const float* b, float* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void mul(int64_t n, const float* a, const float* b, float* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void scale(int64_t n, const float* x, float s, float* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = s * x[i];
}

// x / (1 + exp(-x)): for x -> -inf, exp(-x) overflows to inf and the result is -0 (correct limit).
// exp_f32: the one exp of the activations (bit-identical on every path, kernels/cpu/glu.h).
static inline float silu1(float x) { return x / (1.0f + exp_f32(-x)); }

void silu(int64_t n, const float* x, float* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = silu1(x[i]);
}

void swiglu(int64_t n, const float* gate, const float* up, float* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = silu1(gate[i]) * up[i];
}

}  // namespace moe::ref
