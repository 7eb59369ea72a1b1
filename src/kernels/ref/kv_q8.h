#pragma once
// Q8_0 KV cache vectors (`--kv-type q8_0`): each (cache row, kv head) vector of d elements is stored as
// ceil(d / 32) Q8_0 blocks (quantize_q8_0.h: fp16 scale + 32 int8, 34 bytes), the last block
// zero-padded, so every head's vector starts on a block boundary and any head dim works. Element i
// of a vector is fp16(scale of block i / 32) * qs[i % 32], exact in f32 (11-bit x 8-bit
// significands), so every kernel that reads the cache sees the same values as this header's
// q8 dequantization. Quantization is ggml's quantize_row_q8_0_ref (bit for bit).
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "kernels/ref/attention.h"

namespace moe {

constexpr int64_t kKvQ8Block = 32;
constexpr int64_t kKvQ8BlockBytes = 34;

// Bytes of one vector of d elements.
inline int64_t kv_q8_vec_bytes(int64_t d) { return (d + kKvQ8Block - 1) / kKvQ8Block * kKvQ8BlockBytes; }

// x: d floats -> out: kv_q8_vec_bytes(d) bytes (tail block padded with zeros before quantizing).
void kv_q8_quantize(const float* x, int64_t d, uint8_t* out);
// out: d floats from one vector.
void kv_q8_dequantize(const uint8_t* vec, int64_t d, float* out);

inline float kv_q8_scale(const uint8_t* block) {
    uint16_t h;
    std::memcpy(&h, block, sizeof h);
    return fp16_to_fp32(h);
}
inline float kv_q8_at(const uint8_t* vec, int64_t i) {
    const uint8_t* b = vec + (i / kKvQ8Block) * kKvQ8BlockBytes;
    return kv_q8_scale(b) * static_cast<float>(static_cast<int8_t>(b[2 + i % kKvQ8Block]));
}

// Q8_0 attention cache addressing (AttentionSpec with kv_type Q8_0): K vector of (row j, kv head g)
// at byte (j * n_head_kv + g) * kv_q8_vec_bytes(head_dim_k); V vector at j * v_row_bytes +
// g * kv_q8_vec_bytes(head_dim_v), where v_row_stride (elements, MLA) rounds up to whole blocks: the
// K vector when it equals head_dim_k (V = the first head_dim_v elements of each K row).
inline int64_t attention_q8_k_row_bytes(const AttentionSpec& s) { return s.n_head_kv * kv_q8_vec_bytes(s.head_dim_k); }
inline int64_t attention_q8_v_row_bytes(const AttentionSpec& s) {
    return s.v_row_stride > 0 ? kv_q8_vec_bytes(s.v_row_stride) : s.n_head_kv * kv_q8_vec_bytes(s.head_dim_v);
}

}  // namespace moe
