// Q5_0 (32 x 5-bit, offset 16) and Q5_1 (32 x 5-bit with min): reference dequantizers.
// The 5th bit of element j (j < 16, low nibble of qs[j]) is bit j of qh (little-endian u32); of
// element j + 16 (high nibble of qs[j]) bit j + 16.
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

namespace {
template <typename Block>
void unpack5(const Block& blk, int q[32]) {
    const uint32_t qh = static_cast<uint32_t>(blk.qh[0]) | static_cast<uint32_t>(blk.qh[1]) << 8 |
                        static_cast<uint32_t>(blk.qh[2]) << 16 | static_cast<uint32_t>(blk.qh[3]) << 24;
    for (int j = 0; j < 16; ++j) {
        q[j] = (blk.qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
        q[j + 16] = (blk.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    }
}
}  // namespace

void dequantize_row_q5_0(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % 32 == 0, "Q5_0 row length ", n, " is not a multiple of 32");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / 32; ++b, y += 32) {
        BlockQ5_0 blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        int q[32];
        unpack5(blk, q);
        for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q[j] - 16) * d;
    }
}

void dequantize_row_q5_1(const void* x, float* y, int64_t n) {
    MOE_ASSERT(n % 32 == 0, "Q5_1 row length ", n, " is not a multiple of 32");
    const auto* in = static_cast<const unsigned char*>(x);
    for (int64_t b = 0; b < n / 32; ++b, y += 32) {
        BlockQ5_1 blk;
        std::memcpy(&blk, in + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d), m = fp16_to_fp32(blk.m);
        int q[32];
        unpack5(blk, q);
        for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q[j]) * d + m;
    }
}

}  // namespace moe::ref
