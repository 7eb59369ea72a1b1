#include "kernels/cpu/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"

namespace moe::cpu {

namespace {

// ISA-specific tile primitives. `k`/`v` point at row 0 of the tile for this kv head; consecutive
// keys are `stride` elements apart (n_head_kv * head_dim).
//   scores: s[j] = scale * dot(q, k_j), j < n
//   accum:  acc[i] += sum_j w[j] * v_j[i]   (j in increasing order)
struct TileOps {
    void (*scores)(const float* q, const void* k, int64_t stride, int64_t n, int64_t d, float scale, float* s);
    void (*accum)(float* acc, const float* w, const void* v, int64_t stride, int64_t n, int64_t d);
};

template <typename T>
inline float to_f32(T x) {
    if constexpr (sizeof(T) == 2) return fp16_to_fp32(x); else return x;
}

template <typename T>
void scores_scalar(const float* q, const void* kp, int64_t stride, int64_t n, int64_t d, float scale, float* s) {
    const T* k = static_cast<const T*>(kp);
    for (int64_t j = 0; j < n; ++j) {
        const T* kj = k + j * stride;
        float dot = 0.0f;
        for (int64_t i = 0; i < d; ++i) dot += q[i] * to_f32(kj[i]);
        s[j] = dot * scale;
    }
}

template <typename T>
void accum_scalar(float* acc, const float* w, const void* vp, int64_t stride, int64_t n, int64_t d) {
    const T* v = static_cast<const T*>(vp);
    for (int64_t j = 0; j < n; ++j) {
        const T* vj = v + j * stride;
        for (int64_t i = 0; i < d; ++i) acc[i] += w[j] * to_f32(vj[i]);
    }
}

// nh (<= kAttentionHeadsPerItem) consecutive query heads of one token that share a kv head:
// online softmax over tiles of keys 0..n_keys-1. The heads take turns on each tile, so its K/V rows
// are read from memory once and from cache by the other heads (GQA); each head's own sequence of
// operations is the same as if it were processed alone.
void attend_heads(const TileOps& ops, const AttentionSpec& s, const float* q, int64_t nh, const char* k,
                  const char* v, size_t elem, int64_t n_keys, float scale, float* out) {
    const int64_t dk = s.head_dim_k, dv = s.head_dim_v;
    const int64_t k_stride = s.n_head_kv * dk, v_stride = s.n_head_kv * dv;
    alignas(64) float acc[kAttentionHeadsPerItem][kAttentionMaxHeadDim];
    alignas(64) float sc[kAttentionTile];
    float m[kAttentionHeadsPerItem], l[kAttentionHeadsPerItem];
    for (int64_t hh = 0; hh < nh; ++hh) {
        std::fill(acc[hh], acc[hh] + dv, 0.0f);
        m[hh] = -INFINITY;
        l[hh] = 0.0f;
    }
    for (int64_t j0 = 0; j0 < n_keys; j0 += kAttentionTile) {
        const int64_t n = std::min(kAttentionTile, n_keys - j0);
        const char* kt = k + static_cast<size_t>(j0 * k_stride) * elem;
        const char* vt = v + static_cast<size_t>(j0 * v_stride) * elem;
        for (int64_t hh = 0; hh < nh; ++hh) {
            ops.scores(q + hh * dk, kt, k_stride, n, dk, scale, sc);
            float mt = sc[0];
            for (int64_t j = 1; j < n; ++j) mt = std::fmax(mt, sc[j]);
            const float m_new = std::fmax(m[hh], mt);
            const float alpha = std::exp(m[hh] - m_new);  // 0 on the first tile (m = -inf)
            if (alpha != 1.0f) {
                l[hh] *= alpha;
                for (int64_t i = 0; i < dv; ++i) acc[hh][i] *= alpha;
            }
            for (int64_t j = 0; j < n; ++j) {
                sc[j] = std::exp(sc[j] - m_new);
                l[hh] += sc[j];
            }
            ops.accum(acc[hh], sc, vt, v_stride, n, dv);
            m[hh] = m_new;
        }
    }
    for (int64_t hh = 0; hh < nh; ++hh) {
        const float inv = 1.0f / l[hh];
        for (int64_t i = 0; i < dv; ++i) out[hh * dv + i] = acc[hh][i] * inv;
    }
}

}  // namespace

#if MOE_DENSE_HAS_AVX512
MOE_DENSE_AVX512_BEGIN
namespace {

template <typename T>
inline __m512 load16(const T* p) {
    if constexpr (sizeof(T) == 2)
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    else
        return _mm512_loadu_ps(p);
}

template <typename T>
inline __m512 load16_masked(const T* p, __mmask16 m) {
    if constexpr (sizeof(T) == 2) {
        // (a masked 16-bit load needs AVX512BW; copy the < 16 tail elements instead)
        alignas(32) uint16_t tmp[16] = {};
        for (int i = 0; i < 16; ++i)
            if (m & (1u << i)) tmp[i] = p[i];
        return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(tmp)));
    } else
        return _mm512_maskz_loadu_ps(m, p);
}

template <typename T>
void scores_avx512(const float* q, const void* kp, int64_t stride, int64_t n, int64_t d, float scale, float* s) {
    const T* k = static_cast<const T*>(kp);
    const int64_t dvec = d & ~int64_t{15};
    const __mmask16 tail = static_cast<__mmask16>((1u << (d - dvec)) - 1u);
    for (int64_t j = 0; j < n; ++j) {
        const T* kj = k + j * stride;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i = 0; i < dvec; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), load16(kj + i), acc);
        if (tail)
            acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, q + dvec), load16_masked(kj + dvec, tail), acc);
        s[j] = _mm512_reduce_add_ps(acc) * scale;
    }
}

template <typename T>
void accum_avx512(float* acc, const float* w, const void* vp, int64_t stride, int64_t n, int64_t d) {
    const T* v = static_cast<const T*>(vp);
    const int64_t dvec = d & ~int64_t{15};
    const __mmask16 tail = static_cast<__mmask16>((1u << (d - dvec)) - 1u);
    // Blocks of 64 output lanes stay in registers across the whole tile of keys.
    int64_t i0 = 0;
    for (; i0 + 64 <= dvec; i0 += 64) {
        __m512 a0 = _mm512_loadu_ps(acc + i0), a1 = _mm512_loadu_ps(acc + i0 + 16);
        __m512 a2 = _mm512_loadu_ps(acc + i0 + 32), a3 = _mm512_loadu_ps(acc + i0 + 48);
        for (int64_t j = 0; j < n; ++j) {
            const T* vj = v + j * stride + i0;
            const __m512 wj = _mm512_set1_ps(w[j]);
            a0 = _mm512_fmadd_ps(wj, load16(vj), a0);
            a1 = _mm512_fmadd_ps(wj, load16(vj + 16), a1);
            a2 = _mm512_fmadd_ps(wj, load16(vj + 32), a2);
            a3 = _mm512_fmadd_ps(wj, load16(vj + 48), a3);
        }
        _mm512_storeu_ps(acc + i0, a0);
        _mm512_storeu_ps(acc + i0 + 16, a1);
        _mm512_storeu_ps(acc + i0 + 32, a2);
        _mm512_storeu_ps(acc + i0 + 48, a3);
    }
    for (; i0 < dvec; i0 += 16) {
        __m512 a = _mm512_loadu_ps(acc + i0);
        for (int64_t j = 0; j < n; ++j) a = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), load16(v + j * stride + i0), a);
        _mm512_storeu_ps(acc + i0, a);
    }
    if (tail) {
        __m512 a = _mm512_maskz_loadu_ps(tail, acc + dvec);
        for (int64_t j = 0; j < n; ++j)
            a = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), load16_masked(v + j * stride + dvec, tail), a);
        _mm512_mask_storeu_ps(acc + dvec, tail, a);
    }
}

}  // namespace
MOE_DENSE_AVX512_END
#endif

void attention(const AttentionSpec& s, const AttentionArgs& a, ThreadPool* pool, kernels::Isa isa) {
    attention_check(s, a);
    MOE_ASSERT(s.head_dim_v <= kAttentionMaxHeadDim, "attention head_dim_v ", s.head_dim_v, " > ",
               kAttentionMaxHeadDim);
    const bool f16 = s.kv_type == DType::F16;
    TileOps ops{f16 ? scores_scalar<uint16_t> : scores_scalar<float>,
                f16 ? accum_scalar<uint16_t> : accum_scalar<float>};
#if MOE_DENSE_HAS_AVX512
    if (dense_use_avx512(isa))
        ops = TileOps{f16 ? scores_avx512<uint16_t> : scores_avx512<float>,
                      f16 ? accum_avx512<uint16_t> : accum_avx512<float>};
#endif
    const float scale = attention_scale(s);
    const int64_t group = s.n_head / s.n_head_kv;
    const size_t elem = f16 ? 2 : 4;
    // Work item = (token, kv head, chunk of up to kAttentionHeadsPerItem of its query heads).
    const int64_t chunks = (group + kAttentionHeadsPerItem - 1) / kAttentionHeadsPerItem;
    auto item = [&](int64_t b, int64_t e, int) {
        for (int64_t it = b; it < e; ++it) {
            const int64_t t = it / (s.n_head_kv * chunks), g = (it / chunks) % s.n_head_kv, c = it % chunks;
            const int64_t h0 = g * group + c * kAttentionHeadsPerItem;
            const int64_t nh = std::min(kAttentionHeadsPerItem, (g + 1) * group - h0);
            const char* k = static_cast<const char*>(a.k) + static_cast<size_t>(g * s.head_dim_k) * elem;
            const char* v = static_cast<const char*>(a.v) + static_cast<size_t>(g * s.head_dim_v) * elem;
            attend_heads(ops, s, a.q + (t * s.n_head + h0) * s.head_dim_k, nh, k, v, elem, int64_t{a.pos[t]} + 1,
                         scale, a.out + (t * s.n_head + h0) * s.head_dim_v);
        }
    };
    const int64_t n_items = a.n_tokens * s.n_head_kv * chunks;
    if (!pool || pool->size() == 1)
        item(0, n_items, 0);
    else
        pool->parallel_for(n_items, 1, item);
}

}  // namespace moe::cpu
