// Int8 weight kernels, AVX-512 + VNNI path (vpdpbusd: unsigned weight levels x signed int8
// activations, 64 products per instruction), and the AVX-512 activation quantizer. The math and
// the determinism argument are in qmatmul.h. Compiled with a target pragma so the portable build
// carries it; used only when the CPU has AVX512F/BW/VL/DQ + VNNI (qmm_avx512_usable()).
//
// Kernel structure: weight rows are taken 16 at a time (a panel), decoded and transposed into a
// column-interleaved int8 panel in a per-thread buffer (repack below), then every activation row
// (4 at a time) runs over it: per 4 values one vpdpbusd feeds 16 columns, per granule of 16/32
// values one convert, one scale multiply and one FMA (see "engine" below). The decode and the
// transposition are paid once per panel and call, and amortised over the m activation rows.
// Decode-sized calls (m <= 2) skip the panel (direct_row: vpdpbusd along K, then an add/unpack
// tree to per-granule sums) and run the same f32 chain, so both give the same bits.
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm*_undefined_* helpers (GCC bug
// 105593, a false positive); silenced for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <climits>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/fp16.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_decode.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quantize_act.h"

namespace moe::kernels {

bool qmm_avx512_usable() {
#if defined(__x86_64__) && defined(__GNUC__)
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") &&
                           cpu_has_f16c() && __builtin_cpu_supports("bmi2");
    return ok;
#else
    return false;
#endif
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2,bmi2")
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm*_undefined_* helpers (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

inline float h2f(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}




inline __m512i cat256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// ---------------------------------------------------------------- per-type decoders
// A super-block is 256 values for the K-quants and one 64-value unit (2 blocks) for Q8_0/Q4_0.
// begin(): per super-block state; levels(): the 64 unsigned levels of unit u of the super-block;
// scales() (Q8_0/Q4_0): the f32 scale of each kG-value granule of the super-block (ws[k * 16]);
// scale_vec() (K-quants): the granule scales in lanes 0.. and, for Q4_K/Q5_K, dmin*m of each
// 32-value group in lanes 8..15, as one zmm (transposed to [granule][row] by pack_scales).
struct DQ8_0 {
    static constexpr int kShift = 7, kUnits = 1, kSbElems = 64, kG = 32, kSbBytes = 68;
    static constexpr bool kMin = false, kVecScales = false;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int, int64_t nblocks) {
        const uint8_t* b0 = row + 2 * sb * 34;
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 2));
        const __m256i hi = 2 * sb + 1 < nblocks ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 36))
                                                : _mm256_set1_epi8(static_cast<char>(0x80));
        return _mm512_xor_si512(cat256(lo, hi), _mm512_set1_epi8(static_cast<char>(0x80)));
    }
    static void scales(const State&, const uint8_t* row, int64_t sb, int64_t nblocks, float* ws, float*) {
        const uint8_t* b0 = row + 2 * sb * 34;
        ws[0] = h2f(b0);
        ws[16] = 2 * sb + 1 < nblocks ? h2f(b0 + 34) : 0.0f;
    }
};

struct DQ4_0 {
    static constexpr int kShift = 3, kUnits = 1, kSbElems = 64, kG = 32, kSbBytes = 36;
    static constexpr bool kMin = false, kVecScales = false;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int, int64_t nblocks) {
        const uint8_t* b0 = row + 2 * sb * 18;
        const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + 2));
        const __m128i v1 = 2 * sb + 1 < nblocks ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + 20))
                                                : _mm_setzero_si128();
        const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(v0), v1, 1);
        const __m256i m = _mm256_set1_epi8(0x0F);
        const __m512i x = cat256(_mm256_and_si256(v, m), _mm256_and_si256(_mm256_srli_epi16(v, 4), m));
        return _mm512_shuffle_i64x2(x, x, 0xD8);  // [b0 lo, b1 lo, b0 hi, b1 hi] -> [b0 lo, b0 hi, b1 lo, b1 hi]
    }
    static void scales(const State&, const uint8_t* row, int64_t sb, int64_t nblocks, float* ws, float*) {
        const uint8_t* b0 = row + 2 * sb * 18;
        ws[0] = h2f(b0);
        ws[16] = 2 * sb + 1 < nblocks ? h2f(b0 + 18) : 0.0f;
    }
};

template <bool Five>
struct DQ45_K {
    static constexpr int kShift = -1, kUnits = 4, kSbElems = 256, kG = 32, kSbBytes = Five ? 176 : 144;
    static constexpr bool kMin = true, kVecScales = true;
    static constexpr int kBytes = Five ? 176 : 144;
    static constexpr int kQs = Five ? 48 : 16;  // offset of qs in the block
    struct State {
        __m256i qh;
    };
    static void begin(State& s, const uint8_t* row, int64_t sb, int64_t) {
        if constexpr (Five) s.qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + sb * kBytes + 16));
    }
    static __m512i levels(const State& s, const uint8_t* row, int64_t sb, int c, int64_t) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + sb * kBytes + kQs + 32 * c));
        const __m256i m = _mm256_set1_epi8(0x0F);
        __m256i lo = _mm256_and_si256(v, m), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
        if constexpr (Five) {
            const __m256i sixteen = _mm256_set1_epi8(16);
            lo = _mm256_mask_add_epi8(lo, _mm256_test_epi8_mask(s.qh, _mm256_set1_epi8(static_cast<char>(1 << (2 * c)))),
                                      lo, sixteen);
            hi = _mm256_mask_add_epi8(
                hi, _mm256_test_epi8_mask(s.qh, _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1)))), hi, sixteen);
        }
        return cat256(lo, hi);
    }
    // Lanes 0..7: d * sc_j, lanes 8..15: dmin * m_j (the 6-bit fields of get_scale_min_k4, unpacked
    // four at a time from 32-bit words: bytes 0-3 / 4-7 hold sc/m 0..3 in their low 6 bits and the
    // top 2 bits of sc/m 4..7; bytes 8-11 hold the low 4 bits of sc 4..7 (low nibble) and m 4..7).
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * kBytes;
        uint32_t w0, w1, w2;
        std::memcpy(&w0, b + 4, 4);
        std::memcpy(&w1, b + 8, 4);
        std::memcpy(&w2, b + 12, 4);
        const uint32_t sc_lo = w0 & 0x3f3f3f3fu, m_lo = w1 & 0x3f3f3f3fu;
        const uint32_t sc_hi = (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u);
        const uint32_t m_hi = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u);
        const __m128i v = _mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi), static_cast<int>(m_lo),
                                         static_cast<int>(m_hi));
        const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v));
        return _mm512_mul_ps(f, _mm512_insertf32x8(_mm512_set1_ps(h2f(b)), _mm256_set1_ps(h2f(b + 2)), 1));
    }
};

struct DQ6_K {
    static constexpr int kShift = 5, kUnits = 4, kSbElems = 256, kG = 16, kSbBytes = 210;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int c, int64_t) {
        const uint8_t* b = row + sb * 210;
        const int half = c / 2;
        const __m512i ql = _mm512_loadu_si512(b + 64 * half);
        // qh of the half in both 256-bit halves; bits 2t..2t+1 of byte l are the top two bits of
        // value l + 32 t. Unit c % 2 == 0 needs t = 0 | 1, odd t = 2 | 3, moved to bits 4-5 by one
        // 16-bit variable shift (bits crossing into the other byte of the word are masked off).
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * half)));
        const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
        __m512i lv, hb;
        if (c % 2 == 0) {
            lv = _mm512_and_si512(ql, m4);
            hb = _mm512_sllv_epi16(qh, cat256(_mm256_set1_epi16(4), _mm256_set1_epi16(2)));
        } else {
            lv = _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4);
            hb = _mm512_srlv_epi16(qh, cat256(_mm256_setzero_si256(), _mm256_set1_epi16(2)));
        }
        return _mm512_ternarylogic_epi32(lv, hb, m30, 0xF8);  // lv | (hb & 0x30)
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 210;
        const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192))));
        return _mm512_mul_ps(f, _mm512_set1_ps(h2f(b + 208)));
    }
};

// Q2_K-style min per 16 values (D::kMin16, absent = false): D::min_vec gives the 16 mins dmin*m of a
// super-block; the chain adds acc = fma(float(nsum_16), wm * dx, acc) after each granule.
template <class D>
constexpr bool min16_of() {
    if constexpr (requires { D::kMin16; }) return D::kMin16;
    else return false;
}
// wm floats per super-block and column: per-32 mins (Q4_K/Q5_K/Q4_1/Q5_1) or per-16 (Q2_K).
template <class D>
constexpr int wm_per_sb() { return min16_of<D>() ? D::kSbElems / 16 : D::kSbElems / 32; }

#include "kernels/cpu/qmatmul_avx512_legacy_k.inc"
#include "kernels/cpu/qmatmul_avx512_iq.inc"

// 16 x 16 transpose of 32-bit elements: out[j] lane c = in[c] lane j.
inline void transpose16(const __m512i in[16], __m512i out[16]) {
    __m512i a[16], b[16];
    for (int i = 0; i < 8; ++i) {
        a[2 * i] = _mm512_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
        b[4 * i + 0] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
        b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
    }
    for (int k = 0; k < 4; ++k) {  // b[4i + k], 128-bit lane L = rows 4i..4i+3 of element 4L + k
        const __m512i c0 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0x44), c1 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0xEE);
        const __m512i c2 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0x44),
                      c3 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0xEE);
        out[0 + k] = _mm512_shuffle_i32x4(c0, c2, 0x88);
        out[4 + k] = _mm512_shuffle_i32x4(c0, c2, 0xDD);
        out[8 + k] = _mm512_shuffle_i32x4(c1, c3, 0x88);
        out[12 + k] = _mm512_shuffle_i32x4(c1, c3, 0xDD);
    }
}

// ---------------------------------------------------------------- engine
// A panel is 16 weight rows (columns of y) repacked "column-interleaved": for every 4 consecutive
// values k..k+3 one zmm whose 32-bit lane c holds the 4 levels of column c, so one vpdpbusd with
// the 4 activation bytes broadcast adds 4 products to each of the 16 columns' integer sums. Per
// granule (kG values) and activation row: the integer sums I (exact; seeded with -2^shift * sum of
// the activations), then acc = fma(float(I), ws * dx, acc) and, for Q4_K/Q5_K after each 32-value
// group, acc = fma(-wm, dxs, acc): one sequential f32 chain per output, in K order. That is also
// exactly what the scalar and AVX2 paths compute (qmatmul_generic.cpp, std::fma), so every path
// gives the same bits, whatever m, the column range or the thread.
struct Panel {
    __m512i* q;   // [K/4] quads
    float* ws;    // [K/kG][16]
    float* wm;    // [K/32][16]
};

// Scales of super-block sb of up to 16 weight rows as [granule][column] (ws) and [group][column]
// (wm) f32 vectors; also runs D::begin for each row (st).
template <class D>
void pack_scales(const uint8_t* const* w, int nc, int64_t sb, int64_t nblocks, typename D::State* st, float* ws_out,
                 float* wm_out) {
    constexpr int kGran = D::kSbElems / D::kG;
    if constexpr (D::kVecScales) {
        // K-quants: each row's scales (and mins) as one zmm, transposed to [granule][column].
        __m512i sv[16], tv[16];
        for (int c = 0; c < 16; ++c) {
            if (c < nc) D::begin(st[c], w[c], sb, nblocks);
            sv[c] = c < nc ? _mm512_castps_si512(D::scale_vec(st[c], w[c], sb, nblocks)) : _mm512_setzero_si512();
        }
        transpose16(sv, tv);
        for (int k = 0; k < kGran; ++k) _mm512_store_si512(ws_out + k * 16, tv[k]);
        if constexpr (D::kMin)
            for (int k = 0; k < 8; ++k) _mm512_store_si512(wm_out + k * 16, tv[8 + k]);
        if constexpr (min16_of<D>()) {
            for (int c = 0; c < 16; ++c)
                sv[c] = c < nc ? _mm512_castps_si512(D::min_vec(st[c], w[c], sb, nblocks)) : _mm512_setzero_si512();
            transpose16(sv, tv);
            for (int k = 0; k < 16; ++k) _mm512_store_si512(wm_out + k * 16, tv[k]);
        }
    } else {
        for (int c = 0; c < 16; ++c) {
            float* ws = ws_out + c;
            float* wm = wm_out + c;
            if (c < nc) {
                D::begin(st[c], w[c], sb, nblocks);
                D::scales(st[c], w[c], sb, nblocks, ws, wm);
            } else {
                for (int k = 0; k < kGran; ++k) ws[16 * k] = 0.0f;
                for (int k = 0; k < D::kSbElems / 32; ++k) wm[16 * k] = 0.0f;
            }
        }
    }
}

template <class D>
void repack(const MatmulArgs& a, int64_t n, int nc, int64_t nblocks, int64_t nsb, const Panel& p) {
    const uint8_t* w[16];
    for (int c = 0; c < nc; ++c) w[c] = static_cast<const uint8_t*>(a.w) + (n + c) * static_cast<int64_t>(a.w_row_stride);
    constexpr int kGran = D::kSbElems / D::kG;  // granules per super-block
    for (int64_t sb = 0; sb < nsb; ++sb) {
        typename D::State st[16];
        pack_scales<D>(w, nc, sb, nblocks, st, p.ws + sb * kGran * 16, p.wm + sb * wm_per_sb<D>() * 16);
        for (int u = 0; u < D::kUnits; ++u) {
            __m512i lv[16];
            for (int c = 0; c < 16; ++c) lv[c] = c < nc ? D::levels(st[c], w[c], sb, u, nblocks) : _mm512_setzero_si512();
            transpose16(lv, p.q + (sb * D::kUnits + u) * 16);
        }
    }
}

template <class D, int MR, int NP>
void rows_block(const MatmulArgs& a, const unsigned char* act, size_t act_stride, int64_t r0, int64_t n,
                const int* nc, const Panel* p) {
    ref::ActQ8Row x[MR];
    for (int i = 0; i < MR; ++i) x[i] = ref::act_q8_row(const_cast<unsigned char*>(act + (r0 + i) * act_stride), a.K);
    __m512 acc[MR][NP];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_setzero_ps();
    constexpr int kQuads = D::kG / 4, kSub = D::kG / 16;
    const int64_t ng = a.K / D::kG;
    for (int64_t g = 0; g < ng; ++g) {
        const int64_t k0 = g * D::kG, i16 = k0 / 16;
        __m512i I[MR][NP];
        for (int i = 0; i < MR; ++i) {
            int32_t ns = x[i].nsum[4 * i16];
            if constexpr (kSub == 2) ns += x[i].nsum[4 * i16 + 4];
            const __m512i init =
                D::kShift >= 0 ? _mm512_set1_epi32(ns * (1 << (D::kShift >= 0 ? D::kShift : 0))) : _mm512_setzero_si512();
            for (int j = 0; j < NP; ++j) I[i][j] = init;
        }
        for (int t = 0; t < kQuads; ++t) {
            __m512i wq[NP];
            for (int j = 0; j < NP; ++j) wq[j] = _mm512_load_si512(p[j].q + (k0 / 4 + t));
            for (int i = 0; i < MR; ++i) {
                int32_t xv;
                std::memcpy(&xv, x[i].qs + k0 + 4 * t, 4);
                const __m512i xb = _mm512_set1_epi32(xv);
                for (int j = 0; j < NP; ++j) I[i][j] = _mm512_dpbusd_epi32(I[i][j], wq[j], xb);
            }
        }
        for (int j = 0; j < NP; ++j) {
            const __m512 ws = _mm512_load_ps(p[j].ws + g * 16);
            for (int i = 0; i < MR; ++i)
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[i][j]), _mm512_mul_ps(ws, _mm512_set1_ps(x[i].dxv[4 * i16])),
                                            acc[i][j]);
            if constexpr (D::kMin) {  // kG == 32: one group per granule
                const __m512 wm = _mm512_load_ps(p[j].wm + g * 16);
                for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fnmadd_ps(wm, _mm512_set1_ps(x[i].dxs[g]), acc[i][j]);
            }
            if constexpr (min16_of<D>()) {  // kG == 16: one min per granule
                const __m512 wm = _mm512_load_ps(p[j].wm + g * 16);
                for (int i = 0; i < MR; ++i)
                    acc[i][j] = _mm512_fmadd_ps(_mm512_set1_ps(static_cast<float>(x[i].nsum[4 * i16])),
                                                _mm512_mul_ps(wm, _mm512_set1_ps(x[i].dxv[4 * i16])), acc[i][j]);
            }
        }
    }
    for (int j = 0; j < NP; ++j) {
        const __mmask16 keep = static_cast<__mmask16>((1u << nc[j]) - 1u);
        for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(a.y + (r0 + i) * a.ldy + (n + 16 * j - a.n0), keep, acc[i][j]);
    }
}

template <class D, int NP>
void rows_all(const MatmulArgs& a, const unsigned char* act, size_t act_stride, int64_t n, const int* nc,
              const Panel* p) {
    int64_t r = 0;
    for (; r + 4 <= a.m; r += 4) rows_block<D, 4, NP>(a, act, act_stride, r, n, nc, p);
    switch (a.m - r) {
        case 3: rows_block<D, 3, NP>(a, act, act_stride, r, n, nc, p); break;
        case 2: rows_block<D, 2, NP>(a, act, act_stride, r, n, nc, p); break;
        case 1: rows_block<D, 1, NP>(a, act, act_stride, r, n, nc, p); break;
        default: break;
    }
}

// Decode-sized calls (m <= 2): no panel. Per 64-value unit, one vpdpbusd per weight row against
// the activation unit (lane j = quad j), then an add/unpack tree turns the 16 rows' lanes into one
// zmm per 16-value granule with lane c = row c's exact granule sum, and the same f32 chain as the
// panel path follows (identical bits: the integer sums are exact, the f32 steps are the same).
inline void granule_sums(const __m512i dp[16], __m512i R[4]) {
    __m512i t[8], u[4];
    for (int i = 0; i < 8; ++i)
        t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(dp[2 * i], dp[2 * i + 1]),
                                _mm512_unpackhi_epi32(dp[2 * i], dp[2 * i + 1]));
    for (int i = 0; i < 4; ++i)
        u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]), _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    // u[i], 128-bit lane L: granule L of rows 4i..4i+3
    const __m512i c0 = _mm512_shuffle_i32x4(u[0], u[1], 0x44), c1 = _mm512_shuffle_i32x4(u[0], u[1], 0xEE);
    const __m512i c2 = _mm512_shuffle_i32x4(u[2], u[3], 0x44), c3 = _mm512_shuffle_i32x4(u[2], u[3], 0xEE);
    R[0] = _mm512_shuffle_i32x4(c0, c2, 0x88);
    R[1] = _mm512_shuffle_i32x4(c0, c2, 0xDD);
    R[2] = _mm512_shuffle_i32x4(c1, c3, 0x88);
    R[3] = _mm512_shuffle_i32x4(c1, c3, 0xDD);
}

// Lanes [0, nc) of acc are outputs y[r][n .. n + nc) of a decode GEMV.
inline void store_row16(const MatmulArgs& a, int64_t r, int64_t n, int nc, __m512 acc) {
    _mm512_mask_storeu_ps(a.y + r * a.ldy + (n - a.n0), static_cast<__mmask16>((1u << nc) - 1u), acc);
}

// Decode GEMVs read 16 rows of one weight matrix at a time, at the same offset in each. The rows of
// a GGUF tensor are contiguous, so the next 16-row panel is the next 16 * row_stride bytes: per
// super-block step, prefetch that step's share of the next panel -- one linear stream, stopped at
// the call's last row (past it lie rows another thread or another expert reads) -- spread over the
// step's row work (work item i of n issues lines i, i + n, ...) rather than issued as one burst.
// Measured on the OLMoE-1B-7B decode (moe bench tg64/tg128, 2 threads, docs/PERFORMANCE.md
// "Decode memory path"): per-row prefetches 1 KB ahead 14.3 t/s (Q4_K_M), this stream as a burst
// with PREFETCHT0 18.0, with PREFETCHT2 21.1 (a prefetch to L1 holds one of the core's few L1 fill
// buffers until the line arrives, and the core stalled on them; T2 requests leave L1 alone and the
// L2 streamer follows the stream); spreading it: +13 % Q8_0, +4 % Q4_K_M over the burst (mean of 4
// alternated runs each); 2 or more panels ahead was slower.
struct PanelShare {
    const char* base;
    int64_t start, stop;  // byte range of the step's share, clamped to the call's rows
};
inline PanelShare panel_share(const MatmulArgs& a, int64_t n, int64_t sb, int64_t nsb) {
    const int64_t stride = static_cast<int64_t>(a.w_row_stride);
    const int64_t panel = 16 * stride, share = (panel + nsb - 1) / nsb;
    const int64_t start = (n + 16) * stride + sb * share;
    return {static_cast<const char*>(a.w), start, std::min(start + share, a.n1 * stride)};
}
// Work item i of n (per step) prefetches lines i, i + n, ... of the share. Inline asm, not
// _mm_prefetch: GCC 12 deletes a loop whose only statements are prefetch builtins (they count as
// side-effect free and C++ loops may be assumed to terminate).
inline void prefetch_share(const PanelShare& p, int i, int n) {
    for (int64_t o = p.start + 64 * i; o < p.stop; o += 64 * n) asm volatile("prefetcht2 %0" : : "m"(p.base[o]));
}

template <class D>
void direct_row(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc, int64_t nblocks,
                int64_t nsb) {
    const uint8_t* w[16];
    for (int c = 0; c < nc; ++c) w[c] = static_cast<const uint8_t*>(a.w) + (n + c) * static_cast<int64_t>(a.w_row_stride);
    constexpr int kGran = D::kSbElems / D::kG, kSub = D::kG / 16;
    alignas(64) float ws[kGran * 16], wm[16 * 16];
    const int64_t ng = a.K / D::kG;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
        typename D::State st[16];
        const PanelShare ps = panel_share(a, n, sb, nsb);
        pack_scales<D>(w, nc, sb, nblocks, st, ws, wm);
        for (int u = 0; u < D::kUnits; ++u) {
            const int64_t U = sb * D::kUnits + u;
            const __m512i xq = _mm512_loadu_si512(x.qs + 64 * U);
            __m512i dp[16], R[4];
            for (int c = 0; c < 16; ++c) {
                prefetch_share(ps, 16 * u + c, 16 * D::kUnits);
                dp[c] = c < nc ? _mm512_dpbusd_epi32(_mm512_setzero_si512(), D::levels(st[c], w[c], sb, u, nblocks), xq)
                               : _mm512_setzero_si512();
            }
            granule_sums(dp, R);
            for (int h = 0; h < 4 / kSub; ++h) {
                const int64_t g = U * (4 / kSub) + h;  // granule index in the row
                if (g >= ng) break;
                const int64_t i16 = g * kSub;
                __m512i I = kSub == 2 ? _mm512_add_epi32(R[2 * h], R[2 * h + 1]) : R[h];
                if constexpr (D::kShift >= 0) {
                    int32_t ns = x.nsum[4 * i16];
                    if constexpr (kSub == 2) ns += x.nsum[4 * i16 + 4];
                    I = _mm512_add_epi32(I, _mm512_set1_epi32(ns * (1 << (D::kShift >= 0 ? D::kShift : 0))));
                }
                const int k = static_cast<int>(g - sb * kGran);  // granule within the super-block
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(_mm512_load_ps(ws + 16 * k), _mm512_set1_ps(x.dxv[4 * i16])), acc);
                if constexpr (D::kMin) acc = _mm512_fnmadd_ps(_mm512_load_ps(wm + 16 * k), _mm512_set1_ps(x.dxs[g]), acc);
                if constexpr (min16_of<D>())
                    acc = _mm512_fmadd_ps(_mm512_set1_ps(static_cast<float>(x.nsum[4 * i16])),
                                          _mm512_mul_ps(_mm512_load_ps(wm + 16 * k), _mm512_set1_ps(x.dxv[4 * i16])), acc);
            }
        }
    }
    store_row16(a, r, n, nc, acc);
}

// ---------------------------------------------------------------- decode GEMV, 16 rows x 128 values
// For Q4_K/Q5_K (and Q8_0 when K % 128 == 0) the decode path works in steps of 128 values: per
// weight row two 64-byte level vectors L and H (Q4_K: one 64-byte load of qs gives both nibble
// planes; Q8_0: two units), one vpdpbusd each against the matching activation bytes (prepared once
// per step for all 16 rows), and a reduction tree (tree4 below) that turns the 32 vpdpbusd results
// of 16 rows into 4 vectors G[label] whose lane c is row c's exact integer sum of one 32-value
// granule. Labels: 0 = L bytes 0..31, 1 = H bytes 0..31, 2 = L bytes 32..63, 3 = H bytes 32..63.
// The scales of 16 rows come from a 4 x 4 transposition of the rows' 16-byte block headers (K-quants)
// or one gather per block (Q8_0), already as [granule][row] vectors. The f32 chain per output is
// the one of qmatmul.h, in K order, so the bits equal every other path.
// Tree levels 1 and 2 for one pair of rows: per 128-bit lane k, [L(r), L(r+1), H(r), H(r+1)] partials.
inline __m512i pair_sums(__m512i dL0, __m512i dH0, __m512i dL1, __m512i dH1) {
    // level 1, per row: 128-bit lane k = [L, H, L, H] partials
    const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(dL0, dH0), _mm512_unpackhi_epi32(dL0, dH0));
    const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(dL1, dH1), _mm512_unpackhi_epi32(dL1, dH1));
    return _mm512_add_epi32(_mm512_unpacklo_epi32(t0, t1), _mm512_unpackhi_epi32(t0, t1));
}

// Levels 3 and 4: u[p] = pair_sums of rows 2p, 2p+1 -> G[label], lane c = row c.
inline void tree4(const __m512i u[8], __m512i G[4]) {
    __m512i v[4];
    for (int q = 0; q < 4; ++q)  // rows 4q..4q+3; lanes: [low(a), high(a), low(b), high(b)]
        v[q] = _mm512_add_epi32(_mm512_shuffle_i32x4(u[2 * q], u[2 * q + 1], 0x88),
                                _mm512_shuffle_i32x4(u[2 * q], u[2 * q + 1], 0xDD));
    // v[q] dword of (label g, local row i): 4 * (2 * (i / 2) + g / 2) + i % 2 + 2 * (g % 2)
    // X = [label g rows 0-7 | label g+1 rows 0-7] from (v0, v1) (or rows 8-15 from (v2, v3))
    alignas(64) static constexpr int32_t kIx01[16] = {0, 1, 8, 9, 16, 17, 24, 25, 2, 3, 10, 11, 18, 19, 26, 27};
    alignas(64) static constexpr int32_t kIx23[16] = {4, 5, 12, 13, 20, 21, 28, 29, 6, 7, 14, 15, 22, 23, 30, 31};
    const __m512i ix01 = _mm512_load_si512(kIx01), ix23 = _mm512_load_si512(kIx23);
    const __m512i X01 = _mm512_permutex2var_epi32(v[0], ix01, v[1]), X23 = _mm512_permutex2var_epi32(v[2], ix01, v[3]);
    const __m512i Y01 = _mm512_permutex2var_epi32(v[0], ix23, v[1]), Y23 = _mm512_permutex2var_epi32(v[2], ix23, v[3]);
    G[0] = _mm512_shuffle_i64x2(X01, X23, 0x44);
    G[1] = _mm512_shuffle_i64x2(X01, X23, 0xEE);
    G[2] = _mm512_shuffle_i64x2(Y01, Y23, 0x44);
    G[3] = _mm512_shuffle_i64x2(Y01, Y23, 0xEE);
}

// The 16-byte headers of 16 rows' blocks (rows at p[c]) as 4 vectors, lane c = dword k of row c.
inline void headers16(const uint8_t* const* p, int64_t off, __m512i T[4]) {
    __m512i Z[4];
    for (int i = 0; i < 4; ++i) {
        __m512i z = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[i] + off)));
        z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[i + 4] + off)), 1);
        z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[i + 8] + off)), 2);
        Z[i] = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[i + 12] + off)), 3);
    }
    const __m512i a0 = _mm512_unpacklo_epi32(Z[0], Z[1]), a1 = _mm512_unpackhi_epi32(Z[0], Z[1]);
    const __m512i a2 = _mm512_unpacklo_epi32(Z[2], Z[3]), a3 = _mm512_unpackhi_epi32(Z[2], Z[3]);
    T[0] = _mm512_unpacklo_epi64(a0, a2);
    T[1] = _mm512_unpackhi_epi64(a0, a2);
    T[2] = _mm512_unpacklo_epi64(a1, a3);
    T[3] = _mm512_unpackhi_epi64(a1, a3);
}

inline __m512 half_lo(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)); }
inline __m512 byte_f(__m512i v, int j) {
    return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 8 * j), _mm512_set1_epi32(0xFF)));
}

template <bool Five>
struct G45_K {
    static constexpr int kSbElems = 256, kSteps = 2, kBytes = Five ? 176 : 144, kQs = Five ? 48 : 16;
    static constexpr bool kMin = true;
    static constexpr int kShift = -1;
    static constexpr int kGranOf[4] = {0, 1, 2, 3};  // granule (within the step) of each label
    // ws[8], wm[8]: d*sc_j and dmin*m_j of the super-block, lane c = row c.
    static void scales(const uint8_t* const* w, int64_t sb, __m512* ws, __m512* wm) {
        __m512i T[4];
        headers16(w, sb * kBytes, T);
        const __m512 d = half_lo(T[0]), dmin = half_lo(_mm512_srli_epi32(T[0], 16));
        const __m512i c3f = _mm512_set1_epi32(0x3f3f3f3f), c0f = _mm512_set1_epi32(0x0f0f0f0f),
                      c30 = _mm512_set1_epi32(0x30303030);
        const __m512i sc_lo = _mm512_and_si512(T[1], c3f), m_lo = _mm512_and_si512(T[2], c3f);
        const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(T[3], c0f), _mm512_and_si512(_mm512_srli_epi32(T[1], 2), c30));
        const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(T[3], 4), c0f),
                                             _mm512_and_si512(_mm512_srli_epi32(T[2], 2), c30));
        for (int j = 0; j < 4; ++j) {
            ws[j] = _mm512_mul_ps(byte_f(sc_lo, j), d);
            ws[4 + j] = _mm512_mul_ps(byte_f(sc_hi, j), d);
            wm[j] = _mm512_mul_ps(byte_f(m_lo, j), dmin);
            wm[4 + j] = _mm512_mul_ps(byte_f(m_hi, j), dmin);
        }
    }
    // Activation bytes for step s: L = values [128s, +32) ++ [128s+64, +32), H = the other two.
    static void act(const int8_t* xq, int64_t sb, int s, __m512i& xL, __m512i& xH) {
        const int8_t* x = xq + 256 * sb + 128 * s;
        xL = cat256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 64)));
        xH = cat256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 96)));
    }
    static void levels(const uint8_t* row, int64_t sb, int s, __m512i& L, __m512i& H) {
        const uint8_t* b = row + sb * kBytes;
        const __m512i v = _mm512_loadu_si512(b + kQs + 64 * s);
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        L = _mm512_and_si512(v, m4);
        H = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if constexpr (Five) {
            // qh bit 2*chunk (low nibbles) / 2*chunk+1 (high) of chunks 2s, 2s+1
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)));
            const __m512i bl = cat256(_mm256_set1_epi8(static_cast<char>(1 << (4 * s))), _mm256_set1_epi8(static_cast<char>(1 << (4 * s + 2))));
            const __m512i bh = cat256(_mm256_set1_epi8(static_cast<char>(1 << (4 * s + 1))), _mm256_set1_epi8(static_cast<char>(1 << (4 * s + 3))));
            const __m512i sixteen = _mm512_set1_epi8(16);
            L = _mm512_mask_add_epi8(L, _mm512_test_epi8_mask(qh, bl), L, sixteen);
            H = _mm512_mask_add_epi8(H, _mm512_test_epi8_mask(qh, bh), H, sixteen);
        }
    }
};

struct G8_0 {  // 4 blocks (128 values) per step; the engine is gemv16_q80
    static constexpr int kSbElems = 128, kSteps = 1, kBytes = 136;
    static constexpr bool kMin = false;
    static constexpr int kShift = 7;
    static void scales(const uint8_t* const* w, int64_t sb, __m512* ws, __m512*, __m512i rows, const uint8_t* base) {
        (void)w;
        for (int b = 0; b < 4; ++b)
            ws[b] = half_lo(_mm512_i32gather_epi32(rows, base + sb * kBytes + 34 * b, 1));
    }
};



// The 16 weight rows n.. of a decode GEMV: their pointers and, for gathers, their byte offsets
// from row n. Rows past nc re-read row n (their lanes are computed but never stored).
struct Rows16 {
    const uint8_t* w[16];
    alignas(64) int32_t off[16];
    Rows16(const MatmulArgs& a, int64_t n, int nc) {
        for (int c = 0; c < 16; ++c) {
            const int64_t cc = c < nc ? c : 0;
            w[c] = static_cast<const uint8_t*>(a.w) + (n + cc) * static_cast<int64_t>(a.w_row_stride);
            off[c] = static_cast<int32_t>(cc * static_cast<int64_t>(a.w_row_stride));  // callers check 15 * stride fits
        }
    }
    __m512i offsets() const { return _mm512_load_si512(off); }
};

template <class G>
void gemv16(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    const Rows16 rw(a, n, nc);
    const uint8_t* const* w = rw.w;
    const __m512i rows = rw.offsets();
    const int64_t nsb = a.K / G::kSbElems;
    constexpr int kGran = G::kSbElems / 32;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const PanelShare ps = panel_share(a, n, sb, nsb);
        __m512 ws[kGran], wm[kGran];
        if constexpr (G::kMin) G::scales(w, sb, ws, wm);
        else G::scales(w, sb, ws, wm, rows, w[0]);
        for (int s = 0; s < G::kSteps; ++s) {
            __m512i xL, xH, u[8], Gs[4];
            G::act(x.qs, sb, s, xL, xH);
            for (int p = 0; p < 8; ++p) {
                prefetch_share(ps, 8 * s + p, 8 * G::kSteps);
                __m512i L0, H0, L1, H1;
                G::levels(w[2 * p], sb, s, L0, H0);
                G::levels(w[2 * p + 1], sb, s, L1, H1);
                const __m512i z = _mm512_setzero_si512();
                u[p] = pair_sums(_mm512_dpbusd_epi32(z, L0, xL), _mm512_dpbusd_epi32(z, H0, xH),
                                 _mm512_dpbusd_epi32(z, L1, xL), _mm512_dpbusd_epi32(z, H1, xH));
            }
            tree4(u, Gs);
            for (int gi = 0; gi < 4; ++gi) {  // granules of the step in K order
                int label = 0;
                for (int l = 0; l < 4; ++l)
                    if (G::kGranOf[l] == gi) label = l;
                const int k = 4 * s + gi;                       // granule within the super-block
                const int64_t g = sb * kGran + k;               // granule within the row
                __m512i I = Gs[label];
                if constexpr (G::kShift >= 0)
                    I = _mm512_add_epi32(I, _mm512_set1_epi32((x.nsum[8 * g] + x.nsum[8 * g + 4]) * (1 << G::kShift)));
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(ws[k], _mm512_set1_ps(x.dxv[8 * g])), acc);
                if constexpr (G::kMin) acc = _mm512_fnmadd_ps(wm[k], _mm512_set1_ps(x.dxs[g]), acc);
            }
        }
    }
    store_row16(a, r, n, nc, acc);
}

// Q4_K without the pair tree: per row and step, the low nibbles (v & 0x0F) and the high nibbles
// kept in place (v & 0xF0 = 16 x level: the granule sums come out x16, exact, and are shifted back
// after the reduction) are regrouped by two 128-bit shuffles so that lane k of both vectors holds
// the same granule (first / second 16 values), so the two vpdpbusd accumulate into one vector per
// row and granule_sums reduces 16 rows to the 4 granules of the step. 128-bit lanes after the
// shuffles: [g 4s, g 4s+2, g 4s+1 (x16), g 4s+3 (x16)] (g = granule within the super-block).
struct G4_K1 {
    static constexpr int kSbElems = 256, kSteps = 2, kBytes = 144, kQs = 16;
    static void act(const int8_t* xq, int64_t sb, int s, __m512i& xA, __m512i& xB) {
        // granules 4s..4s+3 at x + 32 (g - 4s): xA = first 16 values of g 4s, 4s+2, 4s+1, 4s+3; xB = second 16
        const int8_t* x = xq + 256 * sb + 128 * s;
        const __m512i x0 = _mm512_loadu_si512(x), x1 = _mm512_loadu_si512(x + 64);  // 128-bit lanes: g0a g0b g1a g1b | g2a ...
        const __m512i a02 = _mm512_shuffle_i64x2(x0, x1, 0x88), b02 = _mm512_shuffle_i64x2(x0, x1, 0xDD);
        // a02 = [g0a g1a g2a g3a] -> [g0a g2a g1a g3a]
        xA = _mm512_shuffle_i64x2(a02, a02, 0xD8);
        xB = _mm512_shuffle_i64x2(b02, b02, 0xD8);
    }
    static __m512i dot(const uint8_t* row, int64_t sb, int s, __m512i xA, __m512i xB) {
        const __m512i v = _mm512_loadu_si512(row + sb * kBytes + kQs + 64 * s);
        const __m512i lo = _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
        const __m512i hi = _mm512_and_si512(v, _mm512_set1_epi8(static_cast<char>(0xF0)));
        const __m512i A = _mm512_shuffle_i64x2(lo, hi, 0x88), B = _mm512_shuffle_i64x2(lo, hi, 0xDD);
        return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), A, xA), B, xB);
    }
};

void gemv16_q4k(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    using G = G4_K1;
    const Rows16 rw(a, n, nc);
    const uint8_t* const* w = rw.w;
    const int64_t nsb = a.K / 256;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const PanelShare ps = panel_share(a, n, sb, nsb);
        __m512 ws[8], wm[8];
        G45_K<false>::scales(w, sb, ws, wm);
        for (int s = 0; s < G::kSteps; ++s) {
            __m512i xA, xB, dp[16], R[4];
            G::act(x.qs, sb, s, xA, xB);
            for (int c = 0; c < 16; ++c) {
                prefetch_share(ps, 16 * s + c, 16 * G::kSteps);
                dp[c] = G::dot(w[c], sb, s, xA, xB);
            }
            granule_sums(dp, R);
            // R[0] = g 4s, R[1] = g 4s+2, R[2] = g 4s+1 (x16), R[3] = g 4s+3 (x16)
            const __m512i I4[4] = {R[0], _mm512_srai_epi32(R[2], 4), R[1], _mm512_srai_epi32(R[3], 4)};
            for (int gi = 0; gi < 4; ++gi) {
                const int k = 4 * s + gi;
                const int64_t g = sb * 8 + k;
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I4[gi]), _mm512_mul_ps(ws[k], _mm512_set1_ps(x.dxv[8 * g])), acc);
                acc = _mm512_fnmadd_ps(wm[k], _mm512_set1_ps(x.dxs[g]), acc);
            }
        }
    }
    store_row16(a, r, n, nc, acc);
}

// Q8_0 likewise: per 128-value step (4 blocks) the two 64-byte level vectors [b0 b1] and [b2 b3]
// are regrouped into first / second 16 values of each block, one vpdpbusd chain per row, then
// granule_sums: R[h] = block h of the step (lane c = row c).
void gemv16_q80(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    const Rows16 rw(a, n, nc);
    const uint8_t* const* w = rw.w;
    const __m512i rows = rw.offsets();
    const int64_t nsb = a.K / 128;
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512 acc = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const PanelShare ps = panel_share(a, n, sb, nsb);
        __m512 ws[4];
        G8_0::scales(w, sb, ws, nullptr, rows, w[0]);
        const __m512i x0 = _mm512_loadu_si512(x.qs + 128 * sb), x1 = _mm512_loadu_si512(x.qs + 128 * sb + 64);
        const __m512i xA = _mm512_shuffle_i64x2(x0, x1, 0x88), xB = _mm512_shuffle_i64x2(x0, x1, 0xDD);
        __m512i dp[16], R[4];
        for (int c = 0; c < 16; ++c) {
            prefetch_share(ps, c, 16);
            const uint8_t* b = w[c] + sb * G8_0::kBytes;
            const __m512i L = _mm512_xor_si512(cat256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)),
                                                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 36))), flip);
            const __m512i H = _mm512_xor_si512(cat256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 70)),
                                                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 104))), flip);
            const __m512i A = _mm512_shuffle_i64x2(L, H, 0x88), B = _mm512_shuffle_i64x2(L, H, 0xDD);
            dp[c] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), A, xA), B, xB);
        }
        granule_sums(dp, R);
        for (int k = 0; k < 4; ++k) {
            const int64_t g = sb * 4 + k;
            const __m512i I = _mm512_add_epi32(R[k], _mm512_set1_epi32((x.nsum[8 * g] + x.nsum[8 * g + 4]) * 128));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(ws[k], _mm512_set1_ps(x.dxv[8 * g])), acc);
        }
    }
    store_row16(a, r, n, nc, acc);
}

// Q6_K: 64-value units (16-value granules = the 4 128-bit lanes of one vpdpbusd), the -32 offset
// folded into the accumulator's start (ActQ8's nsum of the unit, lane 4i = -sum of granule i, x32),
// the 16 rows' scales from a 4 x 4 transposition of their int8 scale bytes and one gather of d.
void gemv16_q6k(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    const Rows16 rw(a, n, nc);
    const uint8_t* const* w = rw.w;
    const __m512i rows = rw.offsets();
    const int64_t nsb = a.K / 256;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const PanelShare ps = panel_share(a, n, sb, nsb);
        __m512i T[4];
        headers16(w, sb * 210 + 192, T);  // T[k] lane c: scales 4k..4k+3 of row c
        // d: bytes 208-209, read as the high half of the dword at 206 (stays inside the block)
        const __m512 d = half_lo(_mm512_srli_epi32(_mm512_i32gather_epi32(rows, w[0] + sb * 210 + 206, 1), 16));
        for (int u = 0; u < 4; ++u) {
            const int64_t U = sb * 4 + u;
            const __m512i init = _mm512_slli_epi32(_mm512_loadu_si512(x.nsum + 16 * U), 5);
            const __m512i xq = _mm512_loadu_si512(x.qs + 64 * U);
            __m512i dp[16], R[4];
            DQ6_K::State st;
            for (int c = 0; c < 16; ++c) {
                prefetch_share(ps, 16 * u + c, 64);
                dp[c] = _mm512_dpbusd_epi32(init, DQ6_K::levels(st, w[c], sb, u, 0), xq);
            }
            granule_sums(dp, R);
            for (int h = 0; h < 4; ++h) {
                const int j = 4 * u + h;  // granule within the super-block
                const int64_t g = U * 4 + h;
                const __m512 sc = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(T[j / 4], 24 - 8 * (j % 4)), 24));
                const __m512 ws = _mm512_mul_ps(sc, d);
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(R[h]), _mm512_mul_ps(ws, _mm512_set1_ps(x.dxv[4 * g])), acc);
            }
        }
    }
    store_row16(a, r, n, nc, acc);
}

template <class D>
struct Gemv {
    using G = void;
};
template <>
struct Gemv<DQ45_K<false>> {
    using G = G45_K<false>;
};
template <>
struct Gemv<DQ45_K<true>> {
    using G = G45_K<true>;
};
template <>
struct Gemv<DQ8_0> {
    using G = G8_0;
};

struct PanelScratch {
    std::vector<unsigned char> buf;
};
thread_local PanelScratch tls_panel;

template <class D>
void qmm512(const MatmulArgs& a) {
    static_assert(!D::kMin || D::kG == 32, "min term is applied per granule");
    static_assert(!min16_of<D>() || D::kG == 16, "per-16 min term is applied per granule");
    size_t act_stride = 0;
    const unsigned char* act = qmm_activations(a, Isa::Avx512, &act_stride);
    const int64_t nblocks = D::kSbElems == 256 ? a.K / 256 : a.K / 32;
    const int64_t nsb = D::kSbElems == 256 ? a.K / 256 : (a.K / 32 + 1) / 2;
    if (a.m <= 2) {
        using G = typename Gemv<D>::G;
        bool fast = false;
        if constexpr (!std::is_void_v<G>)
            fast = a.K % G::kSbElems == 0 && 15 * static_cast<int64_t>(a.w_row_stride) <= INT32_MAX;
        for (int64_t r = 0; r < a.m; ++r) {
            const ref::ActQ8Row x = ref::act_q8_row(const_cast<unsigned char*>(act + r * act_stride), a.K);
            for (int64_t n = a.n0; n < a.n1; n += 16) {
                const int nc = static_cast<int>(a.n1 - n >= 16 ? 16 : a.n1 - n);
                if constexpr (!std::is_void_v<G>) {
                    if (fast) {
                        if constexpr (std::is_same_v<D, DQ45_K<false>>) gemv16_q4k(a, x, r, n, nc);
                        else if constexpr (std::is_same_v<D, DQ8_0>) gemv16_q80(a, x, r, n, nc);
                        else gemv16<G>(a, x, r, n, nc);
                        continue;
                    }
                }
                if constexpr (std::is_same_v<D, DQ6_K>) {
                    if (15 * static_cast<int64_t>(a.w_row_stride) <= INT32_MAX) {
                        gemv16_q6k(a, x, r, n, nc);
                        continue;
                    }
                }
                direct_row<D>(a, x, r, n, nc, nblocks, nsb);
            }
        }
        return;
    }
    // Two panels (32 weight rows) per pass over the activation rows: per 4 values, 2 panel loads
    // and MR broadcasts feed 2 x MR vpdpbusd.
    const int64_t Kp = nsb * D::kSbElems;
    const size_t qb = static_cast<size_t>(Kp / 4) * 64, wsb = static_cast<size_t>(Kp / 16) * 64,
                 wmb = static_cast<size_t>(Kp / 16) * 64, pb = qb + wsb + wmb;
    if (tls_panel.buf.size() < 2 * pb + 64) tls_panel.buf.resize(2 * pb + 64);
    unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(tls_panel.buf.data()) + 63) & ~uintptr_t{63});
    Panel p[2];
    for (int j = 0; j < 2; ++j)
        p[j] = Panel{reinterpret_cast<__m512i*>(base + j * pb), reinterpret_cast<float*>(base + j * pb + qb),
                     reinterpret_cast<float*>(base + j * pb + qb + wsb)};
    for (int64_t n = a.n0; n < a.n1; n += 32) {
        int nc[2];
        nc[0] = static_cast<int>(a.n1 - n >= 16 ? 16 : a.n1 - n);
        nc[1] = static_cast<int>(a.n1 - n - 16 >= 16 ? 16 : (a.n1 - n - 16 > 0 ? a.n1 - n - 16 : 0));
        repack<D>(a, n, nc[0], nblocks, nsb, p[0]);
        if (nc[1] > 0) {
            repack<D>(a, n + 16, nc[1], nblocks, nsb, p[1]);
            rows_all<D, 2>(a, act, act_stride, n, nc, p);
        } else {
            rows_all<D, 1>(a, act, act_stride, n, nc, p);
        }
    }
}

}  // namespace

void quantize_act_rows_avx512(const float* x, int64_t ldx, int64_t m, int64_t K, void* out, size_t stride) {
    const int64_t Kp = ref::act_q8_padded(K);
    const size_t bytes = ref::act_q8_row_bytes(K);
    for (int64_t r = 0; r < m; ++r) {
        const float* xr = x + r * ldx;
        void* o = static_cast<char*>(out) + r * stride;
        std::memset(o, 0, bytes);
        const ref::ActQ8Row q = ref::act_q8_row(o, K);
        for (int64_t g = 0; g < Kp / 32; ++g) {
            const int64_t i0 = 32 * g;
            const int64_t n = K - i0 >= 32 ? 32 : (K > i0 ? K - i0 : 0);
            const __mmask16 m0 = n >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1u);
            const __mmask16 m1 = n >= 32 ? 0xFFFF : (n > 16 ? static_cast<__mmask16>((1u << (n - 16)) - 1u) : 0);
            const __m512 v0 = _mm512_maskz_loadu_ps(m0, xr + i0);
            const __m512 v1 = _mm512_maskz_loadu_ps(m1, xr + i0 + 16);
            const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
            const float d = amax >= 1e-30f ? amax / 127.0f : 0.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            const __m512 vid = _mm512_set1_ps(id);
            constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
            const __m512i q0 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v0, vid), kRound));
            const __m512i q1 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v1, vid), kRound));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(q.qs + i0), _mm512_cvtepi32_epi8(q0));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(q.qs + i0 + 16), _mm512_cvtepi32_epi8(q1));
            const int32_t s0 = _mm512_reduce_add_epi32(q0), s1 = _mm512_reduce_add_epi32(q1);
            const int64_t u = g / 2, h = g % 2;
            _mm256_storeu_ps(q.dxv + 16 * u + 8 * h, _mm256_set1_ps(d));
            q.nsum[16 * u + 8 * h + 0] = -s0;
            q.nsum[16 * u + 8 * h + 4] = -s1;
            q.dxs[g] = d * static_cast<float>(s0 + s1);
        }
    }
}

MatmulFn qmm_avx512_kernel(DType t) {
    switch (t) {
        case DType::Q8_0: return qmm512<DQ8_0>;
        case DType::Q4_0: return qmm512<DQ4_0>;
        case DType::Q4_K: return qmm512<DQ45_K<false>>;
        case DType::Q5_K: return qmm512<DQ45_K<true>>;
        case DType::Q6_K: return qmm512<DQ6_K>;
        case DType::Q4_1: return qmm512<DLegacy<DType::Q4_1>>;
        case DType::Q5_0: return qmm512<DLegacy<DType::Q5_0>>;
        case DType::Q5_1: return qmm512<DLegacy<DType::Q5_1>>;
        case DType::IQ4_NL: return qmm512<DIQ4_NL>;
        case DType::IQ4_XS: return qmm512<DIQ4_XS>;
        case DType::Q3_K: return qmm512<DQ3_K>;
        case DType::Q2_K: return qmm512<DQ2_K>;
        case DType::IQ2_XXS: return qmm512<DIQ2_XXS>;
        case DType::IQ2_XS: return qmm512<DIQ2_XS>;
        case DType::IQ2_S: return qmm512<DIQ2_S>;
        case DType::IQ3_XXS: return qmm512<DIQ3_XXS>;
        case DType::IQ3_S: return qmm512<DIQ3_S>;
        case DType::IQ1_S: return qmm512<DIQ1_S>;
        case DType::IQ1_M: return qmm512<DIQ1_M>;
        case DType::MXFP4: return qmm512<DMXFP4>;
        case DType::TQ2_0: return qmm512<DTQ2_0>;
        default: return nullptr;
    }
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

}  // namespace moe::kernels
