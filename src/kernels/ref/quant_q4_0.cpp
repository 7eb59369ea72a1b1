// Q4_0 (32 x 4-bit, offset 8) and Q4_1 (32 x 4-bit with min): reference dequantizers and the
// Q4_0 round-to-nearest quantizer. Layout and rules: quant_formats.h, FACTS.md section 3.
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

void dequantize_row_q4_0(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % 32 == 0, "Q4_0 row length ", n, " is not a multiple of 32");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / 32; ++b, y += 32) {
        BlockQ4_0 blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int j = 0; j < 16; ++j) {
            y[j] = static_cast<float>((blk.qs[j] & 0xF) - 8) * d;
            y[j + 16] = static_cast<float>((blk.qs[j] >> 4) - 8) * d;
        }
    }
}

void dequantize_row_q4_1(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % 32 == 0, "Q4_1 row length ", n, " is not a multiple of 32");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / 32; ++b, y += 32) {
        BlockQ4_1 blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d), m = fp16_to_fp32(blk.m);
        for (int j = 0; j < 16; ++j) {
            y[j] = static_cast<float>(blk.qs[j] & 0xF) * d + m;
            y[j + 16] = static_cast<float>(blk.qs[j] >> 4) * d + m;
        }
    }
}

// d = v / -8 where v is the value of largest magnitude (so v itself maps to q = 0 exactly);
// q = clamp(round(x / d) + 8, 0, 15) with the fp16-rounded d. Error <= |d|/2 except for values of
// the opposite sign near |v|, clamped at +7: error <= |d| (plus the fp16 rounding of d).
void quantize_row_q4_0(const float* x, void* y, int64_t n) {
    MOE_ASSERT(n % 32 == 0, "Q4_0 row length ", n, " is not a multiple of 32");
    auto* out = static_cast<unsigned char*>(y);
    for (int64_t b = 0; b < n / 32; ++b, x += 32) {
        float v = 0.0f;
        for (int j = 0; j < 32; ++j)
            if (std::fabs(x[j]) > std::fabs(v)) v = x[j];
        BlockQ4_0 blk;
        blk.d = fp32_to_fp16(v / -8.0f);
        const float d = fp16_to_fp32(blk.d);
        uint8_t q[32];
        for (int j = 0; j < 32; ++j) {
            const float r = d != 0.0f ? std::nearbyint(x[j] / d) : 0.0f;
            q[j] = static_cast<uint8_t>(std::fmin(15.0f, std::fmax(0.0f, r + 8.0f)));
        }
        for (int j = 0; j < 16; ++j) blk.qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
        std::memcpy(out + b * sizeof blk, &blk, sizeof blk);
    }
}

}  // namespace moe::ref
