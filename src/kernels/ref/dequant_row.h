#pragma once
// Convert one row of a plain float tensor (F32, F16, BF16) to f32. Quantized types are the MoE
// engineer's kernels; asking this op for one is a user-facing error (a model stored in a type the
// dense path cannot read), so it throws moe::Error naming the type.
#include <cstdint>

#include "core/dtype.h"

namespace moe::ref {

// True for the types dequant_row accepts.
bool dequant_row_supported(DType type);
// src: n elements of `type`; dst: n floats. Throws moe::Error("dequant") for other types.
void dequant_row(DType type, const void* src, float* dst, int64_t n);

}  // namespace moe::ref
