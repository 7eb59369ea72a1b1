// IQ4_NL (32 x 4-bit index into 16 non-uniform levels, fp16 scale) and IQ4_XS (256 = 8 groups of 32,
// 6-bit signed group scales): reference dequantizers. Nibble placement as Q4_0 per 32 values: low
// nibbles of qs[0..15] are elements 0..15, high nibbles 16..31. IQ4_XS group scale ib: low 4 bits =
// nibble (ib % 2) of scales_l[ib / 2], high 2 bits = bits 2 ib, 2 ib + 1 of scales_h; value - 32.
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

// The 16 levels of the format (ggml-common.h kvalues_iq4nl; tested by property in test_iq_tables).
const int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

void dequantize_row_iq4_nl(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % 32 == 0, "IQ4_NL row length ", n, " is not a multiple of 32");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / 32; ++b, y += 32) {
        BlockIQ4_NL blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int j = 0; j < 16; ++j) {
            y[j] = d * static_cast<float>(kIq4nlValues[blk.qs[j] & 0xF]);
            y[j + 16] = d * static_cast<float>(kIq4nlValues[blk.qs[j] >> 4]);
        }
    }
}

void dequantize_row_iq4_xs(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "IQ4_XS row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockIQ4_XS blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib, y += 32) {
            const int ls = ((blk.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((blk.scales_h >> (2 * ib)) & 3) << 4);
            const float dl = d * static_cast<float>(ls - 32);
            const uint8_t* qs = blk.qs + 16 * ib;
            for (int j = 0; j < 16; ++j) {
                y[j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xF]);
                y[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
            }
        }
    }
}

}  // namespace moe::ref
