#pragma once
// Convert one row of a tensor to f32: the plain float types (F32, F16, BF16) and every quantized
// type with a reference dequantizer (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4, the K-quants Q2_K..Q6_K,
// the IQ family IQ1_S..IQ4_XS and TQ1_0/TQ2_0; see quant_formats.h). The forward pass uses it for token-embedding lookup and the loader
// for converting weights. Other types are a user-facing error (moe::Error naming the type).
#include <cstdint>

#include "core/dtype.h"

namespace moe::ref {

// True for the types dequant_row accepts.
bool dequant_row_supported(DType type);
// src: n elements of `type` (n a multiple of its block size, else moe::Error); dst: n floats.
// Throws moe::Error("dequant") for unsupported types.
void dequant_row(DType type, const void* src, float* dst, int64_t n);

}  // namespace moe::ref
