// Q8_0 reference quantizer (see quantize_q8_0.h). Scalar on purpose: it is the oracle for any
// SIMD version and is only used offline (moe gen) where I/O dominates.
#include "kernels/ref/quantize_q8_0.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"

namespace moe::ref {

void quantize_row_q8_0(const float* x, void* y, int64_t n) {
    MOE_ASSERT(n % kQ8_0Block == 0, "Q8_0 row length ", n, " is not a multiple of 32");
    auto* out = static_cast<unsigned char*>(y);
    for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
        const float* xb = x + b * kQ8_0Block;
        float amax = 0.0f;
        for (int j = 0; j < kQ8_0Block; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ8_0 blk;
        blk.d = fp32_to_fp16(d);
        for (int j = 0; j < kQ8_0Block; ++j) blk.qs[j] = static_cast<int8_t>(std::round(xb[j] * id));
        std::memcpy(out + b * kQ8_0BlockBytes, &blk, kQ8_0BlockBytes);
    }
}

void dequantize_row_q8_0(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQ8_0Block == 0, "Q8_0 row length ", n, " is not a multiple of 32");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, in + b * kQ8_0BlockBytes, kQ8_0BlockBytes);
        const float d = fp16_to_fp32(blk.d);
        for (int j = 0; j < kQ8_0Block; ++j) y[b * kQ8_0Block + j] = d * static_cast<float>(blk.qs[j]);
    }
}

}  // namespace moe::ref
