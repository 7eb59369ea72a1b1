// Q5_K: Q4_K plus a 5th bit per element from qh[32]: in chunk c, the low-nibble element l gets
// +16 if bit 2c of qh[l] is set, the high-nibble element l if bit 2c+1 is set. Reference
// dequantizer and round-to-nearest quantizer (31 levels per sub-block).
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

void dequantize_row_q5_k(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "Q5_K row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockQ5_K blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
        for (int c = 0; c < 4; ++c) {
            const uint8_t* q = blk.qs + 32 * c;
            for (int h = 0; h < 2; ++h) {
                uint8_t sc, m;
                get_scale_min_k4(2 * c + h, blk.scales, &sc, &m);
                const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
                for (int l = 0; l < 32; ++l) {
                    const int v = (h ? q[l] >> 4 : q[l] & 0xF) + (((blk.qh[l] >> (2 * c + h)) & 1) << 4);
                    *y++ = d1 * static_cast<float>(v) - m1;
                }
            }
        }
    }
}

void quantize_row_q5_k(const float* x, void* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "Q5_K row length ", n, " is not a multiple of 256");
    auto* out = static_cast<unsigned char*>(y);
    for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
        BlockQ5_K blk;
        uint8_t sc[8], m[8], q[256];
        quantize_affine_k(x, 31, &blk.d, &blk.dmin, sc, m, q);
        pack_scale_min_k4(sc, m, blk.scales);
        std::memset(blk.qh, 0, sizeof blk.qh);
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l) {
                const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
                blk.qs[32 * c + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
                blk.qh[l] = static_cast<uint8_t>(blk.qh[l] | ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
            }
        std::memcpy(out + b * sizeof blk, &blk, sizeof blk);
    }
}

}  // namespace moe::ref
