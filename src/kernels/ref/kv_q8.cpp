#include "kernels/ref/kv_q8.h"

#include <algorithm>

#include "kernels/ref/quantize_q8_0.h"

namespace moe {

void kv_q8_quantize(const float* x, int64_t d, uint8_t* out) {
    const int64_t full = d / kKvQ8Block * kKvQ8Block;
    if (full > 0) ref::quantize_row_q8_0(x, out, full);
    if (full < d) {
        float tail[kKvQ8Block] = {};
        std::copy(x + full, x + d, tail);
        ref::quantize_row_q8_0(tail, out + full / kKvQ8Block * kKvQ8BlockBytes, kKvQ8Block);
    }
}

void kv_q8_dequantize(const uint8_t* vec, int64_t d, float* out) {
    for (int64_t i = 0; i < d; ++i) out[i] = kv_q8_at(vec, i);
}

}  // namespace moe
