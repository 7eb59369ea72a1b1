#include "kernels/cpu/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/ref/kv_q8.h"

namespace moe::cpu {

namespace {

// Scalar tile primitives per cache type. `k`/`v` point at this kv head's vector in the tile's first
// row; consecutive keys are `row` bytes apart (f32 / f16: n_head_kv * head_dim elements; q8_0:
// kernels/ref/kv_q8.h).
//   scores: s[j] = scale * dot(q, k_j), j < n
//   accum:  acc[i] += sum_j w[j] * v_j[i]   (j in increasing order)
struct TileOps {
    void (*scores)(const float* q, const char* k, int64_t row, int64_t n, int64_t d, float scale, float* s);
    void (*accum)(float* acc, const float* w, const char* v, int64_t row, int64_t n, int64_t d);
};

template <typename T>
inline float to_f32(T x) {
    if constexpr (sizeof(T) == 2) return fp16_to_fp32(x); else return x;
}

template <typename T>
void scores_scalar(const float* q, const char* k, int64_t row, int64_t n, int64_t d, float scale, float* s) {
    for (int64_t j = 0; j < n; ++j) {
        const T* kj = reinterpret_cast<const T*>(k + j * row);
        float dot = 0.0f;
        for (int64_t i = 0; i < d; ++i) dot += q[i] * to_f32(kj[i]);
        s[j] = dot * scale;
    }
}

template <typename T>
void accum_scalar(float* acc, const float* w, const char* v, int64_t row, int64_t n, int64_t d) {
    for (int64_t j = 0; j < n; ++j) {
        const T* vj = reinterpret_cast<const T*>(v + j * row);
        for (int64_t i = 0; i < d; ++i) acc[i] += w[j] * to_f32(vj[i]);
    }
}

// AVX2 + FMA twins of the above for CPUs without the AVX-512 tile path (f32 and, with F16C, f16
// caches): the scalar dot's one serial chain of d adds was 16 % of OLMoE pp512 on Zen 3. Each key's
// dot is two 8-lane FMA chains over 16-value steps, an 8-lane step, a fixed reduction, then the
// scalar tail, the same sequence whichever of the 4 keys in flight it is (keys are independent
// chains, 4 at a time for the FMA latency). accum: acc[i] = fma(w_j, v_j[i], acc[i]) per element.
#define MOE_ATT_AVX2 __attribute__((target("avx2,fma,f16c")))
template <typename T>
MOE_ATT_AVX2 inline __m256 load8(const T* p) {
    if constexpr (sizeof(T) == 2) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    else return _mm256_loadu_ps(p);
}
MOE_ATT_AVX2 inline float hsum8f(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}
template <typename T, int NK>
MOE_ATT_AVX2 inline void dots_avx2(const float* q, const char* k, int64_t row, int64_t d, float scale, float* s) {
    __m256 a0[NK], a1[NK];
    for (int u = 0; u < NK; ++u) a0[u] = a1[u] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= d; i += 16) {
        const __m256 q0 = _mm256_loadu_ps(q + i), q1 = _mm256_loadu_ps(q + i + 8);
        for (int u = 0; u < NK; ++u) {
            const T* ku = reinterpret_cast<const T*>(k + u * row);
            a0[u] = _mm256_fmadd_ps(q0, load8(ku + i), a0[u]);
            a1[u] = _mm256_fmadd_ps(q1, load8(ku + i + 8), a1[u]);
        }
    }
    if (i + 8 <= d) {
        const __m256 q0 = _mm256_loadu_ps(q + i);
        for (int u = 0; u < NK; ++u) a0[u] = _mm256_fmadd_ps(q0, load8(reinterpret_cast<const T*>(k + u * row) + i), a0[u]);
        i += 8;
    }
    for (int u = 0; u < NK; ++u) {
        const T* ku = reinterpret_cast<const T*>(k + u * row);
        float dot = hsum8f(_mm256_add_ps(a0[u], a1[u]));
        for (int64_t t = i; t < d; ++t) dot += q[t] * to_f32(ku[t]);
        s[u] = dot * scale;
    }
}
template <typename T>
MOE_ATT_AVX2 void scores_avx2(const float* q, const char* k, int64_t row, int64_t n, int64_t d, float scale, float* s) {
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) dots_avx2<T, 4>(q, k + j * row, row, d, scale, s + j);
    for (; j < n; ++j) dots_avx2<T, 1>(q, k + j * row, row, d, scale, s + j);
}
template <typename T>
MOE_ATT_AVX2 void accum_avx2(float* acc, const float* w, const char* v, int64_t row, int64_t n, int64_t d) {
    for (int64_t j = 0; j < n; ++j) {
        const T* vj = reinterpret_cast<const T*>(v + j * row);
        const __m256 wj = _mm256_set1_ps(w[j]);
        int64_t i = 0;
        for (; i + 8 <= d; i += 8) _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wj, load8(vj + i), _mm256_loadu_ps(acc + i)));
        for (; i < d; ++i) acc[i] = std::fma(w[j], to_f32(vj[i]), acc[i]);
    }
}

// Q8_0 vectors: element i = fp16 scale of block i / 32 times its int8 (exact in f32).
void scores_q8(const float* q, const char* k, int64_t row, int64_t n, int64_t d, float scale, float* s) {
    for (int64_t j = 0; j < n; ++j) {
        const auto* kj = reinterpret_cast<const uint8_t*>(k + j * row);
        float dot = 0.0f;
        for (int64_t b = 0; b * kKvQ8Block < d; ++b) {
            const uint8_t* blk = kj + b * kKvQ8BlockBytes;
            const float sc = kv_q8_scale(blk);
            const int64_t e = std::min(kKvQ8Block, d - b * kKvQ8Block);
            for (int64_t i = 0; i < e; ++i)
                dot += q[b * kKvQ8Block + i] * (sc * static_cast<float>(static_cast<int8_t>(blk[2 + i])));
        }
        s[j] = dot * scale;
    }
}

void accum_q8(float* acc, const float* w, const char* v, int64_t row, int64_t n, int64_t d) {
    for (int64_t j = 0; j < n; ++j) {
        const auto* vj = reinterpret_cast<const uint8_t*>(v + j * row);
        for (int64_t b = 0; b * kKvQ8Block < d; ++b) {
            const uint8_t* blk = vj + b * kKvQ8BlockBytes;
            const float sc = kv_q8_scale(blk);
            const int64_t e = std::min(kKvQ8Block, d - b * kKvQ8Block);
            float* ab = acc + b * kKvQ8Block;
            for (int64_t i = 0; i < e; ++i) ab[i] += w[j] * (sc * static_cast<float>(static_cast<int8_t>(blk[2 + i])));
        }
    }
}

// Byte addressing of a cache: row r, kv head g of K at k + r * k_row + g * k_head (V likewise).
struct KvLayout {
    int64_t k_row, v_row, k_head, v_head;
};
KvLayout kv_layout(const AttentionSpec& s) {
    if (s.kv_type == DType::Q8_0)
        return {attention_q8_k_row_bytes(s), attention_q8_v_row_bytes(s), kv_q8_vec_bytes(s.head_dim_k),
                kv_q8_vec_bytes(s.head_dim_v)};
    const int64_t e = s.kv_type == DType::F16 ? 2 : 4;
    return {s.n_head_kv * s.head_dim_k * e, attention_v_stride(s) * e, s.head_dim_k * e, s.head_dim_v * e};
}

// nh (<= kAttentionHeadsPerItem) consecutive query heads of one token that share a kv head:
// online softmax over tiles of keys 0..n_keys-1. The heads take turns on each tile, so its K/V rows
// are read from memory once and from cache by the other heads (GQA); each head's own sequence of
// operations is the same as if it were processed alone.
// Sink logits (sinks[hh], or null) join the denominator at the end: max and sum are rescaled as if
// the sink had been one more key with a zero value.
void attend_heads(const TileOps& ops, const AttentionSpec& s, const KvLayout& L, const float* q, int64_t nh,
                  const char* k, const char* v, int64_t n_keys, float scale, float* out, const float* sinks) {
    const int64_t dk = s.head_dim_k, dv = s.head_dim_v;
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
        const char* kt = k + j0 * L.k_row;
        const char* vt = v + j0 * L.v_row;
        for (int64_t hh = 0; hh < nh; ++hh) {
            ops.scores(q + hh * dk, kt, L.k_row, n, dk, scale, sc);
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
            ops.accum(acc[hh], sc, vt, L.v_row, n, dv);
            m[hh] = m_new;
        }
    }
    for (int64_t hh = 0; hh < nh; ++hh) {
        float inv = 1.0f / l[hh];
        if (sinks) {
            const float mn = std::fmax(m[hh], sinks[hh]), a = std::exp(m[hh] - mn);
            inv = a / (l[hh] * a + std::exp(sinks[hh] - mn));
        }
        for (int64_t i = 0; i < dv; ++i) out[hh * dv + i] = acc[hh][i] * inv;
    }
}

}  // namespace

#if MOE_DENSE_HAS_AVX512
MOE_DENSE_AVX512_BEGIN
namespace {

#include "kernels/cpu/attention_tiles_avx512.inc"  // loads, register tiles, vexp, K/V tile sources

// ---------------------------------------------------------------- blocked kernel (prefill and decode)
// Up to kBlockRows query rows (tokens x heads of one kv head) walk the key tiles together, in groups
// of 4 rows: per group and tile, a 4-query x 4-key register tile of 16-lane partial dot products
// over the head dim (each row's chain: fma per 16 dims in dim order, then a fixed halving tree
// over the 16 lanes -- lanes i + i+8, then + i+4, + i+2, + i+1 -- done for 16 (key, query) pairs
// at once by shuffles), a vector exp (vexp, attention_tiles_avx512.inc) of s - max, the running sum in key order and the
// P.V accumulation as one fma chain per output element in key order, 4 rows x 64 dims in registers
// per key. Every per-row operation sequence depends only on the row (its q, its number of keys
// and the cache), never on which rows share its group or item, so a token gives the same bits in
// prefill and in decode, where the same kernel runs with one token's heads as the rows.
//
// A prefill block holds up to kBlockRows rows (fewer when that would leave too few work items per
// thread): each staged K / V byte then serves up to 128 queries. At 32 rows the re-reads of the
// cache from L3 / DRAM held the staging copies up (docs/PERFORMANCE.md, session 54).
constexpr int64_t kBlockRows = 128;
constexpr int64_t kMinBlockRows = 32;

// Decode work items span up to kMaxSpan kv heads (see attention(); stack: kMaxSpan x 4 rows x
// kAttentionMaxHeadDim floats) when a call has at most kMaxSpanTokens tokens.
constexpr int64_t kMaxSpan = 8;
constexpr int64_t kMaxSpanTokens = 2;

// Online-softmax state of up to kBlockRows query rows that share one kv head (and so its K / V
// tiles); acc: R rows of head_dim_v floats, acc_stride floats apart.
struct RowBlock {
    const QRow* rows;
    int64_t R;
    float* acc;
    int64_t acc_stride;
    float m[kBlockRows], l[kBlockRows];
    int64_t nmax;  // keys of the longest row
    float* row(int64_t r) const { return acc + r * acc_stride; }
};

inline void block_init(RowBlock& b, int64_t dv) {
    b.nmax = 0;
    for (int64_t r = 0; r < b.R; ++r) {
        std::fill(b.row(r), b.row(r) + dv, 0.0f);
        b.m[r] = -INFINITY;
        b.l[r] = 0.0f;
        b.nmax = std::max(b.nmax, b.rows[r].n);
    }
}

// Scores of a row group (nq <= 4 rows, q[i]; q[i >= nq] repeat a row) with keys jb .. jb + 3 of the
// tile at Kt (row stride ks elements; keys past nt - 1 repeat the last): lane 4 k + i of sc + 4 jb.
template <typename T>
inline void group_scores4(const float* const* q, int nq, const T* Kt, int64_t ks, int64_t jb, int64_t nt, int64_t dvec,
                          int64_t dk, __mmask16 tail, __m512 vscale, float* sc) {
    const T* kr[4];
    for (int k = 0; k < 4; ++k) kr[k] = Kt + std::min(jb + k, nt - 1) * ks;
    __m512 d;
    switch (nq) {
        case 1: d = dots4x4<T, 1>(q, kr, dvec, dk, tail); break;
        case 2: d = dots4x4<T, 2>(q, kr, dvec, dk, tail); break;
        case 3: d = dots4x4<T, 3>(q, kr, dvec, dk, tail); break;
        default: d = dots4x4<T, 4>(q, kr, dvec, dk, tail); break;
    }
    _mm512_store_ps(sc + 4 * jb, _mm512_mul_ps(d, vscale));
}

// The online-softmax step of a row group over its tile's scores sc (lane 4 j + i; row i has nv[i]
// valid keys, nt = the most), in two halves (split decode runs them on different threads):
// group_tile_max: per row the tile max, m -> m_new (mn[i]), alpha[i] = exp(m - m_new), the factor
// the row's l and P.V accumulator take before this tile's keys join them (1: unchanged, also for
// rows without keys here); group_exp: sc -> exp(s - m_new) (vexp); group_sums: l rescaled by alpha,
// then l += the weights in key order.
inline void group_tile_max(const float* sc, const int64_t* nv, int nq, int64_t nt, float* m, float* alpha, float* mn) {
    const __m512i lane_key = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
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
    for (int i = 0; i < 4; ++i) {
        alpha[i] = 1.0f;
        mn[i] = 0.0f;
        if (i >= nq || nv[i] == 0) continue;
        const float m_new = std::fmax(m[i], mt[i]);
        alpha[i] = std::exp(m[i] - m_new);  // 0 on the first tile (m = -inf)
        m[i] = m_new;
        mn[i] = m_new;
    }
}

inline void group_exp(float* sc, int64_t nt, const float* mn) {
    const __m512 vm = _mm512_broadcast_f32x4(_mm_loadu_ps(mn));
    for (int64_t jb = 0; jb < nt; jb += 4) _mm512_store_ps(sc + 4 * jb, vexp(_mm512_sub_ps(_mm512_load_ps(sc + 4 * jb), vm)));
}


// The running sums of NG row groups at once (sc[k], nv[k], nq[k], nt[k], alpha[k], l[k]):
// one sequential chain per row in key order (4 rows in the lanes of an xmm), the groups' chains
// interleaved, so a masked add's latency is paid once per key for NG groups rather than per group
// and key (prefill blocks: up to 32 row groups per tile; 0.95-0.97x the attention time at depth 4096).
// (zmm ops on lanes 0-3 only: the portable build's AVX-512 target has no AVX512VL)
// (l times alpha in every row: x 1 is exact, so the same bits as scaling only where alpha != 1;
// masked loads and stores, not an array copy: no store-forwarding stall)
template <int NG>
inline void group_sums(float* const* sc, const int64_t* const* nv, const int* nq, const int64_t* nt, const float* const* alpha,
                       float* const* l) {
    __m512i nvv[NG];
    __mmask16 rows[NG];
    __m512 lv[NG];
    int64_t ntm = 0;
    for (int k = 0; k < NG; ++k) {
        nvv[k] = _mm512_broadcast_i32x4(_mm_setr_epi32(static_cast<int>(nv[k][0]), static_cast<int>(nv[k][1]),
                                                       static_cast<int>(nv[k][2]), static_cast<int>(nv[k][3])));
        rows[k] = static_cast<__mmask16>((1u << nq[k]) - 1u);
        lv[k] = _mm512_mul_ps(_mm512_maskz_loadu_ps(rows[k], l[k]), _mm512_maskz_loadu_ps(rows[k], alpha[k]));
        ntm = std::max(ntm, nt[k]);
    }
    for (int64_t j = 0; j < ntm; ++j) {  // (a group's lanes past its nt are masked: nv <= nt)
        const __m512i vj = _mm512_set1_epi32(static_cast<int>(j));
        for (int k = 0; k < NG; ++k) {
            const __mmask16 valid = _mm512_cmplt_epi32_mask(vj, nvv[k]) & rows[k];
            lv[k] = _mm512_mask_add_ps(lv[k], valid, lv[k], _mm512_castps128_ps512(_mm_load_ps(sc[k] + 4 * j)));
        }
    }
    for (int k = 0; k < NG; ++k) _mm512_mask_storeu_ps(l[k], rows[k], lv[k]);
}

// group_sums for ng (0-4) row groups, chosen at run time (prefill blocks and the split V pass).
inline void group_sums_n(int ng, float* const* sc, const int64_t* const* nv, const int* nq, const int64_t* nt,
                         const float* const* alpha, float* const* l) {
    switch (ng) {
        case 0: break;
        case 1: group_sums<1>(sc, nv, nq, nt, alpha, l); break;
        case 2: group_sums<2>(sc, nv, nq, nt, alpha, l); break;
        case 3: group_sums<3>(sc, nv, nq, nt, alpha, l); break;
        default: group_sums<4>(sc, nv, nq, nt, alpha, l); break;
    }
}

// A row's accumulator times alpha (skipped when alpha is 1, as the scalar kernel does).
inline void scale_acc(float* acc, float alpha, int64_t dv) {
    if (alpha == 1.0f) return;
    const __m512 va = _mm512_set1_ps(alpha);
    int64_t i0 = 0;
    for (; i0 + 16 <= dv; i0 += 16) _mm512_storeu_ps(acc + i0, _mm512_mul_ps(_mm512_loadu_ps(acc + i0), va));
    for (; i0 < dv; ++i0) acc[i0] *= alpha;
}

// P.V of a row group (ac[i], weights sc lane 4 j + i, row i's keys nv[i]) over keys [jb, je) of the
// tile at Vt: the keys every row has together, then each row's own rest. Called for consecutive key
// ranges, each row's fma chains still run in key order.
template <typename T>
inline void group_pv(float* const* ac, const float* sc, const T* Vt, int64_t vs, const int64_t* nv, int nq, int64_t jb,
                     int64_t je, int64_t dv) {
    int64_t nc = kAttentionTile;
    for (int i = 0; i < nq; ++i) nc = std::min(nc, nv[i]);
    const int64_t ce = std::min(je, nc);
    if (ce > jb) switch (nq) {
            case 1: pv_rows<T, 1>(ac, sc, Vt, vs, jb, ce, dv); break;
            case 2: pv_rows<T, 2>(ac, sc, Vt, vs, jb, ce, dv); break;
            case 3: pv_rows<T, 3>(ac, sc, Vt, vs, jb, ce, dv); break;
            default: pv_rows<T, 4>(ac, sc, Vt, vs, jb, ce, dv); break;
        }
    for (int i = 0; i < nq; ++i) pv_rows<T, 1>(&ac[i], sc + i, Vt, vs, std::max(jb, nc), std::min(je, nv[i]), dv);
}

// One key tile (keys j0 .. j0 + kAttentionTile - 1 from the block's first key) for every row.
template <typename Tiles>
void block_tile(const AttentionSpec& s, RowBlock& b, const Tiles& tiles, int64_t j0, float scale) {
    using T = typename Tiles::Elem;
    const int64_t dk = s.head_dim_k, dv = s.head_dim_v;
    const int64_t ks = tiles.ks, vs = tiles.vs;
    const int64_t dvec = dk & ~int64_t{15};
    const __mmask16 tail = static_cast<__mmask16>((1u << (dk - dvec)) - 1u);
    const QRow* rows = b.rows;
    const int64_t R = b.R;
    alignas(64) float scg[kBlockRows / 4][4 * kAttentionTile];  // per row group: lane 4 j + i
    int64_t nvg[kBlockRows / 4][4], ntg[kBlockRows / 4];  // per row group: each row's keys here, their most
    const int64_t n_tile = std::min(kAttentionTile, b.nmax - j0);
    for (int64_t g0 = 0; g0 < R; g0 += 4) {
        ntg[g0 / 4] = 0;
        for (int i = 0; i < 4; ++i) {
            nvg[g0 / 4][i] = g0 + i < R ? std::clamp<int64_t>(rows[g0 + i].n - j0, 0, kAttentionTile) : 0;
            ntg[g0 / 4] = std::max(ntg[g0 / 4], nvg[g0 / 4][i]);
        }
    }
    // Two passes over the row groups, scores + softmax with the K tile, then P.V with the V tile,
    // so only one of them needs to stay in L1 (each row's own operation order is unchanged). A
    // staged source hands each over in parts of tiles.stage keys (StagedTiles: 32 keys, 16 KiB of f32
    // for d = 128, which L1 holds beside a row group's queries or accumulators); keys and each row's
    // P.V chain stay in key order.
    const __m512 vscale = _mm512_set1_ps(scale);
    for (int64_t h0 = 0; h0 < n_tile; h0 += tiles.stage) {
        const T* Kt = tiles.ktile(j0 + h0, std::min(tiles.stage, n_tile - h0));
        for (int64_t g0 = 0; g0 < R; g0 += 4) {
            const int nq = static_cast<int>(std::min<int64_t>(4, R - g0));
            const int64_t nt = ntg[g0 / 4];
            const float* q[4];
            for (int i = 0; i < 4; ++i) q[i] = rows[g0 + std::min(i, nq - 1)].q;
            for (int64_t jb = h0; jb < std::min(nt, h0 + tiles.stage); jb += 4) {
                if (g0 == 0)
                    for (int k = 0; k < 4; ++k) tiles.prefetch(j0 + jb + k);
                group_scores4(q, nq, Kt, ks, jb - h0, nt - h0, dvec, dk, tail, vscale, scg[g0 / 4] + 4 * h0);
            }
        }
    }
    for (int64_t G0 = 0; G0 < R; G0 += 16) {  // up to 4 row groups: their running sums interleave
        float* sc[4];
        const int64_t* nv[4];
        int nq[4];
        int64_t nt[4], g0s[4];
        float alpha[4][4], mn[4];
        const float* al[4];
        float* l[4];
        int ng = 0;
        for (int64_t g0 = G0; g0 < std::min(R, G0 + 16); g0 += 4) {
            if (ntg[g0 / 4] == 0) continue;
            sc[ng] = scg[g0 / 4], nv[ng] = nvg[g0 / 4], nt[ng] = ntg[g0 / 4], g0s[ng] = g0;
            nq[ng] = static_cast<int>(std::min<int64_t>(4, R - g0));
            group_tile_max(sc[ng], nv[ng], nq[ng], nt[ng], b.m + g0, alpha[ng], mn);
            group_exp(sc[ng], nt[ng], mn);
            al[ng] = alpha[ng], l[ng] = b.l + g0;
            ++ng;
        }
        group_sums_n(ng, sc, nv, nq, nt, al, l);
        for (int k = 0; k < ng; ++k)
            for (int i = 0; i < nq[k]; ++i) scale_acc(b.row(g0s[k] + i), alpha[k][i], dv);
    }
    for (int64_t h0 = 0; h0 < n_tile; h0 += tiles.stage) {
        const T* Vt = tiles.vtile(j0 + h0, std::min(tiles.stage, n_tile - h0));
        for (int64_t g0 = 0; g0 < R; g0 += 4) {
            const int nq = static_cast<int>(std::min<int64_t>(4, R - g0));
            int64_t nv[4];  // this part's keys of each row
            for (int i = 0; i < 4; ++i) nv[i] = std::clamp<int64_t>(nvg[g0 / 4][i] - h0, 0, tiles.stage);
            float* ac[4];
            for (int i = 0; i < 4; ++i) ac[i] = b.row(g0 + std::min(i, nq - 1));
            group_pv(ac, scg[g0 / 4] + 4 * h0, Vt, vs, nv, nq, 0, tiles.stage, dv);
        }
    }
}

// A row's output = acc x this, from its final running max m and sum l (and sink logit, or null).
inline float finish_scale(float m, float l, const float* sink) {
    if (!sink) return 1.0f / l;
    // as attend_heads: the sink joins the denominator last
    const float sk = *sink, mn = std::fmax(m, sk), a = std::exp(m - mn);
    return a / (l * a + std::exp(sk - mn));
}

inline void block_finish(const RowBlock& b, int64_t dv) {
    for (int64_t r = 0; r < b.R; ++r) {
        const float inv = finish_scale(b.m[r], b.l[r], b.rows[r].sink);
        for (int64_t i = 0; i < dv; ++i) b.rows[r].out[i] = b.row(r)[i] * inv;
    }
}

// acc: R x acc_stride floats of scratch.
template <typename Tiles>
void attend_block(const AttentionSpec& s, const QRow* rows, int64_t R, const Tiles& tiles, float scale, float* acc,
                  int64_t acc_stride) {
    RowBlock b{rows, R, acc, acc_stride, {}, {}, 0};
    block_init(b, s.head_dim_v);
    for (int64_t j0 = 0; j0 < b.nmax; j0 += kAttentionTile) block_tile(s, b, tiles, j0, scale);
    block_finish(b, s.head_dim_v);
}

#include "kernels/cpu/attention_split_avx512.inc"  // decode in split passes (pairs of threads)

}  // namespace
MOE_DENSE_AVX512_END
#endif

// p rounded up to a 64-byte boundary (p has room for 15 more floats).
inline float* align_floats(float* p) {
    return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}

void attention(const AttentionSpec& s, const AttentionArgs& a, ThreadPool* pool, kernels::Isa isa) {
    attention_check(s, a);
    MOE_ASSERT(s.head_dim_v <= kAttentionMaxHeadDim, "attention head_dim_v ", s.head_dim_v, " > ",
               kAttentionMaxHeadDim);
    const bool f16 = s.kv_type == DType::F16, q8 = s.kv_type == DType::Q8_0;
    // AVX2 where the path asks for SIMD (an AVX-512 CPU takes the tile path below for f32 / f16).
    const bool avx2 = isa != kernels::Isa::Scalar && kernels::isa_supported(kernels::Isa::Avx2) &&
                      (!f16 || kernels::cpu_has_f16c());
    const TileOps ops = q8 ? TileOps{scores_q8, accum_q8}
                        : f16 ? (avx2 ? TileOps{scores_avx2<uint16_t>, accum_avx2<uint16_t>}
                                      : TileOps{scores_scalar<uint16_t>, accum_scalar<uint16_t>})
                              : (avx2 ? TileOps{scores_avx2<float>, accum_avx2<float>}
                                      : TileOps{scores_scalar<float>, accum_scalar<float>});
    const KvLayout L = kv_layout(s);
    const float scale = attention_scale(s);
    const int64_t group = s.n_head / s.n_head_kv;
    const auto* K = static_cast<const char*>(a.k);
    const auto* V = static_cast<const char*>(a.v);
    // Work item = (token, kv head, chunk of up to kAttentionHeadsPerItem of its query heads).
    const int64_t chunks = (group + kAttentionHeadsPerItem - 1) / kAttentionHeadsPerItem;
    auto item = [&](int64_t b, int64_t e, int) {
        for (int64_t it = b; it < e; ++it) {
            const int64_t t = it / (s.n_head_kv * chunks), g = (it / chunks) % s.n_head_kv, c = it % chunks;
            const int64_t h0 = g * group + c * kAttentionHeadsPerItem;
            const int64_t nh = std::min(kAttentionHeadsPerItem, (g + 1) * group - h0);
            // Sliding window: start the key rows at the window's first key.
            const int64_t j0 = attention_first_key(s, a.pos[t]), r0 = attention_first_row(s, a.pos[t]);
            attend_heads(ops, s, L, a.q + (t * s.n_head + h0) * s.head_dim_k, nh, K + r0 * L.k_row + g * L.k_head,
                         V + r0 * L.v_row + g * L.v_head, int64_t{a.pos[t]} + 1 - j0, scale,
                         a.out + (t * s.n_head + h0) * s.head_dim_v, a.sinks ? a.sinks + h0 : nullptr);
        }
    };
#if MOE_DENSE_HAS_AVX512
    if (dense_use_avx512(isa)) {
        // Work item = (block of tokens, kv head, chunk of its query heads), at most kBlockRows rows.
        // A sliding window gives each token its own first key: one token per block then, so the
        // block's key rows start at that token's window.
        const int n_threads = pool ? pool->size() : 1;
        const int64_t heads = std::min(group, kAttentionHeadsPerItem);
        int64_t block_rows = kBlockRows;
        while (block_rows > kMinBlockRows &&
               (a.n_tokens + block_rows / heads - 1) / (block_rows / heads) * s.n_head_kv * chunks < 4 * n_threads)
            block_rows /= 2;  // causal blocks differ in cost: leave each thread a few items
        const int64_t tb = s.window > 0 ? 1 : std::max<int64_t>(1, block_rows / heads);
        const int64_t n_blocks = (a.n_tokens + tb - 1) / tb;
        // Decode (up to kMaxSpanTokens tokens): items span several kv heads, enough for one item per thread.
        const int64_t span = a.n_tokens <= kMaxSpanTokens
                                 ? std::clamp<int64_t>((s.n_head_kv + n_threads - 1) / n_threads, 1, kMaxSpan) : 1;
        // Per-thread scratch for one staged K and V tile and a block's accumulators (allocated per call,
        // not zeroed), only when some block has more than one row group (span items and 4-row blocks
        // read the cache in place and keep their accumulators on the stack, so decode allocates nothing).
        const bool staged = span == 1 && std::min(tb, a.n_tokens) * heads > 4;
        const int64_t acc_stride = (s.head_dim_v + 15) / 16 * 16;
        const int64_t stage = (kAttentionTile * (s.head_dim_k + s.head_dim_v) + 15) / 16 * 16;
        const int64_t per_thread = staged ? stage + kBlockRows * acc_stride : 0;
        std::unique_ptr<float[]> scratch_mem(staged ? new float[static_cast<size_t>(per_thread * n_threads + 16)] : nullptr);
        float* const scratch = staged ? align_floats(scratch_mem.get()) : nullptr;
        // Calls f(tiles) with the tile source of the K / V vectors at k / v (this kv head, first key).
        auto with_tiles = [&](const char* k, const char* v, int64_t rows_in_block, int thread, auto&& f) {
            if (rows_in_block > 4) {  // several row groups share each tile: stage it once
                MOE_ASSERT(staged, "attention staging without scratch: ", rows_in_block, " rows");
                float* buf = scratch + per_thread * thread;
                const auto* kb = reinterpret_cast<const uint8_t*>(k);
                const auto* vb = reinterpret_cast<const uint8_t*>(v);
                float* vbuf = buf + kAttentionTile * s.head_dim_k;
                if (q8)
                    f(StagedTiles<Q8>(kb, vb, L.k_row, L.v_row, s.head_dim_k, s.head_dim_v, kv_q8_vec_bytes(s.head_dim_k),
                                      kv_q8_vec_bytes(s.head_dim_v), buf, vbuf));
                else if (f16)
                    f(StagedTiles<uint16_t>(kb, vb, L.k_row, L.v_row, s.head_dim_k, s.head_dim_v, 2 * s.head_dim_k,
                                            2 * s.head_dim_v, buf, vbuf));
                else
                    f(StagedTiles<float>(kb, vb, L.k_row, L.v_row, s.head_dim_k, s.head_dim_v, 4 * s.head_dim_k,
                                         4 * s.head_dim_v, buf, vbuf));
            } else if (q8) {  // one row group (decode): convert each K / V load in registers
                f(DirectTiles<Q8>{reinterpret_cast<const Q8*>(k), reinterpret_cast<const Q8*>(v), L.k_row, L.v_row,
                                  L.k_head, kv_q8_vec_bytes(s.head_dim_v)});
            } else if (f16) {
                f(DirectTiles<uint16_t>{reinterpret_cast<const uint16_t*>(k), reinterpret_cast<const uint16_t*>(v),
                                        L.k_row / 2, L.v_row / 2, 2 * s.head_dim_k, 2 * s.head_dim_v});
            } else {
                f(DirectTiles<float>{reinterpret_cast<const float*>(k), reinterpret_cast<const float*>(v), L.k_row / 4,
                                     L.v_row / 4, 4 * s.head_dim_k, 4 * s.head_dim_v});
            }
        };
        // Query rows of token t, query heads h0 .. h0 + nh - 1 (keys from j0).
        auto add_rows = [&](QRow* rows, int64_t& R, int64_t t, int64_t h0, int64_t nh, int64_t j0) {
            for (int64_t h = h0; h < h0 + nh; ++h)
                rows[R++] = QRow{a.q + (t * s.n_head + h) * s.head_dim_k, a.out + (t * s.n_head + h) * s.head_dim_v,
                                 int64_t{a.pos[t]} + 1 - j0, a.sinks ? a.sinks + h : nullptr};
        };
        // Decode at depth on an even pool of at most 2 kSplitMaxPairs threads, K and V in separate
        // caches: the split passes (attention_split), whose threads each stream whole cache rows.
        const int n_pairs = pool ? pool->size() / 2 : 0;
        const int64_t split_span = n_pairs > 0 ? (s.n_head_kv + n_pairs - 1) / n_pairs : 0;
        if (a.n_tokens <= kMaxSpanTokens && pool && pool->size() % 2 == 0 && n_pairs <= kSplitMaxPairs &&
            split_span <= kSplitMaxSpan && !(V == K && L.v_row == L.k_row) &&
            int64_t{a.pos[0]} + 1 - attention_first_key(s, a.pos[0]) >= kSplitMinKeys) {
            if (q8) attention_split<Q8>(s, a, L, *pool, n_pairs, split_span, scale);
            else if (f16) attention_split<uint16_t>(s, a, L, *pool, n_pairs, split_span, scale);
            else attention_split<float>(s, a, L, *pool, n_pairs, split_span, scale);
            return;
        }
        if (span > 1) {
            // Decode: work item = (token, span of kv heads, chunk of query heads); the item walks the key
            // tiles once, each tile for every kv head of the span in turn, so the reads of one tile cover
            // span adjacent vectors of each cache row instead of one vector per 4 KB-ish row stride (the
            // hardware prefetchers follow the former). Each row's operations are unchanged.
            const int64_t n_spans = (s.n_head_kv + span - 1) / span;
            auto item_span = [&](int64_t b, int64_t e, int thread) {
                for (int64_t it = b; it < e; ++it) {
                    const int64_t t = it / (n_spans * chunks), g0 = (it / chunks) % n_spans * span, c = it % chunks;
                    const int64_t g1 = std::min(s.n_head_kv, g0 + span);
                    const int64_t j0 = attention_first_key(s, a.pos[t]), r0 = attention_first_row(s, a.pos[t]);
                    QRow rows[kMaxSpan][kAttentionHeadsPerItem];
                    alignas(64) float acc[kMaxSpan][kAttentionHeadsPerItem][kAttentionMaxHeadDim];
                    RowBlock blk[kMaxSpan];
                    for (int64_t g = g0; g < g1; ++g) {
                        const int64_t h0 = g * group + c * kAttentionHeadsPerItem;
                        int64_t R = 0;
                        add_rows(rows[g - g0], R, t, h0, std::min(kAttentionHeadsPerItem, (g + 1) * group - h0), j0);
                        blk[g - g0] = RowBlock{rows[g - g0], R, acc[g - g0][0], kAttentionMaxHeadDim, {}, {}, 0};
                        block_init(blk[g - g0], s.head_dim_v);
                    }
                    const int64_t n_keys = int64_t{a.pos[t]} + 1 - j0;
                    // Bytes of the span's K / V vectors in one cache row (contiguous).
                    const int64_t k_run = (g1 - g0) * L.k_head, v_run = (g1 - g0) * L.v_head;
                    const int64_t pf_rows = (kAttentionTile + (g1 - g0) - 1) / (g1 - g0);
                    for (int64_t jt = 0; jt < n_keys; jt += kAttentionTile)
                        for (int64_t g = g0; g < g1; ++g) {
                            // prefetch a share of the next tile's rows (the whole span's run of each)
                            for (int64_t r = jt + kAttentionTile + (g - g0) * pf_rows,
                                         re = std::min(jt + kAttentionTile + (g - g0 + 1) * pf_rows, n_keys);
                                 r < re; ++r) {
                                prefetch_bytes(K + (r0 + r) * L.k_row + g0 * L.k_head, k_run);
                                if (V != K || L.v_row != L.k_row) prefetch_bytes(V + (r0 + r) * L.v_row + g0 * L.v_head, v_run);
                            }
                            with_tiles(K + r0 * L.k_row + g * L.k_head, V + r0 * L.v_row + g * L.v_head, blk[g - g0].R,
                                       thread, [&](const auto& tiles) { block_tile(s, blk[g - g0], tiles, jt, scale); });
                        }
                    for (int64_t g = g0; g < g1; ++g) block_finish(blk[g - g0], s.head_dim_v);
                }
            };
            const int64_t n_span_items = a.n_tokens * n_spans * chunks;
            if (!pool || pool->size() == 1) item_span(0, n_span_items, 0);
            else pool->parallel_for(n_span_items, 1, item_span);
            return;
        }
        auto block = [&](int64_t b, int64_t e, int thread) {
            for (int64_t it = b; it < e; ++it) {
                const int64_t t0 = (it / (s.n_head_kv * chunks)) * tb, g = (it / chunks) % s.n_head_kv, c = it % chunks;
                const int64_t h0 = g * group + c * kAttentionHeadsPerItem;
                const int64_t nh = std::min(kAttentionHeadsPerItem, (g + 1) * group - h0);
                QRow rows[kBlockRows];
                int64_t R = 0;
                const int64_t j0 = s.window > 0 ? attention_first_key(s, a.pos[t0]) : 0;
                const int64_t r0 = s.window > 0 ? attention_first_row(s, a.pos[t0]) : 0;
                for (int64_t t = t0; t < std::min(a.n_tokens, t0 + tb); ++t) add_rows(rows, R, t, h0, nh, j0);
                alignas(64) float acc4[4][kAttentionMaxHeadDim];  // a block of one row group
                float* acc = R > 4 ? scratch + per_thread * thread + stage : acc4[0];
                const int64_t stride = R > 4 ? acc_stride : kAttentionMaxHeadDim;
                with_tiles(K + r0 * L.k_row + g * L.k_head, V + r0 * L.v_row + g * L.v_head, R, thread,
                           [&](const auto& tiles) { attend_block(s, rows, R, tiles, scale, acc, stride); });
            }
        };
        const int64_t n_block_items = n_blocks * s.n_head_kv * chunks;
        if (!pool || pool->size() == 1)
            block(0, n_block_items, 0);
        else
            pool->parallel_for(n_block_items, 1, block);
        return;
    }
#endif
    const int64_t n_items = a.n_tokens * s.n_head_kv * chunks;
    if (!pool || pool->size() == 1)
        item(0, n_items, 0);
    else
        pool->parallel_for(n_items, 1, item);
}

}  // namespace moe::cpu
