// Q4_K (256 = 8 sub-blocks of 32, 4-bit, 6-bit scale and min per sub-block): reference
// dequantizer and round-to-nearest quantizer. For 64-element chunk c (qs[32c .. 32c+31]):
// elements 0..31 = d*sc(2c)*(qs & 0xF) - dmin*m(2c); 32..63 = d*sc(2c+1)*(qs >> 4) - dmin*m(2c+1).
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

void pack_scale_min_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t q[12]) {
    for (int j = 0; j < 4; ++j) {
        q[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
}

void quantize_affine_k(const float* x, int levels, uint16_t* d16, uint16_t* dmin16, uint8_t sc[8], uint8_t m[8],
                       uint8_t q[256]) {
    float scale[8], mins[8], max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
        float lo = 0.0f, hi = 0.0f;  // lo <= 0 so the stored min is >= 0 (it is subtracted)
        for (int l = 0; l < 32; ++l) {
            lo = std::fmin(lo, x[32 * j + l]);
            hi = std::fmax(hi, x[32 * j + l]);
        }
        scale[j] = (hi - lo) / static_cast<float>(levels);
        mins[j] = -lo;
        max_scale = std::fmax(max_scale, scale[j]);
        max_min = std::fmax(max_min, mins[j]);
    }
    *d16 = fp32_to_fp16(max_scale / 63.0f);
    *dmin16 = fp32_to_fp16(max_min / 63.0f);
    const float d = fp16_to_fp32(*d16), dmin = fp16_to_fp32(*dmin16);
    for (int j = 0; j < 8; ++j) {
        sc[j] = d > 0.0f ? static_cast<uint8_t>(std::fmin(63.0f, std::nearbyint(scale[j] / d))) : 0;
        m[j] = dmin > 0.0f ? static_cast<uint8_t>(std::fmin(63.0f, std::nearbyint(mins[j] / dmin))) : 0;
        const float S = d * static_cast<float>(sc[j]), M = dmin * static_cast<float>(m[j]);
        for (int l = 0; l < 32; ++l) {
            const float r = S > 0.0f ? std::nearbyint((x[32 * j + l] + M) / S) : 0.0f;
            q[32 * j + l] = static_cast<uint8_t>(std::fmin(static_cast<float>(levels), std::fmax(0.0f, r)));
        }
    }
}

void dequantize_row_q4_k(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "Q4_K row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockQ4_K blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
        for (int c = 0; c < 4; ++c) {
            const uint8_t* q = blk.qs + 32 * c;
            uint8_t sc, m;
            get_scale_min_k4(2 * c, blk.scales, &sc, &m);
            float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
            for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
            get_scale_min_k4(2 * c + 1, blk.scales, &sc, &m);
            d1 = d * static_cast<float>(sc);
            m1 = dmin * static_cast<float>(m);
            for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] >> 4) - m1;
        }
    }
}

void quantize_row_q4_k(const float* x, void* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "Q4_K row length ", n, " is not a multiple of 256");
    auto* out = static_cast<unsigned char*>(y);
    for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
        BlockQ4_K blk;
        uint8_t sc[8], m[8], q[256];
        quantize_affine_k(x, 15, &blk.d, &blk.dmin, sc, m, q);
        pack_scale_min_k4(sc, m, blk.scales);
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l)
                blk.qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
        std::memcpy(out + b * sizeof blk, &blk, sizeof blk);
    }
}

}  // namespace moe::ref
