// Q6_K (256 = 16 sub-blocks of 16, 6-bit with offset 32, signed 8-bit scales): reference
// dequantizer and round-to-nearest quantizer. Per 128-element half (ql 64 bytes, qh 32 bytes,
// scales 8), for l in 0..31:
//   y[l]    = d*sc[l/16+0]*((ql[l]    & 0xF | ((qh[l] >> 0) & 3) << 4) - 32)
//   y[l+32] = d*sc[l/16+2]*((ql[l+32] & 0xF | ((qh[l] >> 2) & 3) << 4) - 32)
//   y[l+64] = d*sc[l/16+4]*((ql[l]    >> 4  | ((qh[l] >> 4) & 3) << 4) - 32)
//   y[l+96] = d*sc[l/16+6]*((ql[l+32] >> 4  | ((qh[l] >> 6) & 3) << 4) - 32)
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

void dequantize_row_q6_k(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "Q6_K row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockQ6_K blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int half = 0; half < 2; ++half, y += 128) {
            const uint8_t* ql = blk.ql + 64 * half;
            const uint8_t* qh = blk.qh + 32 * half;
            const int8_t* sc = blk.scales + 8 * half;
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
                y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
                y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
                y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
            }
        }
    }
}

// Per 16 values: the value v of largest magnitude maps to -32 (scale s = v / -32); the 16 scales
// are stored as round(s / d) with d = max|s| / 127; then q = clamp(round(x / (d*sc)), -32, 31).
void quantize_row_q6_k(const float* x, void* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "Q6_K row length ", n, " is not a multiple of 256");
    auto* out = static_cast<unsigned char*>(y);
    for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
        float s[16], smax = 0.0f;
        for (int j = 0; j < 16; ++j) {
            float v = 0.0f;
            for (int l = 0; l < 16; ++l)
                if (std::fabs(x[16 * j + l]) > std::fabs(v)) v = x[16 * j + l];
            s[j] = v / -32.0f;
            smax = std::fmax(smax, std::fabs(s[j]));
        }
        BlockQ6_K blk;
        blk.d = fp32_to_fp16(smax / 127.0f);
        const float d = fp16_to_fp32(blk.d);
        uint8_t q[256];
        for (int j = 0; j < 16; ++j) {
            const float r = d > 0.0f ? std::nearbyint(s[j] / d) : 0.0f;
            blk.scales[j] = static_cast<int8_t>(std::fmin(127.0f, std::fmax(-127.0f, r)));
            const float S = d * static_cast<float>(blk.scales[j]);
            for (int l = 0; l < 16; ++l) {
                const float v = S != 0.0f ? std::nearbyint(x[16 * j + l] / S) : 0.0f;
                q[16 * j + l] = static_cast<uint8_t>(std::fmin(31.0f, std::fmax(-32.0f, v)) + 32.0f);
            }
        }
        std::memset(blk.qh, 0, sizeof blk.qh);
        for (int half = 0; half < 2; ++half) {
            const uint8_t* qq = q + 128 * half;
            uint8_t* ql = blk.ql + 64 * half;
            uint8_t* qh = blk.qh + 32 * half;
            for (int l = 0; l < 32; ++l) {
                ql[l] = static_cast<uint8_t>((qq[l] & 0xF) | ((qq[l + 64] & 0xF) << 4));
                ql[l + 32] = static_cast<uint8_t>((qq[l + 32] & 0xF) | ((qq[l + 96] & 0xF) << 4));
                qh[l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) |
                                             ((qq[l + 96] >> 4) << 6));
            }
        }
        std::memcpy(out + b * sizeof blk, &blk, sizeof blk);
    }
}

}  // namespace moe::ref
