#pragma once
// Causal multi-head attention with GQA/MQA over one sequence's KV cache (one layer).
// For query token t at position pos[t] and head h (kv head g = h / (n_head / n_head_kv)):
//   s_j = scale * dot(q[t, h, :], K[j, g, :])   for j = first .. pos[t] (first = 0, or the
//                                               sliding window's first key, attention_first_key)
//   w   = softmax(s) in f32 with max subtraction (plus the head's sink logit in the denominator)
//   out[t, h, :] = sum_j w_j * V[j, g, :]
// The result for (t, h) depends only on q[t, h], pos[t] and cache rows 0..pos[t], never on the
// other tokens of the batch: a token gives the same bits in batched prefill and in single-token
// decode (both the reference and the fast kernel keep that property).
#include <cstdint>

#include "core/dtype.h"

namespace moe {

struct AttentionSpec {
    int64_t n_head = 0;
    int64_t n_head_kv = 0;   // divides n_head (1 = MQA, n_head = plain MHA)
    int64_t head_dim_k = 0;  // q and k
    int64_t head_dim_v = 0;
    float scale = 0.0f;      // 0 -> 1 / sqrt(head_dim_k)
    DType kv_type = DType::F32;  // F32, F16 or Q8_0 cache (Q8_0 layout and strides: kernels/ref/kv_q8.h)
    // Elements between consecutive V rows; 0 = n_head_kv * head_dim_v (separate V buffer). MLA sets
    // it to the K row length: V is then the first head_dim_v elements of each K row (latent cache).
    int64_t v_row_stride = 0;
    // Sliding window (gpt-oss SWA layers, llama.cpp LLAMA_SWA_TYPE_STANDARD): > 0 = the query at
    // position p attends to keys max(0, p - window + 1) .. p only; 0 = full causal attention.
    int64_t window = 0;
    // Ring layout of a sliding-window layer's cache (runtime::KvCache): > 0 = position p is stored in
    // row p % ring, and rows 0 .. window - 2 again in rows ring .. ring + window - 2, so the at most
    // `window` keys of any query are contiguous rows from attention_first_row. Needs window > 0.
    int64_t ring = 0;
};
inline int64_t attention_v_stride(const AttentionSpec& s) {
    return s.v_row_stride > 0 ? s.v_row_stride : s.n_head_kv * s.head_dim_v;
}
// First key a query at position pos attends to (0 unless a sliding window cuts it).
inline int64_t attention_first_key(const AttentionSpec& s, int64_t pos) {
    return s.window > 0 && pos - s.window + 1 > 0 ? pos - s.window + 1 : 0;
}
// Rows of a sliding-window layer's ring for forward calls of up to max_batch rows and a context of
// n_ctx (runtime::KvCache; the memory plan counts the same): R = window + max_batch - 1, so a call's
// new rows never overwrite a key its first query still reads; 0 (keep every position) when R plus the
// window - 1 mirror rows would not be fewer than n_ctx. swa_stored_rows: what the layer allocates.
inline int64_t swa_ring_rows(int64_t window, int64_t max_batch, int64_t n_ctx) {
    if (window <= 0 || max_batch <= 0) return 0;
    const int64_t ring = window + max_batch - 1;
    return ring + window - 1 < n_ctx ? ring : 0;
}
inline int64_t swa_stored_rows(int64_t window, int64_t max_batch, int64_t n_ctx) {
    const int64_t ring = swa_ring_rows(window, max_batch, n_ctx);
    return ring > 0 ? ring + window - 1 : n_ctx;
}
// Cache row holding that first key; keys first .. pos are the rows from there on (ring or not).
inline int64_t attention_first_row(const AttentionSpec& s, int64_t pos) {
    const int64_t j0 = attention_first_key(s, pos);
    return s.ring > 0 ? j0 % s.ring : j0;
}

struct AttentionArgs {
    const float* q = nullptr;   // [n_tokens, n_head, head_dim_k]
    const void* k = nullptr;    // [n_kv, n_head_kv, head_dim_k] of kv_type (KV cache layout)
    const void* v = nullptr;    // [n_kv, n_head_kv, head_dim_v] of kv_type (row stride: attention_v_stride)
    const int32_t* pos = nullptr;  // [n_tokens]: query t attends to cache rows 0 .. pos[t]
    int64_t n_tokens = 0;
    int64_t n_kv = 0;           // valid cache positions; every pos[t] < n_kv
    float* out = nullptr;       // [n_tokens, n_head, head_dim_v]
    // Attention sinks (gpt-oss attn_sinks [n_head]) or null: head h's softmax denominator gets
    // exp(sinks[h] - max) as if a key with logit sinks[h] and a zero value were present.
    const float* sinks = nullptr;
};

// Internal invariants of spec/args (shapes, kv_type, positions); aborts with a message.
void attention_check(const AttentionSpec& spec, const AttentionArgs& a);
inline float attention_scale(const AttentionSpec& spec) {
    return spec.scale != 0.0f ? spec.scale : 1.0f / __builtin_sqrtf(static_cast<float>(spec.head_dim_k));
}

namespace ref {
// Scalar oracle: two passes (scores, then weighted sum), f32 arithmetic, sequential sums.
void attention(const AttentionSpec& spec, const AttentionArgs& a);
}  // namespace ref

}  // namespace moe
