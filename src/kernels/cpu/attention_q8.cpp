// Attention over a Q8_0 KV cache (attention_q8.h). A separate file so the f32/f16 kernels stay
// untouched; the AVX-512 blocked kernel below mirrors attention.cpp's (see its comments for the
// register tiling and the fixed reduction order) with the K / V loads replaced by q8_load16.
#include "kernels/cpu/attention_q8.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/ref/kv_q8.h"

namespace moe::cpu {

namespace {

// Query tokens from which a call dequantizes the cache to f32 once instead (see attention_q8()).
constexpr int64_t kQ8PrefillRows = 32;

// ---------------------------------------------------------------- scalar path
// nh (<= kAttentionHeadsPerItem) query heads sharing one kv head: online softmax over tiles of
// kAttentionTile keys (as attention.cpp's attend_heads). k / v: the kv head's vector in row 0;
// rows kst / vst bytes apart.
void attend_heads_q8(const AttentionSpec& s, const float* q, int64_t nh, const uint8_t* k, const uint8_t* v,
                     int64_t n_keys, float scale, float* out) {
    const int64_t dk = s.head_dim_k, dv = s.head_dim_v;
    const int64_t kst = attention_q8_k_row_bytes(s), vst = attention_q8_v_row_bytes(s);
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
        for (int64_t hh = 0; hh < nh; ++hh) {
            const float* qh = q + hh * dk;
            for (int64_t j = 0; j < n; ++j) {
                const uint8_t* kj = k + (j0 + j) * kst;
                float dot = 0.0f;
                for (int64_t b = 0; b * kKvQ8Block < dk; ++b) {
                    const uint8_t* blk = kj + b * kKvQ8BlockBytes;
                    const float d = kv_q8_scale(blk);
                    const int64_t e = std::min(kKvQ8Block, dk - b * kKvQ8Block);
                    for (int64_t i = 0; i < e; ++i)
                        dot += qh[b * kKvQ8Block + i] * (d * static_cast<float>(static_cast<int8_t>(blk[2 + i])));
                }
                sc[j] = dot * scale;
            }
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
            for (int64_t j = 0; j < n; ++j) {
                const uint8_t* vj = v + (j0 + j) * vst;
                for (int64_t b = 0; b * kKvQ8Block < dv; ++b) {
                    const uint8_t* blk = vj + b * kKvQ8BlockBytes;
                    const float d = kv_q8_scale(blk);
                    const int64_t e = std::min(kKvQ8Block, dv - b * kKvQ8Block);
                    float* ab = acc[hh] + b * kKvQ8Block;
                    for (int64_t i = 0; i < e; ++i)
                        ab[i] += sc[j] * (d * static_cast<float>(static_cast<int8_t>(blk[2 + i])));
                }
            }
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

constexpr int64_t kBlockRows = 8;  // as attention.cpp

// Elements i0 .. i0+15 (i0 a multiple of 16) of a Q8_0 vector as f32: int8 -> f32 times the
// block's scale (exact). Reads 16 bytes inside the vector's padded last block at most.
inline __m512 q8_load16(const uint8_t* vec, int64_t i0) {
    const uint8_t* b = vec + (i0 >> 5) * kKvQ8BlockBytes;
    uint16_t h;
    std::memcpy(&h, b, sizeof h);
    const __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(h)));
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + (i0 & 16)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(x)), d);
}

// exp(x), x <= 0: the same polynomial as attention.cpp's vexp (the bits must match the f32 kernel).
inline __m512 vexp(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(88.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

// NQ (<= 4) query rows x 4 key vectors; lane 4k + i = dot(q_i, k_k) (attention.cpp's dots4x4). The
// tail (d % 16 elements) reads the zero padding of the last block against zero-masked q lanes.
template <int NQ>
inline __m512 dots4x4(const float* const* q, const uint8_t* const* kr, int64_t dvec, __mmask16 tail) {
    __m512 P[4][4];
    for (int i = 0; i < 4; ++i)
        for (int k = 0; k < 4; ++k) P[i][k] = _mm512_setzero_ps();
    for (int64_t i0 = 0; i0 < dvec; i0 += 16) {
        __m512 kv[4];
        for (int k = 0; k < 4; ++k) kv[k] = q8_load16(kr[k], i0);
        for (int i = 0; i < NQ; ++i) {
            const __m512 qv = _mm512_loadu_ps(q[i] + i0);
            for (int k = 0; k < 4; ++k) P[i][k] = _mm512_fmadd_ps(qv, kv[k], P[i][k]);
        }
    }
    if (tail) {
        __m512 kv[4];
        for (int k = 0; k < 4; ++k) kv[k] = _mm512_maskz_mov_ps(tail, q8_load16(kr[k], dvec));
        for (int i = 0; i < NQ; ++i) {
            const __m512 qv = _mm512_maskz_loadu_ps(tail, q[i] + dvec);
            for (int k = 0; k < 4; ++k) P[i][k] = _mm512_fmadd_ps(qv, kv[k], P[i][k]);
        }
    }
    __m512 Y[4];
    for (int i = 0; i < 4; ++i) {
        const __m512 X01 = _mm512_add_ps(_mm512_shuffle_f32x4(P[i][0], P[i][1], 0x44), _mm512_shuffle_f32x4(P[i][0], P[i][1], 0xEE));
        const __m512 X23 = _mm512_add_ps(_mm512_shuffle_f32x4(P[i][2], P[i][3], 0x44), _mm512_shuffle_f32x4(P[i][2], P[i][3], 0xEE));
        Y[i] = _mm512_add_ps(_mm512_shuffle_f32x4(X01, X23, 0x88), _mm512_shuffle_f32x4(X01, X23, 0xDD));
    }
    const __m512 Z01 = _mm512_add_ps(_mm512_shuffle_ps(Y[0], Y[1], _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(Y[0], Y[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 Z23 = _mm512_add_ps(_mm512_shuffle_ps(Y[2], Y[3], _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(Y[2], Y[3], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_ps(_mm512_shuffle_ps(Z01, Z23, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(Z01, Z23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// acc_i[d0 .. d0 + 16 NCH) += w[4 j + i] * v_j for keys j in [jb, je), NQ rows, in key order.
template <int NQ, int NCH>
inline void pv_block(float* const* acc, const float* w, const uint8_t* v, int64_t vstride, int64_t jb, int64_t je,
                     int64_t d0, __mmask16 last) {
    __m512 a[NQ][NCH];
    for (int i = 0; i < NQ; ++i)
        for (int c = 0; c < NCH; ++c) a[i][c] = _mm512_maskz_loadu_ps(c == NCH - 1 ? last : 0xFFFF, acc[i] + d0 + 16 * c);
    for (int64_t j = jb; j < je; ++j) {
        const uint8_t* vr = v + j * vstride;
        __m512 vv[NCH];
        for (int c = 0; c < NCH; ++c) vv[c] = q8_load16(vr, d0 + 16 * c);
        if (last != 0xFFFF) vv[NCH - 1] = _mm512_maskz_mov_ps(last, vv[NCH - 1]);
        for (int i = 0; i < NQ; ++i) {
            const __m512 wj = _mm512_set1_ps(w[4 * j + i]);
            for (int c = 0; c < NCH; ++c) a[i][c] = _mm512_fmadd_ps(wj, vv[c], a[i][c]);
        }
    }
    for (int i = 0; i < NQ; ++i)
        for (int c = 0; c < NCH; ++c) _mm512_mask_storeu_ps(acc[i] + d0 + 16 * c, c == NCH - 1 ? last : 0xFFFF, a[i][c]);
}

template <int NQ>
void pv_rows(float* const* acc, const float* w, const uint8_t* v, int64_t vstride, int64_t jb, int64_t je, int64_t dv) {
    if (je <= jb) return;
    const int64_t dvec = dv & ~int64_t{15};
    const __mmask16 tail = static_cast<__mmask16>((1u << (dv - dvec)) - 1u);
    int64_t d0 = 0;
    for (; d0 + 64 <= dvec; d0 += 64) pv_block<NQ, 4>(acc, w, v, vstride, jb, je, d0, 0xFFFF);
    for (; d0 < dvec; d0 += 16) pv_block<NQ, 1>(acc, w, v, vstride, jb, je, d0, 0xFFFF);
    if (tail) pv_block<NQ, 1>(acc, w, v, vstride, jb, je, dvec, tail);
}

struct QRow {
    const float* q;
    float* out;
    int64_t n;  // keys 0 .. n-1
};

// attention.cpp's attend_block over Q8_0 vectors (K rows ks bytes apart, V rows vs bytes apart).
void attend_block_q8(const AttentionSpec& s, const QRow* rows, int64_t R, const uint8_t* K, const uint8_t* V,
                     float scale) {
    const int64_t dk = s.head_dim_k, dv = s.head_dim_v;
    const int64_t ks = attention_q8_k_row_bytes(s), vs = attention_q8_v_row_bytes(s);
    const int64_t dvec = dk & ~int64_t{15};
    const __mmask16 tail = static_cast<__mmask16>((1u << (dk - dvec)) - 1u);
    alignas(64) float acc[kBlockRows][kAttentionMaxHeadDim];
    alignas(64) float sc[4 * kAttentionTile];
    float m[kBlockRows], l[kBlockRows];
    int64_t nmax = 0;
    for (int64_t r = 0; r < R; ++r) {
        std::fill(acc[r], acc[r] + dv, 0.0f);
        m[r] = -INFINITY;
        l[r] = 0.0f;
        nmax = std::max(nmax, rows[r].n);
    }
    const __m512i lane_key = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    for (int64_t j0 = 0; j0 < nmax; j0 += kAttentionTile) {
        const uint8_t* Kt = K + j0 * ks;
        const uint8_t* Vt = V + j0 * vs;
        for (int64_t g0 = 0; g0 < R; g0 += 4) {
            const int nq = static_cast<int>(std::min<int64_t>(4, R - g0));
            int64_t nv[4] = {0, 0, 0, 0}, nt = 0, nc = kAttentionTile;
            for (int i = 0; i < nq; ++i) {
                nv[i] = std::clamp<int64_t>(rows[g0 + i].n - j0, 0, kAttentionTile);
                nt = std::max(nt, nv[i]);
                nc = std::min(nc, nv[i]);
            }
            if (nt == 0) continue;
            const float* q[4];
            float* ac[4];
            for (int i = 0; i < 4; ++i) {
                q[i] = rows[g0 + std::min(i, nq - 1)].q;
                ac[i] = acc[g0 + std::min(i, nq - 1)];
            }
            const __m512 vscale = _mm512_set1_ps(scale);
            for (int64_t jb = 0; jb < nt; jb += 4) {
                const uint8_t* kr[4];
                for (int k = 0; k < 4; ++k) kr[k] = Kt + std::min(jb + k, nt - 1) * ks;
                __m512 d;
                switch (nq) {
                    case 1: d = dots4x4<1>(q, kr, dvec, tail); break;
                    case 2: d = dots4x4<2>(q, kr, dvec, tail); break;
                    case 3: d = dots4x4<3>(q, kr, dvec, tail); break;
                    default: d = dots4x4<4>(q, kr, dvec, tail); break;
                }
                _mm512_store_ps(sc + 4 * jb, _mm512_mul_ps(d, vscale));
            }
            const __m512i nvv = _mm512_broadcast_i32x4(_mm_setr_epi32(static_cast<int>(nv[0]), static_cast<int>(nv[1]),
                                                                       static_cast<int>(nv[2]), static_cast<int>(nv[3])));
            __m512 mx = _mm512_set1_ps(-INFINITY);
            for (int64_t jb = 0; jb < nt; jb += 4) {
                const __mmask16 valid = _mm512_cmplt_epi32_mask(_mm512_add_epi32(lane_key, _mm512_set1_epi32(static_cast<int>(jb))), nvv);
                mx = _mm512_mask_max_ps(mx, valid, mx, _mm512_load_ps(sc + 4 * jb));
            }
            mx = _mm512_max_ps(mx, _mm512_shuffle_f32x4(mx, mx, 0x4E));
            mx = _mm512_max_ps(mx, _mm512_shuffle_f32x4(mx, mx, 0xB1));
            alignas(16) float mt[4];
            _mm_store_ps(mt, _mm512_castps512_ps128(mx));
            alignas(16) float mn[4] = {0, 0, 0, 0};
            for (int i = 0; i < nq; ++i) {
                const int64_t r = g0 + i;
                if (nv[i] == 0) continue;
                const float m_new = std::fmax(m[r], mt[i]);
                const float alpha = std::exp(m[r] - m_new);
                if (alpha != 1.0f) {
                    l[r] *= alpha;
                    const __m512 va = _mm512_set1_ps(alpha);
                    int64_t i0 = 0;
                    for (; i0 + 16 <= dv; i0 += 16) _mm512_storeu_ps(acc[r] + i0, _mm512_mul_ps(_mm512_loadu_ps(acc[r] + i0), va));
                    for (; i0 < dv; ++i0) acc[r][i0] *= alpha;
                }
                m[r] = m_new;
                mn[i] = m_new;
            }
            const __m512 vm = _mm512_broadcast_f32x4(_mm_load_ps(mn));
            for (int64_t jb = 0; jb < nt; jb += 4)
                _mm512_store_ps(sc + 4 * jb, vexp(_mm512_sub_ps(_mm512_load_ps(sc + 4 * jb), vm)));
            {
                alignas(64) float l4[16] = {};
                for (int i = 0; i < nq; ++i) l4[i] = l[g0 + i];
                __m512 lv = _mm512_load_ps(l4);
                for (int64_t j = 0; j < nt; ++j) {
                    const __mmask16 valid = _mm512_cmplt_epi32_mask(_mm512_set1_epi32(static_cast<int>(j)), nvv) & 0xF;
                    lv = _mm512_mask_add_ps(lv, valid, lv, _mm512_castps128_ps512(_mm_load_ps(sc + 4 * j)));
                }
                _mm512_store_ps(l4, lv);
                for (int i = 0; i < nq; ++i) l[g0 + i] = l4[i];
            }
            switch (nq) {
                case 1: pv_rows<1>(ac, sc, Vt, vs, 0, nc, dv); break;
                case 2: pv_rows<2>(ac, sc, Vt, vs, 0, nc, dv); break;
                case 3: pv_rows<3>(ac, sc, Vt, vs, 0, nc, dv); break;
                default: pv_rows<4>(ac, sc, Vt, vs, 0, nc, dv); break;
            }
            for (int i = 0; i < nq; ++i)
                if (nv[i] > nc) pv_rows<1>(&ac[i], sc + i, Vt, vs, nc, nv[i], dv);
        }
    }
    for (int64_t r = 0; r < R; ++r) {
        const float inv = 1.0f / l[r];
        for (int64_t i = 0; i < dv; ++i) rows[r].out[i] = acc[r][i] * inv;
    }
}

// Rows [r0, r1) of n_head_kv vectors of d elements each -> f32 [row, head, d] (out at row 0).
void dequant_rows(const uint8_t* src, int64_t row_bytes, int64_t n_head_kv, int64_t d, int64_t r0, int64_t r1,
                  float* out) {
    const int64_t vb = kv_q8_vec_bytes(d), dvec = d & ~int64_t{15};
    const __mmask16 tail = static_cast<__mmask16>((1u << (d - dvec)) - 1u);
    for (int64_t r = r0; r < r1; ++r)
        for (int64_t g = 0; g < n_head_kv; ++g) {
            const uint8_t* v = src + r * row_bytes + g * vb;
            float* o = out + (r * n_head_kv + g) * d;
            for (int64_t i0 = 0; i0 < dvec; i0 += 16) _mm512_storeu_ps(o + i0, q8_load16(v, i0));
            if (tail) _mm512_mask_storeu_ps(o + dvec, tail, q8_load16(v, dvec));
        }
}

}  // namespace
MOE_DENSE_AVX512_END
#endif

void attention_q8(const AttentionSpec& s, const AttentionArgs& a, ThreadPool* pool, kernels::Isa isa) {
    attention_check(s, a);
    MOE_ASSERT(s.kv_type == DType::Q8_0, "attention_q8 on a ", dtype_name(s.kv_type), " cache");
    MOE_ASSERT(s.head_dim_v <= kAttentionMaxHeadDim, "attention head_dim_v ", s.head_dim_v, " > ", kAttentionMaxHeadDim);
    const float scale = attention_scale(s);
    const int64_t group = s.n_head / s.n_head_kv;
    const int64_t kvec = kv_q8_vec_bytes(s.head_dim_k), vvec = kv_q8_vec_bytes(s.head_dim_v);
    const auto* K = static_cast<const uint8_t*>(a.k);
    const auto* V = static_cast<const uint8_t*>(a.v);
    const int64_t chunks = (group + kAttentionHeadsPerItem - 1) / kAttentionHeadsPerItem;
#if MOE_DENSE_HAS_AVX512
    // Prefill (many query rows per kv head): dequantize rows 0..n_kv-1 once into f32 scratch and run
    // the f32 kernel, whose loads are plain (the direct kernel re-converts each K/V tile for every
    // group of 4 rows: ~1.7x the f16 kernel's uops). Same bits as the direct kernel (which equals
    // the f32 kernel over the dequantized values, tested), so prefill still equals decode. Scratch:
    // n_kv x n_head_kv x (dk + dv) floats, allocated per call (one call per layer and sequence).
    const bool mla_like = s.v_row_stride > 0;
    if (dense_use_avx512(isa) && a.n_tokens >= kQ8PrefillRows &&
        (!mla_like || (s.n_head_kv == 1 && s.v_row_stride == s.head_dim_k))) {
        const int64_t nk = a.n_kv * s.n_head_kv;
        std::vector<float> kf(static_cast<size_t>(nk * s.head_dim_k)), vf(mla_like ? 0 : static_cast<size_t>(nk * s.head_dim_v));
        auto deq = [&](int64_t r0, int64_t r1, int) {
            dequant_rows(K, attention_q8_k_row_bytes(s), s.n_head_kv, s.head_dim_k, r0, r1, kf.data());
            if (!mla_like) dequant_rows(V, attention_q8_v_row_bytes(s), s.n_head_kv, s.head_dim_v, r0, r1, vf.data());
        };
        if (!pool || pool->size() == 1) deq(0, a.n_kv, 0);
        else pool->parallel_for(a.n_kv, 64, deq);
        AttentionSpec fs = s;
        fs.kv_type = DType::F32;
        AttentionArgs fa = a;
        fa.k = kf.data();
        fa.v = mla_like ? kf.data() : vf.data();
        attention(fs, fa, pool, isa);
        return;
    }
    if (dense_use_avx512(isa)) {
        // Work item = (block of tokens, kv head, chunk of its query heads), at most kBlockRows rows.
        const int64_t tb = std::max<int64_t>(1, kBlockRows / std::min(group, kAttentionHeadsPerItem));
        const int64_t n_blocks = (a.n_tokens + tb - 1) / tb;
        auto block = [&](int64_t b, int64_t e, int) {
            for (int64_t it = b; it < e; ++it) {
                const int64_t t0 = (it / (s.n_head_kv * chunks)) * tb, g = (it / chunks) % s.n_head_kv, c = it % chunks;
                const int64_t h0 = g * group + c * kAttentionHeadsPerItem;
                const int64_t nh = std::min(kAttentionHeadsPerItem, (g + 1) * group - h0);
                QRow rows[kBlockRows];
                int64_t R = 0;
                for (int64_t t = t0; t < std::min(a.n_tokens, t0 + tb); ++t)
                    for (int64_t h = h0; h < h0 + nh; ++h)
                        rows[R++] = QRow{a.q + (t * s.n_head + h) * s.head_dim_k, a.out + (t * s.n_head + h) * s.head_dim_v,
                                         int64_t{a.pos[t]} + 1};
                attend_block_q8(s, rows, R, K + g * kvec, V + g * vvec, scale);
            }
        };
        const int64_t n_items = n_blocks * s.n_head_kv * chunks;
        if (!pool || pool->size() == 1) block(0, n_items, 0);
        else pool->parallel_for(n_items, 1, block);
        return;
    }
#endif
    (void)isa;
    auto item = [&](int64_t b, int64_t e, int) {
        for (int64_t it = b; it < e; ++it) {
            const int64_t t = it / (s.n_head_kv * chunks), g = (it / chunks) % s.n_head_kv, c = it % chunks;
            const int64_t h0 = g * group + c * kAttentionHeadsPerItem;
            const int64_t nh = std::min(kAttentionHeadsPerItem, (g + 1) * group - h0);
            attend_heads_q8(s, a.q + (t * s.n_head + h0) * s.head_dim_k, nh, K + g * kvec, V + g * vvec,
                            int64_t{a.pos[t]} + 1, scale, a.out + (t * s.n_head + h0) * s.head_dim_v);
        }
    };
    const int64_t n_items = a.n_tokens * s.n_head_kv * chunks;
    if (!pool || pool->size() == 1) item(0, n_items, 0);
    else pool->parallel_for(n_items, 1, item);
}

}  // namespace moe::cpu
