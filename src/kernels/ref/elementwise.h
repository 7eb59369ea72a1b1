#pragma once
// Elementwise ops of the dense path. All take n elements; outputs may alias inputs.
// They are memory-bound one-pass loops that the compiler vectorises (add, mul) or that run on
// [T, n_ff] activations far smaller than the matmuls around them (silu/swiglu: the dense FFN; the
// experts' activations run kernels/cpu/glu.h, with the same exp and the same bits).
#include <cstdint>

namespace moe::ref {

void add(int64_t n, const float* a, const float* b, float* y);     // y = a + b (residual)
void mul(int64_t n, const float* a, const float* b, float* y);     // y = a * b
void scale(int64_t n, const float* x, float s, float* y);          // y = s * x
void silu(int64_t n, const float* x, float* y);                    // y = x / (1 + exp(-x))
void swiglu(int64_t n, const float* gate, const float* up, float* y);  // y = silu(gate) * up

}  // namespace moe::ref
