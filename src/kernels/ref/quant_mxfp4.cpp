// MXFP4 (32 x E2M1 with a shared E8M0 exponent): reference dequantizer.
// y = kMxfp4Values[nibble] * 2^(e - 128); kMxfp4Values = 2 x E2M1, so y = E2M1 * 2^(e - 127).
// Nibble placement as Q4_0: low nibbles are elements 0..15, high nibbles 16..31.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

const int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};


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

namespace moe::ref {

// Round-to-nearest MXFP4 (OCP MX: shared exponent = floor(log2(amax)) - emax(E2M1) = 2, as E8M0
// with bias 127): every value becomes the nearest of +-{0, .5, 1, 1.5, 2, 3, 4, 6} * 2^(e - 127)
// (ties to the smaller magnitude); magnitudes above 6 * 2^(e - 127) (amax up to 8x) saturate to 6.
// Written from the format; dequantize_row_mxfp4 reads it back exactly (round-trip test).
void quantize_row_mxfp4(const float* x, void* y, int64_t n) {
    MOE_ASSERT(n % 32 == 0, "MXFP4 row length ", n, " is not a multiple of 32");
    auto* out = static_cast<unsigned char*>(y);
    for (int64_t b = 0; b < n / 32; ++b, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        int e = 0;
        if (amax > 0.0f && std::isfinite(amax)) {
            int ex;
            std::frexp(amax, &ex);  // amax = m * 2^ex, m in [0.5, 1): floor(log2(amax)) = ex - 1
            e = std::clamp(ex - 1 - 2 + 127, 0, 254);
        }
        BlockMxfp4 blk;
        blk.e = static_cast<uint8_t>(e);
        const float d = e8m0_half(blk.e);  // kMxfp4Values are 2x the E2M1 values
        auto nearest = [&](float v) -> uint8_t {
            const float a = std::fabs(v);
            int best = 0;
            float err = a;  // |0 - a|
            for (int i = 1; i < 8; ++i) {
                const float ei = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - a);
                if (ei < err) best = i, err = ei;
            }
            return static_cast<uint8_t>(best == 0 || !(v < 0.0f) ? best : best + 8);
        };
        for (int j = 0; j < 16; ++j) blk.qs[j] = static_cast<uint8_t>(nearest(x[j]) | (nearest(x[j + 16]) << 4));
        std::memcpy(out + b * sizeof blk, &blk, sizeof blk);
    }
}

}  // namespace moe::ref
