#include "kernels/ref/attention.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/kv_q8.h"

namespace moe {

void attention_check(const AttentionSpec& s, const AttentionArgs& a) {
    MOE_ASSERT(s.n_head > 0 && s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0, "attention heads ", s.n_head, "/",
               s.n_head_kv);
    MOE_ASSERT(s.head_dim_k > 0 && s.head_dim_v > 0, "attention head dims ", s.head_dim_k, "/", s.head_dim_v);
    MOE_ASSERT(s.kv_type == DType::F32 || s.kv_type == DType::F16 || s.kv_type == DType::Q8_0, "attention kv type ", dtype_name(s.kv_type));
    MOE_ASSERT(s.window >= 0, "attention window ", s.window);
    MOE_ASSERT(s.ring == 0 || (s.window > 0 && s.ring >= s.window), "attention ring ", s.ring, " with window ", s.window);
    MOE_ASSERT(a.n_tokens >= 0 && a.n_kv >= 0, "attention sizes ", a.n_tokens, "/", a.n_kv);
    for (int64_t t = 0; t < a.n_tokens; ++t)
        MOE_ASSERT(a.pos[t] >= 0 && a.pos[t] < a.n_kv, "attention query ", t, " at position ", a.pos[t],
                   " but the cache holds ", a.n_kv, " rows");
}

namespace ref {

static inline float load_kv(DType type, const void* base, int64_t idx) {
    return type == DType::F32 ? static_cast<const float*>(base)[idx]
                              : fp16_to_fp32(static_cast<const uint16_t*>(base)[idx]);
}

// Element i of the K / V vector of (cache row j, kv head g), any cache type (Q8_0: kv_q8.h).
static inline float k_elem(const AttentionSpec& s, const void* k, int64_t j, int64_t g, int64_t i) {
    if (s.kv_type == DType::Q8_0)
        return kv_q8_at(static_cast<const uint8_t*>(k) + j * attention_q8_k_row_bytes(s) + g * kv_q8_vec_bytes(s.head_dim_k), i);
    return load_kv(s.kv_type, k, (j * s.n_head_kv + g) * s.head_dim_k + i);
}
static inline float v_elem(const AttentionSpec& s, const void* v, int64_t j, int64_t g, int64_t i) {
    if (s.kv_type == DType::Q8_0)
        return kv_q8_at(static_cast<const uint8_t*>(v) + j * attention_q8_v_row_bytes(s) + g * kv_q8_vec_bytes(s.head_dim_v), i);
    return load_kv(s.kv_type, v, j * attention_v_stride(s) + g * s.head_dim_v + i);
}

void attention(const AttentionSpec& s, const AttentionArgs& a) {
    attention_check(s, a);
    const float scale = attention_scale(s);
    const int64_t group = s.n_head / s.n_head_kv;
    const int64_t dk = s.head_dim_k, dv = s.head_dim_v;
    std::vector<float> w;
    std::vector<float> acc(static_cast<size_t>(dv));
    for (int64_t t = 0; t < a.n_tokens; ++t) {
        const int64_t n = static_cast<int64_t>(a.pos[t]) + 1, j0 = attention_first_key(s, a.pos[t]);
        const int64_t r0 = attention_first_row(s, a.pos[t]) - j0;  // cache row of key j: r0 + j
        w.assign(static_cast<size_t>(n), 0.0f);
        for (int64_t h = 0; h < s.n_head; ++h) {
            const int64_t g = h / group;
            const float* q = a.q + (t * s.n_head + h) * dk;
            float mx = -INFINITY;
            for (int64_t j = j0; j < n; ++j) {
                float dot = 0.0f;
                for (int64_t i = 0; i < dk; ++i) dot += q[i] * k_elem(s, a.k, r0 + j, g, i);
                w[static_cast<size_t>(j)] = dot * scale;
                mx = std::fmax(mx, w[static_cast<size_t>(j)]);
            }
            if (a.sinks) mx = std::fmax(mx, a.sinks[h]);
            float sum = 0.0f;
            for (int64_t j = j0; j < n; ++j) {
                w[static_cast<size_t>(j)] = std::exp(w[static_cast<size_t>(j)] - mx);
                sum += w[static_cast<size_t>(j)];
            }
            if (a.sinks) sum += std::exp(a.sinks[h] - mx);
            for (auto& x : acc) x = 0.0f;
            for (int64_t j = j0; j < n; ++j) {
                const float wj = w[static_cast<size_t>(j)];
                for (int64_t i = 0; i < dv; ++i) acc[static_cast<size_t>(i)] += wj * v_elem(s, a.v, r0 + j, g, i);
            }
            float* o = a.out + (t * s.n_head + h) * dv;
            const float inv = 1.0f / sum;
            for (int64_t i = 0; i < dv; ++i) o[i] = acc[static_cast<size_t>(i)] * inv;
        }
    }
}

}  // namespace ref
}  // namespace moe
