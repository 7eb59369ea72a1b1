#pragma once
// Fast Q8_0 KV cache quantizer (KvCache::write with --kv-type q8_0): the same bits as
// kv_q8_quantize (kernels/ref/kv_q8.h, ggml's quantize_row_q8_0_ref) on every path. The AVX-512 path
// does one 32-element block per step: max |x|, d = max / 127, q = round-half-away(x * (1 / d)) by
// truncation plus a correction, exact like std::round (tested against the reference, ties included).
#include <cstdint>

#include "kernels/cpu/dense_isa.h"

namespace moe::cpu {

// n vectors of d floats (x: vector i at x + i * d) -> n kv_q8 vectors (out: vector i at out + i * out_stride bytes).
void kv_q8_quantize_rows(const float* x, int64_t n, int64_t d, uint8_t* out, int64_t out_stride,
                         kernels::Isa isa = kernels::best_isa());

}  // namespace moe::cpu
