#pragma once
// Random valid blocks of any quantized type: every bit pattern of the index, sign, level and scale
// fields is a valid value of these formats, so random bytes are valid blocks once the float fields
// (fp16 scales, MXFP4's exponent, IQ1_M's spread super-scale) are set to finite, moderate values.
// Test and `moe gen`-style data for the types without a quantizer here (the IQ family, Q2_K, Q3_K,
// ...); the dequantized weights are then the reference (ref::dequantize_row).
#include <cstdint>

#include "core/dtype.h"
#include "core/rng.h"

namespace moe::ref {

// Writes nblocks blocks of `type` (quantized, with a reference dequantizer) at out. The float fields
// are chosen so that the largest |weight| of a block is about amp (in [amp/4, amp]); mins (Q4_1,
// Q5_1, the K-quants with dmin) may be negative for Q4_1/Q5_1. Returns false for other types.
bool fill_random_blocks(DType type, Rng& rng, void* out, int64_t nblocks, float amp);

}  // namespace moe::ref
