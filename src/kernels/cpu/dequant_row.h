#pragma once
// Fast row conversion F16/BF16/Q8_0/Q4_K/Q5_K/Q6_K -> F32 (model loading converts whole weight tensors with it;
// MLA's head products dequantize kv_b rows per call, kernels/cpu/head_rows.h). All are exact,
// so every path gives the same bits as ref::dequant_row; other types run ref::dequant_row. Paths: AVX-512
// (dequant_row.cpp) for Isa::Avx512, AVX2 + F16C (dequant_row_avx2.cpp) for Isa::Avx2 or Avx512 on a CPU
// without AVX-512, the reference for Isa::Scalar.
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/dense_isa.h"

namespace moe::cpu {
// Same contract as ref::dequant_row (throws moe::Error("dequant") for unsupported types).
void dequant_row(DType type, const void* src, float* dst, int64_t n, kernels::Isa isa = kernels::best_isa());
}  // namespace moe::cpu
