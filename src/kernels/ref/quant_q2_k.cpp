// Q2_K (256 = 16 sub-blocks of 16, 2-bit, 4-bit scale and min per sub-block): reference
// dequantizer. Per 128-element half (32 qs bytes), for shift 0, 2, 4, 6: 16 elements from
// qs[0..15] then 16 from qs[16..31]; each consumes the next scales byte (low nibble scale, high
// nibble min): y = d * sc * ((q >> shift) & 3) - dmin * m.
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

void dequantize_row_q2_k(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "Q2_K row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockQ2_K blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
        int is = 0;
        for (int half = 0; half < 2; ++half) {
            const uint8_t* q = blk.qs + 32 * half;
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; ++part) {
                    const uint8_t sc = blk.scales[is++];
                    const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
                    for (int l = 0; l < 16; ++l)
                        *y++ = dl * static_cast<float>((q[16 * part + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

}  // namespace moe::ref
