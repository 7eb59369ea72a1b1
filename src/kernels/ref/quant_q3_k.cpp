// Q3_K (256 = 16 sub-blocks of 16, 3-bit, signed 6-bit scales): reference dequantizer.
// Scale j: low 4 bits = nibble (j % 8) of bytes 0..7 (low nibble for j < 8, high for j >= 8),
// high 2 bits = bits 2*(j / 4) .. +1 of byte 8 + (j % 4); value - 32.
// Per 128-element half (32 qs bytes) for shift 0, 2, 4, 6 (hmask bit m = 1, 2, 4, ... continuing
// over both halves): 16 elements from qs[0..15] / hmask[0..15], then 16 from qs[16..31] /
// hmask[16..31]; y = d * scale * (((q >> shift) & 3) - (hmask & m ? 0 : 4)).
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

int q3_k_scale(const uint8_t s[12], int j) {
    const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int hi = (s[8 + (j % 4)] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

void dequantize_row_q3_k(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "Q3_K row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockQ3_K blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        int is = 0;
        unsigned m = 1;
        for (int half = 0; half < 2; ++half) {
            const uint8_t* q = blk.qs + 32 * half;
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int part = 0; part < 2; ++part) {
                    const float dl = d * static_cast<float>(q3_k_scale(blk.scales, is++));
                    for (int l = 0; l < 16; ++l) {
                        const int i = 16 * part + l;
                        const int v = ((q[i] >> shift) & 3) - ((blk.hmask[i] & m) ? 0 : 4);
                        *y++ = dl * static_cast<float>(v);
                    }
                }
            }
        }
    }
}

}  // namespace moe::ref
