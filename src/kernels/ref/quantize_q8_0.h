#pragma once
// Q8_0 reference quantizer and dequantizer (FACTS.md section 3): blocks of 32 values stored as
// `half d; int8 qs[32]` (34 bytes) with d = max|x| / 127 and q = round(x / d), y = d * q.
// Matches ggml's reference quantize_row_q8_0_ref bit for bit: the scale used for rounding is
// 1/d computed in f32 before d is rounded to fp16, and rounding is round-half-away-from-zero.
#include <cstdint>

namespace moe::ref {

constexpr int kQ8_0Block = 32;
constexpr int kQ8_0BlockBytes = 34;

struct BlockQ8_0 {
    uint16_t d;  // fp16 scale
    int8_t qs[kQ8_0Block];
};
static_assert(sizeof(BlockQ8_0) == kQ8_0BlockBytes, "Q8_0 block must be 34 bytes");

// x: n floats (n a multiple of 32, checked with MOE_ASSERT); y: n/32 blocks (34 bytes each).
void quantize_row_q8_0(const float* x, void* y, int64_t n);
// x: n/32 blocks; y: n floats.
void dequantize_row_q8_0(const void* x, float* y, int64_t n);

}  // namespace moe::ref
