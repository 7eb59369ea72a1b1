#pragma once
// AVX2 + F16C forms of cpu::dequant_row (dequant_row_avx2.cpp); same bits as ref::dequant_row.
#include <cstdint>

#include "core/dtype.h"

namespace moe::cpu {
// Converts the first k of n values of `type` at src to dst and returns k: n for Q8_0 / Q4_K / Q5_K /
// Q6_K rows of whole blocks, n rounded down to 8 for F16 / BF16 (the caller finishes the tail), 0 for
// any other type or shape. The caller checks that the CPU has AVX2, FMA and F16C.
int64_t dequant_row_avx2(DType type, const void* src, float* dst, int64_t n);
}  // namespace moe::cpu
