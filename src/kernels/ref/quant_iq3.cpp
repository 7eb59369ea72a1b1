// IQ3_XXS and IQ3_S (256 = 8 groups of 32; groups of 8 = two grid entries of 4 magnitudes, with
// 8 signs): reference dequantizers.
//   IQ3_XXS: qs[0..63] = grid indices (8 per group of 32); group ib's u32 word w (bytes 64 + 4 ib
//            of qs): bits 7l..7l+6 = sign bits of group l of 8 (iq_signs8), w >> 28 = scale s;
//            db = d * (0.5 + s) * 0.5.
//   IQ3_S:   per group ib of 32: index of entry t (0..7) = qs[8 ib + t] | bit t of qh[ib] << 8
//            (9 bits); signs[4 ib + l] = the 8 signs of group l of 8 (explicit); scale of group ib
//            = nibble (ib % 2) of scales[ib / 2]: db = d * (1 + 2 s).
// y = db * magnitude * (negative ? -1 : 1).
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

namespace {
inline void group8(float db, uint32_t g0, uint32_t g1, uint8_t signs, float* y) {
    for (int j = 0; j < 8; ++j) {
        const float v = db * static_cast<float>(grid_byte(j < 4 ? g0 : g1, j % 4));
        y[j] = (signs >> j) & 1 ? -v : v;
    }
}
}  // namespace

void dequantize_row_iq3_xxs(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "IQ3_XXS row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockIQ3_XXS blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
            uint32_t w;
            std::memcpy(&w, blk.sas + 4 * ib, 4);
            const float db = d * (0.5f + static_cast<float>(w >> 28)) * 0.5f;
            const uint8_t* qs = blk.qs + 8 * ib;
            for (int l = 0; l < 4; ++l, y += 8)
                group8(db, kIq3xxsGrid[qs[2 * l]], kIq3xxsGrid[qs[2 * l + 1]], iq_signs8(w >> (7 * l)), y);
        }
    }
}

void dequantize_row_iq3_s(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "IQ3_S row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockIQ3_S blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
            const int s = (blk.scales[ib / 2] >> (4 * (ib % 2))) & 0xF;
            const float db = d * static_cast<float>(1 + 2 * s);
            const uint8_t* qs = blk.qs + 8 * ib;
            const int qh = blk.qh[ib];
            for (int l = 0; l < 4; ++l, y += 8) {
                const int i0 = qs[2 * l] | (((qh >> (2 * l)) & 1) << 8);
                const int i1 = qs[2 * l + 1] | (((qh >> (2 * l + 1)) & 1) << 8);
                group8(db, kIq3sGrid[i0], kIq3sGrid[i1], blk.signs[4 * ib + l], y);
            }
        }
    }
}

}  // namespace moe::ref
