// IQ1_S and IQ1_M (256 = 8 groups of 32 = 32 groups of 8; each group of 8 is one entry of the
// 2048-entry ternary grid plus a shift of +-1/8): reference dequantizers.
//   IQ1_S: per group ib of 32, u16 qh[ib]: bits 3l..3l+2 = high 3 bits of the 11-bit grid index of
//          group l of 8 (low 8 bits qs[4 ib + l]), bits 12..14 = scale s, bit 15 = delta sign;
//          dl = d * (2 s + 1); y = dl * (grid + delta), delta = -1/8 if bit 15 else +1/8.
//   IQ1_M: no fp16 field: the super-scale's 16 bits are the top nibbles of the four little-endian
//          u16 words of scales (word k bits 12..15 -> bits 4k..4k+3). Per group ib of 32, two 3-bit
//          scales (word ib / 2, bits 6 (ib % 2) + 0..2 for the first 16 values, + 3..5 for the
//          second); per group l of 8: index = qs[4 ib + l] | 3 bits of qh[2 ib + l / 2] (low nibble
//          bits 0..2 for even l, high nibble bits 4..6 for odd l) << 8, delta sign = bit 3 (even l)
//          or bit 7 (odd l) of that byte; y = dl * (grid + delta), dl = d * (2 s + 1).
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

namespace {
inline void group8(float dl, int idx, bool neg, float* y) {
    const float delta = neg ? -kIq1Delta : kIq1Delta;
    const uint64_t g = kIq1sGrid[idx];
    for (int j = 0; j < 8; ++j) y[j] = dl * (static_cast<float>(static_cast<int8_t>(grid_byte(g, j))) + delta);
}
}  // namespace

uint16_t iq1_m_scale_bits(const uint8_t scales[8]) {
    uint16_t sc[4];
    std::memcpy(sc, scales, 8);
    return static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
}

void dequantize_row_iq1_s(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "IQ1_S row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockIQ1_S blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
            const unsigned qh = blk.qh[ib];
            const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
            for (int l = 0; l < 4; ++l, y += 8)
                group8(dl, blk.qs[4 * ib + l] | static_cast<int>(((qh >> (3 * l)) & 7) << 8), (qh & 0x8000) != 0, y);
        }
    }
}

void dequantize_row_iq1_m(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "IQ1_M row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockIQ1_M blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(iq1_m_scale_bits(blk.scales));
        uint16_t sc[4];
        std::memcpy(sc, blk.scales, 8);
        for (int ib = 0; ib < 8; ++ib) {
            const unsigned w = sc[ib / 2] >> (6 * (ib % 2));
            const float dl[2] = {d * static_cast<float>(2 * (w & 7) + 1), d * static_cast<float>(2 * ((w >> 3) & 7) + 1)};
            for (int l = 0; l < 4; ++l, y += 8) {
                const unsigned h = blk.qh[2 * ib + l / 2] >> (4 * (l % 2));  // this group's nibble
                group8(dl[l / 2], blk.qs[4 * ib + l] | static_cast<int>((h & 7) << 8), (h & 8) != 0, y);
            }
        }
    }
}

}  // namespace moe::ref
