// AVX-512 VBMI decode GEMVs (m <= 2 calls) of the 3-bit grid IQ types: the grid is looked up in
// registers (vpermi2b over a code table), not by scalar loads per entry as in direct_row's
// DIQ3_XXS / DIQ3_S decoders (qmatmul_avx512_iq.cpp), which stay the prefill path and the path of
// CPUs without AVX512_VBMI / BITALG / GFNI. Same pattern as gemv16_iq2xxs
// (qmatmul_avx512_kq_gemv.cpp): 16 weight rows at a time against the activation row quantized once
// (Q8_K), unsigned magnitudes against activations negated where the weight's sign is set (vpdpbusd,
// |x| <= 127, so the integer sums are exact and equal the levels-and-offset chain's), the rows'
// sums reduced to one vector per 32-value granule (lane c = row c), then the f32 chain of
// qmatmul.h per granule in K order: the same bits as the scalar path
// (tests/kernels/test_matmul_quant.cpp DecodeGemvEqualsBatchedAndScalar).
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

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2,bmi2,avx512vbmi,avx512bitalg,gfni")
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm*_undefined_* helpers (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/qmatmul_avx512.h"

namespace moe::kernels::avx512 {

namespace {

// A grid of 4 magnitudes from 8 levels per entry (ref::kIq3xxsGrid, ref::kIq3sGrid) as 3-bit level
// codes: lo[e] = c0 | c1 << 4, hi[e] = c2 | c3 << 4 (c_j: the level of element j), N entries; the
// 8 levels as the first bytes of a vpshufb table (a nibble with bit 3 clear indexes it directly).
template <int N>
struct Grid4Codes {
    alignas(64) uint8_t lo[N], hi[N], levels[16];
    explicit Grid4Codes(const uint32_t* grid) : levels{} {
        int nl = 0;
        for (int e = 0; e < N; ++e) {
            unsigned c[4];
            for (int j = 0; j < 4; ++j) {
                const uint8_t m = static_cast<uint8_t>(grid[e] >> (8 * j));
                int l = 0;
                while (l < nl && levels[l] != m) ++l;
                if (l == nl) levels[nl++] = m;  // first-seen order; the grids have 8 levels
                c[j] = static_cast<unsigned>(l);
            }
            lo[e] = static_cast<uint8_t>(c[0] | c[1] << 4);
            hi[e] = static_cast<uint8_t>(c[2] | c[3] << 4);
        }
    }
};

// 64 level codes per vector (byte p = the code of the element j of entry p that the caller
// selected) -> the 4 element streams of 64 entries: A[j] byte p = magnitude of element j of entry p.
inline void magnitudes4(__m512i lo, __m512i hi, __m512i lv, __m512i A[4]) {
    // bit 7 of every byte stays clear (codes < 8), so vpshufb reads the low nibble; a 16-bit shift
    // by 4 brings each byte's high nibble down (its new high nibble is the next byte's code, ignored)
    A[0] = _mm512_shuffle_epi8(lv, lo);
    A[1] = _mm512_shuffle_epi8(lv, _mm512_srli_epi16(lo, 4));
    A[2] = _mm512_shuffle_epi8(lv, hi);
    A[3] = _mm512_shuffle_epi8(lv, _mm512_srli_epi16(hi, 4));
}

// The super-block's 256 activations as four streams matching magnitudes4: X[j] lane u byte p =
// activation 64 u + 4 p + j (vpermb per 64-value unit, then a 4 x 4 transposition of 128-bit lanes).
inline void act_streams4(const int8_t* xq, __m512i X[4]) {
    const __m512i ctrl = _mm512_set_epi8(63, 59, 55, 51, 47, 43, 39, 35, 31, 27, 23, 19, 15, 11, 7, 3,
                                         62, 58, 54, 50, 46, 42, 38, 34, 30, 26, 22, 18, 14, 10, 6, 2,
                                         61, 57, 53, 49, 45, 41, 37, 33, 29, 25, 21, 17, 13, 9, 5, 1,
                                         60, 56, 52, 48, 44, 40, 36, 32, 28, 24, 20, 16, 12, 8, 4, 0);
    __m512i D[4];  // D[u] lane j: activations 64 u + 4 p + j, p = 0..15
    for (int u = 0; u < 4; ++u) D[u] = _mm512_permutexvar_epi8(ctrl, _mm512_loadu_si512(xq + 64 * u));
    granule_lanes(D, X);  // X[j] lane u = D[u] lane j
}

// Per 4 rows: dp[r] lane u = row r's 4 dword sums over values 64 u + 16 q .. + 15 (q = dword):
// dwords 0, 1 belong to granule 2 u, dwords 2, 3 to granule 2 u + 1. -> uA lane u dword r = row r's
// sum of granule 2 u, uB of granule 2 u + 1 (the layout granule_lanes takes).
inline void reduce4_pairs(const __m512i dp[4], __m512i& uA, __m512i& uB) {
    const __m512i t01 = _mm512_unpacklo_epi32(dp[0], dp[1]), h01 = _mm512_unpackhi_epi32(dp[0], dp[1]);
    const __m512i t23 = _mm512_unpacklo_epi32(dp[2], dp[3]), h23 = _mm512_unpackhi_epi32(dp[2], dp[3]);
    uA = _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
    uB = _mm512_add_epi32(_mm512_unpacklo_epi64(h01, h23), _mm512_unpackhi_epi64(h01, h23));
}

// Sign masks of one row's super-block against the streams: Y qword u = the 8 sign bytes of unit u
// (byte g: values 8 g .. 8 g + 7 of the unit). Mask j, bit 16 u + p = sign of value 64 u + 4 p + j
// = bit 8 (p / 2) + 4 (p % 2) + j of qword u; vpshufbitqmb reads it from qwords 2 u, 2 u + 1, so
// qword u is first copied to both (pq: qword u of the row's half of a 2-row vector -> 2 u, 2 u + 1).
struct SignSel {
    __m512i sel[4];
    SignSel() {
        alignas(64) uint8_t b[64];
        for (int j = 0; j < 4; ++j) {
            for (int i = 0; i < 64; ++i) {
                const int h = (i / 8) % 2, jj = i % 8, p = 8 * h + jj;
                b[i] = static_cast<uint8_t>(8 * (p / 2) + 4 * (p % 2) + j);
            }
            sel[j] = _mm512_load_si512(b);
        }
    }
};
const SignSel& sign_sel() {  // built once, shared by IQ3_XXS and IQ3_S
    static const SignSel t;
    return t;
}
inline void stream_signs(__m512i Y, __m512i pq, const SignSel& ss, const __m512i X[4], __m512i xs[4]) {
    const __m512i Yd = _mm512_permutexvar_epi64(pq, Y);
    for (int j = 0; j < 4; ++j) {
        const __mmask64 m = _mm512_bitshuffle_epi64_mask(Yd, ss.sel[j]);
        xs[j] = _mm512_mask_sub_epi8(X[j], m, _mm512_setzero_si512(), X[j]);
    }
}

// One row's super-block: 4 vpdpbusd of the magnitude streams against the signed activation streams.
inline __m512i row_dot(const __m512i A[4], const __m512i xs[4]) {
    __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), A[0], xs[0]);
    s = _mm512_dpbusd_epi32(s, A[1], xs[1]);
    s = _mm512_dpbusd_epi32(s, A[2], xs[2]);
    return _mm512_dpbusd_epi32(s, A[3], xs[3]);
}

// IQ3_XXS (98 bytes: d, qs[64] grid indices (4 magnitudes each), 8 x u32: 4 7-bit sign fields, the
// 4-bit scale s in bits 28-31; y = d (0.5 + s) / 2 x sign x magnitude). Per row and super-block:
// the 64 indices in one vector, looked up as 2 x (2 vpermi2b + blend) (low and high code bytes),
// 4 vpshufb to magnitudes, 4 vpdpbusd. Signs: per 2 rows one vpmultishiftqb puts the 8 fields of
// each unit in bytes and one vgf2p8affineqb adds the parity bit 7 (bit matrix); 4 vpshufbitqmb per
// row give the stream masks. The scale nibbles of 4 rows are collected by vpermi2b + blend.
const Grid4Codes<256>& iq3xxs_codes() {
    static const Grid4Codes<256> t(ref::kIq3xxsGrid);
    return t;
}
struct Iq3xxsConsts {
    // scale byte 16 k + 4 g + r (granule k or 4 + k, row r of group g, any g) <- byte 3 of u32 k
    // of row r's sign words, rows r at 64 (r / 2) + 32 (r % 2) of the two 2-row vectors
    __m512i slo, shi;
    Iq3xxsConsts() {
        alignas(64) uint8_t lo[64], hi[64];
        for (int p = 0; p < 64; ++p) {
            const int k = p / 16, r = p % 4, base = 64 * (r / 2) + 32 * (r % 2);
            lo[p] = static_cast<uint8_t>(base + 4 * k + 3);
            hi[p] = static_cast<uint8_t>(base + 4 * (k + 4) + 3);
        }
        slo = _mm512_load_si512(lo);
        shi = _mm512_load_si512(hi);
    }
};
const Iq3xxsConsts& iq3xxs_consts() {
    static const Iq3xxsConsts t;
    return t;
}

inline __m512i lookup256(const __m512i T[4], __m512i idx, __mmask64 b7) {
    return _mm512_mask_blend_epi8(b7, _mm512_permutex2var_epi8(T[0], idx, T[1]), _mm512_permutex2var_epi8(T[2], idx, T[3]));
}

// One row's super-block from its low / high code bytes: magnitudes, signed activations, 4 vpdpbusd.
inline __m512i iq3_row(__m512i lo, __m512i hi, __m512i lv, __m512i Y, __m512i pq, const SignSel& ss, const __m512i X[4]) {
    __m512i A[4], xs[4];
    magnitudes4(lo, hi, lv, A);
    stream_signs(Y, pq, ss, X, xs);
    return row_dot(A, xs);
}
// The 16 rows' granule sums (uA / uB of the 4 row groups, reduce4_pairs) through the f32 chain of
// qmatmul.h in K order; ws(ib): the 16 rows' f32 scale of granule ib.
template <class Ws>
inline void iq3_chain(const __m512i uA[4], const __m512i uB[4], Ws ws, const ref::ActQ8Row& x, int64_t sb, __m512& acc) {
    __m512i RA[4], RB[4];
    granule_lanes(uA, RA);  // RA[u] lane c: row c's sum of granule 2 u
    granule_lanes(uB, RB);  // RB[u]: granule 2 u + 1
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
        const __m512i I = ib % 2 ? RB[ib / 2] : RA[ib / 2];
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(ws(ib), _mm512_set1_ps(x.dxv[8 * (8 * sb + ib)])), acc);
    }
}

void iq3xxs_sb(const uint8_t* const* w, __m512i rows, const ref::ActQ8Row& x, int64_t sb, const PanelShare& ps, __m512& acc) {
    const int64_t off = sb * 98;
    const __m512 d = f16_lo(_mm512_i32gather_epi32(rows, w[0] + off, 1));
    const Grid4Codes<256>& tc = iq3xxs_codes();
    const Iq3xxsConsts& cc = iq3xxs_consts();
    const SignSel& ss = sign_sel();
    __m512i TL[4], TH[4];
    for (int i = 0; i < 4; ++i) {
        TL[i] = _mm512_load_si512(tc.lo + 64 * i);
        TH[i] = _mm512_load_si512(tc.hi + 64 * i);
    }
    const __m512i lv = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(tc.levels)));
    // per qword (u32 pair of a unit): bytes j = bits 7 j (j < 4) and 32 + 7 (j - 4): the 8 fields
    const __m512i fctrl = _mm512_set1_epi64(0x352E2720150E0700ll);
    const __m512i parity = _mm512_set1_epi64(0x010204081020407Fll);  // bits 0-6 kept, bit 7 = their parity
    const __m512i pq0 = _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3), pq1 = _mm512_setr_epi64(4, 4, 5, 5, 6, 6, 7, 7);
    __m512i X[4];
    act_streams4(x.qs + 256 * sb, X);
    __m512i uA[4], uB[4], SL = _mm512_setzero_si512(), SH = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
        prefetch_share(ps, g, 4);
        const int64_t o = off + 66;
        const __m512i P01 = cat256(load256(w[4 * g] + o), load256(w[4 * g + 1] + o));
        const __m512i P23 = cat256(load256(w[4 * g + 2] + o), load256(w[4 * g + 3] + o));
        const __m512i Y01 = _mm512_gf2p8affine_epi64_epi8(_mm512_multishift_epi64_epi8(fctrl, P01), parity, 0);
        const __m512i Y23 = _mm512_gf2p8affine_epi64_epi8(_mm512_multishift_epi64_epi8(fctrl, P23), parity, 0);
        const __mmask64 sm = 0x000F000F000F000Full << (4 * g);
        SL = _mm512_mask_blend_epi8(sm, SL, _mm512_permutex2var_epi8(P01, cc.slo, P23));
        SH = _mm512_mask_blend_epi8(sm, SH, _mm512_permutex2var_epi8(P01, cc.shi, P23));
        __m512i dp[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
            const __m512i idx = _mm512_loadu_si512(w[4 * g + r] + off + 2);
            const __mmask64 b7 = _mm512_movepi8_mask(idx);
            dp[r] = iq3_row(lookup256(TL, idx, b7), lookup256(TH, idx, b7), lv, r < 2 ? Y01 : Y23, r % 2 ? pq1 : pq0, ss, X);
        }
        reduce4_pairs(dp, uA[g], uB[g]);
    }
    iq3_chain(uA, uB, [&](int ib) {
        // 128-bit lane ib % 4 of SL / SH (a vpermd with a constant index once unrolled)
        const __m128i lane = _mm512_castsi512_si128(_mm512_permutexvar_epi32(
            _mm512_add_epi32(_mm512_set1_epi32(4 * (ib % 4)), _mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3)), ib < 4 ? SL : SH));
        const __m512 sc = _mm512_cvtepi32_ps(_mm512_srli_epi32(_mm512_cvtepu8_epi32(lane), 4));
        return _mm512_mul_ps(_mm512_mul_ps(d, _mm512_add_ps(sc, _mm512_set1_ps(0.5f))), _mm512_set1_ps(0.5f));
    }, x, sb, acc);
}

// IQ3_S (110 bytes: d, qs[64] low index bytes, qh[8] (bit 8 of index q = bit q of the 64 bits),
// signs[32] (value v negative: bit v of the 256 bits), scales[4] (nibble ib: the 4-bit s of granule
// ib, y = d (1 + 2 s) x sign x magnitude). As IQ3_XXS, with a 512-entry table: 2 x (4 vpermi2b +
// 3 blends, the last by the qh bits read as a mask) per row and super-block; the sign bytes are
// explicit (no parity step), d and the scale nibbles are gathered per 16 rows.
const Grid4Codes<512>& iq3s_codes() {
    static const Grid4Codes<512> t(ref::kIq3sGrid);
    return t;
}
void iq3s_sb(const uint8_t* const* w, __m512i rows, const ref::ActQ8Row& x, int64_t sb, const PanelShare& ps, __m512& acc) {
    const int64_t off = sb * 110;
    const __m512 d = f16_lo(_mm512_i32gather_epi32(rows, w[0] + off, 1));
    const __m512i SC = _mm512_i32gather_epi32(rows, w[0] + off + 106, 1);  // lane c: row c's 8 scale nibbles
    const Grid4Codes<512>& tc = iq3s_codes();
    const SignSel& ss = sign_sel();
    __m512i TL[8], TH[8];
    for (int i = 0; i < 8; ++i) {
        TL[i] = _mm512_load_si512(tc.lo + 64 * i);
        TH[i] = _mm512_load_si512(tc.hi + 64 * i);
    }
    const __m512i lv = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(tc.levels)));
    const __m512i pq0 = _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3), pq1 = _mm512_setr_epi64(4, 4, 5, 5, 6, 6, 7, 7);
    __m512i X[4];
    act_streams4(x.qs + 256 * sb, X);
    __m512i uA[4], uB[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
        prefetch_share(ps, g, 4);
        const int64_t o = off + 74;
        const __m512i Y01 = cat256(load256(w[4 * g] + o), load256(w[4 * g + 1] + o));
        const __m512i Y23 = cat256(load256(w[4 * g + 2] + o), load256(w[4 * g + 3] + o));
        __m512i dp[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
            const uint8_t* b = w[4 * g + r] + off;
            const __m512i idx = _mm512_loadu_si512(b + 2);
            uint64_t qh;
            std::memcpy(&qh, b + 66, 8);
            const __mmask64 b7 = _mm512_movepi8_mask(idx), b8 = static_cast<__mmask64>(qh);
            const __m512i lo = _mm512_mask_blend_epi8(b8, lookup256(TL, idx, b7), lookup256(TL + 4, idx, b7));
            const __m512i hi = _mm512_mask_blend_epi8(b8, lookup256(TH, idx, b7), lookup256(TH + 4, idx, b7));
            dp[r] = iq3_row(lo, hi, lv, r < 2 ? Y01 : Y23, r % 2 ? pq1 : pq0, ss, X);
        }
        reduce4_pairs(dp, uA[g], uB[g]);
    }
    iq3_chain(uA, uB, [&](int ib) {
        const __m512i s = _mm512_and_si512(_mm512_srli_epi32(SC, 4 * ib), _mm512_set1_epi32(0xF));
        return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(s, 1), _mm512_set1_epi32(1))));
    }, x, sb, acc);
}

}  // namespace

__attribute__((noinline)) void gemv16_iq3xxs(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    gemv16_k256<iq3xxs_sb>(a, x, r, n, nc);
}
__attribute__((noinline)) void gemv16_iq3s(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    gemv16_k256<iq3s_sb>(a, x, r, n, nc);
}

}  // namespace moe::kernels::avx512

#pragma GCC diagnostic pop
MOE_TARGET_POP
