// MXFP4 (32 x E2M1 with a shared E8M0 exponent): reference dequantizer.
// y = kMxfp4Values[nibble] * 2^(e - 128); kMxfp4Values = 2 x E2M1, so y = E2M1 * 2^(e - 127).
// Nibble placement as Q4_0: low nibbles are elements 0..15, high nibbles 16..31.
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

const int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float e8m0_half(uint8_t e) { return std::ldexp(1.0f, static_cast<int>(e) - 128); }  // exact

void dequantize_row_mxfp4(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % 32 == 0, "MXFP4 row length ", n, " is not a multiple of 32");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / 32; ++b, y += 32) {
        BlockMxfp4 blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = e8m0_half(blk.e);
        for (int j = 0; j < 16; ++j) {
            y[j] = static_cast<float>(kMxfp4Values[blk.qs[j] & 0xF]) * d;
            y[j + 16] = static_cast<float>(kMxfp4Values[blk.qs[j] >> 4]) * d;
        }
    }
}

}  // namespace moe::ref
