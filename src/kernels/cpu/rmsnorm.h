#pragma once
// Fast RMSNorm (see kernels/ref/rmsnorm.h for the definition and the per-head variant).
#include "kernels/cpu/dense_isa.h"
#include "kernels/ref/rmsnorm.h"

namespace moe::cpu {
// AVX-512: sum of squares in 16 f32 lanes (FMA), then a fixed-order lane reduction. Scalar: the
// reference (double accumulation). x, y: [n_rows, row_len] (y may equal x); w: [row_len] or nullptr.
void rmsnorm(const RmsNormSpec& spec, const float* x, const float* w, float* y, kernels::Isa isa = kernels::best_isa());
}  // namespace moe::cpu
