// TQ1_0 and TQ2_0 (ternary, 256 values, one fp16 scale): reference dequantizers; y = (t - 1) * d
// for the trit / 2-bit field t in {0, 1, 2}.
//   TQ1_0: qs[0..47] hold 5 trits per byte (tq1_trit), qh[0..3] 4 trits per byte. Order: for the
//          first 32 bytes, trit n = 0..4 of bytes 0..31 (160 values); then trit n of bytes 32..47
//          (80 values); then trit n = 0..3 of qh[0..3] (16 values).
//   TQ2_0: per 32 bytes j (2 of them), for shift l = 0..3: bits 2l..2l+1 of bytes j..j+31.
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

void dequantize_row_tq1_0(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "TQ1_0 row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockTQ1_0 blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int t = 0; t < 5; ++t)
            for (int m = 0; m < 32; ++m) *y++ = static_cast<float>(tq1_trit(blk.qs[m], t) - 1) * d;
        for (int t = 0; t < 5; ++t)
            for (int m = 0; m < 16; ++m) *y++ = static_cast<float>(tq1_trit(blk.qs[32 + m], t) - 1) * d;
        for (int t = 0; t < 4; ++t)
            for (int m = 0; m < 4; ++m) *y++ = static_cast<float>(tq1_trit(blk.qh[m], t) - 1) * d;
    }
}

void dequantize_row_tq2_0(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % kQK == 0, "TQ2_0 row length ", n, " is not a multiple of 256");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / kQK; ++b) {
        BlockTQ2_0 blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int j = 0; j < 64; j += 32)
            for (int l = 0; l < 4; ++l)
                for (int m = 0; m < 32; ++m) *y++ = static_cast<float>(((blk.qs[j + m] >> (2 * l)) & 3) - 1) * d;
    }
}

}  // namespace moe::ref
