#pragma once
// Fast row conversion F16/BF16 -> F32 (model loading converts whole weight tensors with it).
// Both conversions are exact, so every path gives the same bits as ref::dequant_row.
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/dense_isa.h"

namespace moe::cpu {
// Same contract as ref::dequant_row (throws moe::Error("dequant") for unsupported types).
void dequant_row(DType type, const void* src, float* dst, int64_t n, kernels::Isa isa = kernels::best_isa());
}  // namespace moe::cpu
