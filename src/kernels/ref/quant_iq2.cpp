// IQ2_XXS, IQ2_XS, IQ2_S (256 = 8 groups of 32 = 32 groups of 8): reference dequantizers. Each
// group of 8 values is one grid entry (8 magnitudes, iq_tables.h) times 8 signs, times a scale:
//   IQ2_XXS: per 32: two u32 words a0, a1 of qs; bytes of a0 = grid indices of the 4 groups of 8,
//            a1 bits 7l..7l+6 = sign bits of group l (iq_signs8), a1 >> 28 = scale s;
//            db = d * (0.5 + s) * 0.25 (f32, in that order).
//   IQ2_XS:  per group of 8: u16 qs = 9-bit grid index | 7 sign bits << 9; per 16 values a 4-bit
//            scale (scales[ib] low nibble: first 16 of group ib of 32, high nibble: second 16).
//   IQ2_S:   per group l of 8 in group ib of 32: index = qs[4 ib + l] | ((qh[ib] >> 2l) & 3) << 8
//            (10 bits), signs = signs[4 ib + l] (8 explicit bits); scales as IQ2_XS.
// y = db * magnitude * (negative ? -1 : 1).
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

namespace {
inline void group8(float db, uint64_t grid, uint8_t signs, float* y) {
    for (int j = 0; j < 8; ++j) {
        const float v = db * static_cast<float>(grid_byte(grid, j));
        y[j] = (signs >> j) & 1 ? -v : v;
    }
}
inline float db_iq2(float d, int s) { return d * (0.5f + static_cast<float>(s)) * 0.25f; }
}  // namespace

void dequantize_row_iq2_xxs(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "IQ2_XXS row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockIQ2_XXS blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
            uint32_t a[2];
            std::memcpy(a, blk.qs + 4 * ib, 8);
            const float db = db_iq2(d, static_cast<int>(a[1] >> 28));
            for (int l = 0; l < 4; ++l, y += 8)
                group8(db, kIq2xxsGrid[(a[0] >> (8 * l)) & 0xFF], iq_signs8(a[1] >> (7 * l)), y);
        }
    }
}

void dequantize_row_iq2_xs(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "IQ2_XS row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockIQ2_XS blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
            const float db[2] = {db_iq2(d, blk.scales[ib] & 0xF), db_iq2(d, blk.scales[ib] >> 4)};
            for (int l = 0; l < 4; ++l, y += 8) {
                const uint16_t q = blk.qs[4 * ib + l];
                group8(db[l / 2], kIq2xsGrid[q & 511], iq_signs8(q >> 9), y);
            }
        }
    }
}

void dequantize_row_iq2_s(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "IQ2_S row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockIQ2_S blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
            const float db[2] = {db_iq2(d, blk.scales[ib] & 0xF), db_iq2(d, blk.scales[ib] >> 4)};
            for (int l = 0; l < 4; ++l, y += 8) {
                const int idx = blk.qs[4 * ib + l] | (((blk.qh[ib] >> (2 * l)) & 3) << 8);
                group8(db[l / 2], kIq2sGrid[idx], blk.signs[4 * ib + l], y);
            }
        }
    }
}

}  // namespace moe::ref
