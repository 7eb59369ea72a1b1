// AVX-512 VNNI kernels for Q8_0, Q4_0, Q4_K, Q5_K and Q6_K: register decoders for the engine in
// qmatmul_avx512.h and the specialised decode GEMVs of these types.
#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <cstdint>
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
#include "kernels/cpu/isa_target.h"

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2,bmi2")
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm*_undefined_* helpers (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/qmatmul_avx512.h"

namespace moe::kernels {

namespace {
using namespace avx512;

// ---------------------------------------------------------------- per-type decoders
// A super-block is 256 values for the K-quants and one 64-value unit (2 blocks) for Q8_0/Q4_0.
// begin(): per super-block state; levels(): the 64 unsigned levels of unit u of the super-block;
// scales() (Q8_0/Q4_0): the f32 scale of each kG-value granule of the super-block (ws[k * 16]);
// scale_vec() (K-quants): the granule scales in lanes 0.. and, for Q4_K/Q5_K, dmin*m of each
// 32-value group in lanes 8..15, as one zmm (transposed to [granule][row] by pack_scales).
struct DQ8_0 {
    static constexpr int kShift = 7, kUnits = 1, kSbElems = 64, kG = 32, kBlockBytes = 34;
    static constexpr bool kMin = false, kVecScales = false;
    static __m512 gather_scale(__m512i offs, const uint8_t* p) {  // f16 d: the low half of the dword at p
        return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(offs, p, 1)));
    }
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
    static constexpr int kShift = 3, kUnits = 1, kSbElems = 64, kG = 32, kBlockBytes = 18;
    static constexpr bool kMin = false, kVecScales = false;
    static __m512 gather_scale(__m512i offs, const uint8_t* p) { return DQ8_0::gather_scale(offs, p); }
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

inline __m512i byte_i(__m512i v, int j) { return _mm512_and_si512(_mm512_srli_epi32(v, 8 * j), _mm512_set1_epi32(0xFF)); }

// The super-block integer chain of a 16-row decode GEMV (qmatmul.h), lane c = row c: S += sc_k I_k
// per granule, then per super-block acc = fma(float(S), d * dx, acc) and, for Q4_K / Q5_K,
// acc = fma(float(M), dmin * dx, acc) with M = mins32(mp) (the word pairs of mins, as pack_scales).
struct SbIntScales {
    __m512i sc[16], mp[4];
    __m512 d, dmin;
};

// The 16-byte headers of 16 rows' Q4_K / Q5_K blocks at byte off (one 4 x 4 dword transposition,
// dwords16): sc[0..7], the mins as word pairs mp[0..3] (m_2k | m_2k+1 << 16), d and dmin, lane c =
// row c. The 6-bit fields as in get_scale_min_k4: bytes 0-3 / 4-7 of the scales hold sc/m 0..3 in
// their low 6 bits and the top 2 bits of sc/m 4..7; bytes 8-11 the low 4 bits of sc 4..7 (low
// nibble) and m 4..7.
inline void k45_scales16(const uint8_t* const* w, int64_t off, SbIntScales& s) {
    __m512i T[4];
    dwords16(w, off, 0xFFFF, T);
    s.d = f16_lo(T[0]);
    s.dmin = f16_lo(_mm512_srli_epi32(T[0], 16));
    const __m512i c3f = _mm512_set1_epi32(0x3f3f3f3f), c0f = _mm512_set1_epi32(0x0f0f0f0f),
                  c30 = _mm512_set1_epi32(0x30303030);
    const __m512i sc_lo = _mm512_and_si512(T[1], c3f), m_lo = _mm512_and_si512(T[2], c3f);
    const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(T[3], c0f), _mm512_and_si512(_mm512_srli_epi32(T[1], 2), c30));
    const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(T[3], 4), c0f),
                                         _mm512_and_si512(_mm512_srli_epi32(T[2], 2), c30));
    for (int j = 0; j < 4; ++j) {
        s.sc[j] = byte_i(sc_lo, j);
        s.sc[4 + j] = byte_i(sc_hi, j);
    }
    const __m512i lo = _mm512_set1_epi32(0xFF), hi = _mm512_set1_epi32(0xFF0000);
    for (int k = 0; k < 2; ++k) {  // bytes (2k, 2k+1) of m_lo / m_hi -> words (lo, hi)
        const int sh = 16 * k;
        s.mp[k] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(m_lo, sh), lo), _mm512_slli_epi32(_mm512_srli_epi32(m_lo, sh), 8), hi, 0xF8);
        s.mp[2 + k] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(m_hi, sh), lo), _mm512_slli_epi32(_mm512_srli_epi32(m_hi, sh), 8), hi, 0xF8);
    }
}

template <bool Five>
struct DQ45_K {
    static constexpr int kShift = -1, kUnits = 4, kSbElems = 256, kG = 32;
    static constexpr bool kMin = true, kVecScales = true, kSbInt = true;  // scales: scales16
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
    // pack_scales' [granule][column] vectors of 16 rows straight from their headers (a per-row
    // decode + transpose16 made the Q5_K panel repack 1.3x slower, docs/PERFORMANCE.md).
    static void scales16(const uint8_t* const* w, int64_t sb, float* ws, float* wm, float* wd) {
        SbIntScales s;
        k45_scales16(w, sb * kBytes, s);
        for (int k = 0; k < 8; ++k) _mm512_store_si512(ws + 16 * k, s.sc[k]);
        for (int k = 0; k < 4; ++k) _mm512_store_si512(wm + 16 * k, s.mp[k]);
        _mm512_store_ps(wd, s.d);
        _mm512_store_ps(wd + 16, s.dmin);
    }
};

struct DQ6_K {
    static constexpr int kShift = 5, kUnits = 4, kSbElems = 256, kG = 16;
    static constexpr bool kMin = false, kSbInt = true;
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
    static __m512i int_scales(const uint8_t* row, int64_t sb) {
        return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + sb * 210 + 192)));
    }
    static float sb_d(const uint8_t* row, int64_t sb) { return h2f(row + sb * 210 + 208); }
};

// ---------------------------------------------------------------- decode GEMV, 16 rows x 128 values
// For Q4_K/Q5_K (and Q8_0) the decode path works in steps of 128 values: per
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

template <bool Five>
struct G45_K {
    static constexpr int kSbElems = 256, kSteps = 2, kBytes = Five ? 176 : 144, kQs = Five ? 48 : 16;
    static constexpr int kGranOf[4] = {0, 1, 2, 3};  // granule (within the step) of each label
    static void scales(const uint8_t* const* w, int64_t sb, SbIntScales& s) { k45_scales16(w, sb * kBytes, s); }
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
    static constexpr int kBytes = 136;
};


template <class G>
void gemv16(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    const Rows16 rw(a, n, nc);
    const uint8_t* const* w = rw.w;
    const int64_t nsb = a.K / G::kSbElems;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const PanelShare ps = panel_share(a, n, sb, nsb);
        SbIntScales sc;
        G::scales(w, sb, sc);
        __m512i S = _mm512_setzero_si512();
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
                S = _mm512_add_epi32(S, _mm512_mullo_epi32(Gs[label], sc.sc[4 * s + gi]));
            }
        }
        const __m512 dx = _mm512_set1_ps(x.dxv[64 * sb]);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(sc.d, dx), acc);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mins32(sc.mp, x, sb)), _mm512_mul_ps(sc.dmin, dx), acc);
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
    static constexpr int kSteps = 2, kBytes = 144, kQs = 16;
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
        SbIntScales sc;
        G45_K<false>::scales(w, sb, sc);
        __m512i S = _mm512_setzero_si512();
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
            for (int gi = 0; gi < 4; ++gi) S = _mm512_add_epi32(S, _mm512_mullo_epi32(I4[gi], sc.sc[4 * s + gi]));
        }
        const __m512 dx = _mm512_set1_ps(x.dxv[64 * sb]);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(sc.d, dx), acc);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mins32(sc.mp, x, sb)), _mm512_mul_ps(sc.dmin, dx), acc);
    }
    store_row16(a, r, n, nc, acc);
}

// Q8_0 likewise: per 128-value step (4 blocks) the two 64-byte level vectors [b0 b1] and [b2 b3]
// are regrouped into first / second 16 values of each block, one vpdpbusd chain per row, then
// granule_sums: R[h] = block h of the step (lane c = row c). When K is not a multiple of 128
// (gpt-oss: 2880) the last step has 1-3 blocks: the missing ones are zero-filled (never read past
// the row) and their lanes ignored.
template <bool Tail>
inline void q80_step(const uint8_t* const* w, const ref::ActQ8Row& x, int64_t sb, int nbs, __m512i rows,
                     const PanelShare& ps, __m512& acc) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i xA, xB;
    act_step128(x.qs + 128 * sb, Tail ? nbs : 4, xA, xB);
    auto blk = [&](const uint8_t* b, int k) {
        return !Tail || k < nbs ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 34 * k + 2)) : _mm256_setzero_si256();
    };
    __m512i dp[16], R[4];
    for (int c = 0; c < 16; ++c) {
        prefetch_share(ps, c, 16);
        const uint8_t* b = w[c] + sb * G8_0::kBytes;
        const __m512i L = _mm512_xor_si512(cat256(blk(b, 0), blk(b, 1)), flip);
        const __m512i H = _mm512_xor_si512(cat256(blk(b, 2), blk(b, 3)), flip);
        const __m512i A = _mm512_shuffle_i64x2(L, H, 0x88), B = _mm512_shuffle_i64x2(L, H, 0xDD);
        dp[c] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), A, xA), B, xB);
    }
    granule_sums(dp, R);
    for (int k = 0; k < (Tail ? nbs : 4); ++k) {
        const int64_t g = sb * 4 + k;
        const __m512 ws = f16_lo(_mm512_i32gather_epi32(rows, w[0] + sb * G8_0::kBytes + 34 * k, 1));
        const __m512i I = _mm512_add_epi32(R[k], _mm512_set1_epi32((x.nsum[8 * g] + x.nsum[8 * g + 4]) * 128));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(ws, _mm512_set1_ps(x.dxv[8 * g])), acc);
    }
}

void gemv16_q80(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    const Rows16 rw(a, n, nc);
    const __m512i rows = rw.offsets();
    const int64_t nb = a.K / 32, nfull = nb / 4, nstep = (nb + 3) / 4;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nfull; ++sb) q80_step<false>(rw.w, x, sb, 4, rows, panel_share(a, n, sb, nstep), acc);
    if (nfull < nstep) q80_step<true>(rw.w, x, nfull, static_cast<int>(nb - 4 * nfull), rows, panel_share(a, n, nfull, nstep), acc);
    store_row16(a, r, n, nc, acc);
}

// The specialised decode GEMVs (16 rows x 128/256 values) and where they apply.
struct FastQ4K {
    static bool usable(const MatmulArgs& a) { return a.K % 256 == 0 && 15 * static_cast<int64_t>(a.w_row_stride) <= INT32_MAX; }
    static void run(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) { gemv16_q4k(a, x, r, n, nc); }
};
struct FastQ5K {
    static bool usable(const MatmulArgs& a) { return a.K % 256 == 0 && 15 * static_cast<int64_t>(a.w_row_stride) <= INT32_MAX; }
    static void run(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) { gemv16<G45_K<true>>(a, x, r, n, nc); }
};
struct FastQ80 {
    static bool usable(const MatmulArgs& a) { return 15 * static_cast<int64_t>(a.w_row_stride) <= INT32_MAX; }
    static void run(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) { gemv16_q80(a, x, r, n, nc); }
};
struct FastQ6K {
    static bool usable(const MatmulArgs& a) { return 15 * static_cast<int64_t>(a.w_row_stride) <= INT32_MAX; }
    static void run(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) { gemv16_q6k(a, x, r, n, nc); }
};

}  // namespace

MatmulFn qmm512_q8k_kernel(DType t) {
    switch (t) {
        case DType::Q8_0: return qmm512<DType::Q8_0, DQ8_0, FastQ80>;
        case DType::Q4_0: return qmm512<DType::Q4_0, DQ4_0>;
        case DType::Q4_K: return qmm512<DType::Q4_K, DQ45_K<false>, FastQ4K>;
        case DType::Q5_K: return qmm512<DType::Q5_K, DQ45_K<true>, FastQ5K>;
        case DType::Q6_K: return qmm512<DType::Q6_K, DQ6_K, FastQ6K>;
        default: return nullptr;
    }
}

}  // namespace moe::kernels

#pragma GCC diagnostic pop
MOE_TARGET_POP
