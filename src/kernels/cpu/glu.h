#pragma once
// The experts' gated activation over a row of n intermediate values, in place:
//   h[i] = act(h[i] + gb[i], u[i] + ub[i])        (gb, ub: per-column biases, or nullptr)
//   SwiGLU:         act(g, u) = g / (1 + exp(-g)) * u
//   clamped (gpt-oss): g = min(g, limit), u = clamp(u, -limit, limit),
//                   act(g, u) = (u + 1) * (g / (1 + exp(-alpha g)))
// exp is ref::exp_f32 on every path; the AVX-512 path runs the same f32 / f64 operations in the same
// order, 16 columns at a time, so every path gives the scalar reference's bits (glu1 below).
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/dense_isa.h"
#include "kernels/ref/exp_f32.h"

namespace moe::cpu {

struct GluSpec {
    bool clamped = false;  // gpt-oss's clamped SwiGLU
    float limit = 0.0f;    // clamp limit (clamped only)
    float alpha = 1.0f;    // sigmoid slope (clamped only)
};

// The scalar reference for one value.
inline float glu1(const GluSpec& s, float g, float u) {
    if (!s.clamped) return g / (1.0f + ref::exp_f32(-g)) * u;
    g = std::min(g, s.limit);
    u = std::min(std::max(u, -s.limit), s.limit);
    return (u + 1.0f) * (g / (1.0f + ref::exp_f32(-s.alpha * g)));
}

void glu(const GluSpec& s, int64_t n, float* h, const float* u, const float* gb, const float* ub,
         kernels::Isa isa = kernels::best_isa());

}  // namespace moe::cpu
