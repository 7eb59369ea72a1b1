// AVX-512 VNNI decode GEMVs (m <= 2 calls) of the low-bit K-quants Q2_K and Q3_K and of IQ4_XS and
// IQ2_XXS,
// the same pattern as gemv16_q4k / gemv16_q6k (qmatmul_avx512_q8k.cpp): 16 weight rows at a time
// against the activation row quantized once (Q8_K), one vpdpbusd per row and 64 values, the 16
// rows' sums reduced to one vector per granule (lane c = row c, granule_sums), and the scales of
// the 16 rows read straight into [granule][row] vectors (a 4 x 4 dword transposition of their
// header bytes, a gather of d) instead of the generic path's per-row scale vectors, 16 x 16
// transposes and per-unit level decoders (direct_row). The integer sums are exact and the f32 chain
// per output is the one of qmatmul.h in K order (Q2_K / Q3_K: the super-block integer chain, two
// f32 FMAs per 256 values; it cut the Q2_K GEMV 1.24x, Q3_K 1.06x, kernel alone, vs the per-granule
// f32 chain; on IQ4_XS the same change measured no gain, so it keeps the per-granule chain), so the bits equal the panel path and the scalar
// chain (tests/kernels/test_matmul_quant.cpp DecodeGemvEqualsBatchedAndScalar).
// Wired into the kernel table by qmatmul_avx512_legacy_k.cpp (Fast* structs there).
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

namespace moe::kernels::avx512 {

namespace {

// Q2_K / Q3_K super-block (256 values): value 128 h + 32 s + j (h = 0, 1; s = 0..3; j < 32) is the
// 2-bit field s of qs byte 32 h + j. One 64-byte load of qs holds all four fields; field s of
// the two halves is one vpdpbusd against xs[s] = activations [32 s, +32) ++ [128 + 32 s, +32), and
// its 128-bit lanes are the 16-value granules 2s, 2s+1, 8+2s, 9+2s. Fields 0-2 are used in place
// (v & (3 << 2s) = 4^s x level, sums shifted back exactly after the reduction).
// vgf2p8affineqb x, A, 0 (GFNI, called only where gemv_gfni_usable()): each byte of x times the 8x8
// bit matrix in the matching qword of A. Inline asm rather than the intrinsic, so that one template
// body serves the GFNI and the plain variant without a separate target region.
inline __m512i gf2p8affine(__m512i x, __m512i A) {
    __m512i r;
    asm("vgf2p8affineqb $0, %2, %1, %0" : "=v"(r) : "v"(x), "v"(A));
    return r;
}

inline void xs_q2(const int8_t* x, int s, __m512i& xs) { xs = cat256(load256(x + 32 * s), load256(x + 128 + 32 * s)); }

// Q2_K (84 bytes: scales[16], qs[64], d, dmin): y = d sc_j q - dmin m_j per 16 values (qmatmul.h's
// min-per-16 chain: acc = fma(I, d sc dx, acc); acc = fma(nsum, dmin m dx, acc)).
void q2k_sb(const uint8_t* const* w, __m512i rows, const ref::ActQ8Row& x, int64_t sb, const PanelShare& ps, __m512& acc) {
    const int64_t off = sb * 84;
    __m512i T[4];
    dwords16(w, off, 0xFFFF, T);  // T[k] lane c: scales 4k..4k+3 of row c
    const __m512i dd = _mm512_i32gather_epi32(rows, w[0] + off + 80, 1);
    const __m512 d = f16_lo(dd), dmin = f16_lo(_mm512_srli_epi32(dd, 16));
    const int8_t* xq = x.qs + 256 * sb;
    // The super-block integer chain (qmatmul.h): S = sum_j sc_j I_j, M = sum_j m_j nsum_j, exact in
    // int32 with vpdpwssd (per dword lo x lo + hi x hi of int16 words): the scale operand's high word
    // is 0 and its low word sc_j (or the pair (m_j, m_j+2)); I_j (|I_j| <= 16 x 3 x 128) and nsum
    // (|nsum| <= 16 x 128) fit int16. Then two f32 FMAs per super-block instead of two per granule.
    // S is accumulated after each step (integer: any order gives the same S), so no step's granule
    // sums stay live across steps (register pressure).
    const __m512i m4 = _mm512_set1_epi32(0xF);
    const auto scale = [&](int j) { return _mm512_and_si512(j % 4 ? _mm512_srli_epi32(T[j / 4], 8 * (j % 4)) : T[j / 4], m4); };
    __m512i S = _mm512_setzero_si512(), M = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int s = 0; s < 4; ++s) {
        __m512i xs;
        xs_q2(xq, s, xs);
        const __m512i msk = _mm512_set1_epi8(static_cast<char>(3 << (2 * s)));
        __m512i dp[16], R[4];
        prefetch_share(ps, s, 4);
#pragma GCC unroll 16
        for (int c = 0; c < 16; ++c) {
            const __m512i v = _mm512_loadu_si512(w[c] + off + 16);
            dp[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(v, msk), xs);
        }
        granule_sums(dp, R);
        // R[0..3]: granules 2s, 2s+1, 8+2s, 9+2s (x 4^s in place)
        S = _mm512_dpwssd_epi32(S, _mm512_srai_epi32(R[0], 2 * s), scale(2 * s));
        S = _mm512_dpwssd_epi32(S, _mm512_srai_epi32(R[1], 2 * s), scale(2 * s + 1));
        S = _mm512_dpwssd_epi32(S, _mm512_srai_epi32(R[2], 2 * s), scale(8 + 2 * s));
        S = _mm512_dpwssd_epi32(S, _mm512_srai_epi32(R[3], 2 * s), scale(9 + 2 * s));
    }
    // mins: bytes (m_4k, .., m_4k+3) of T[k]'s high nibbles as word pairs (m_4k, m_4k+2), (m_4k+1,
    // m_4k+3) against the broadcast pairs of the activations' nsum
    const int32_t* ns = x.nsum + 64 * sb;  // granule j: ns[4 j]
    const __m512i ff = _mm512_set1_epi32(0x00FF00FF);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
        const __m512i mm = _mm512_and_si512(_mm512_srli_epi32(T[k], 4), _mm512_set1_epi32(0x0F0F0F0F));
        const auto pair = [&](int j0) { return _mm512_set1_epi32(static_cast<int32_t>((static_cast<uint32_t>(ns[4 * j0]) & 0xFFFF) | (static_cast<uint32_t>(ns[4 * j0 + 8]) << 16))); };
        M = _mm512_dpwssd_epi32(M, _mm512_and_si512(mm, ff), pair(4 * k));
        M = _mm512_dpwssd_epi32(M, _mm512_srli_epi16(mm, 8), pair(4 * k + 1));
    }
    const __m512 dx = _mm512_set1_ps(x.dxv[64 * sb]);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d, dx), acc);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(M), _mm512_mul_ps(dmin, dx), acc);
}

// Q3_K (110 bytes: hmask[32], qs[64], scales[12], d): level = field + 4 x hmask bit (s for the
// first half, 4 + s for the second) of byte j, offset 4 (qmatmul.h shift 2). With GFNI (kGfni),
// one vgf2p8affineqb puts each byte's hmask bit at the level's bit 2 (x 4^s in place) and one
// vpternlogd merges it with the field: 2 ops per row and step instead of and + vptestmb + masked
// add (kernel alone +5-9 %, docs/PERFORMANCE.md). Same levels, same bits.
template <bool kGfni>
void q3k_sb(const uint8_t* const* w, __m512i rows, const ref::ActQ8Row& x, int64_t sb, const PanelShare& ps, __m512& acc) {
    const int64_t off = sb * 110;
    __m512i T[4];
    dwords16(w, off + 96, 0x0FFF, T);  // T[0..2] lane c: scales bytes 0-3, 4-7, 8-11 of row c
    // d: bytes 108-109, the high half of the dword at 106 (inside the block)
    const __m512 d = f16_lo(_mm512_srli_epi32(_mm512_i32gather_epi32(rows, w[0] + off + 106, 1), 16));
    // 6-bit scale j: low 4 bits = nibble j / 8 of scales[j % 8], high 2 bits = bits 2 (j / 4) of
    // scales[8 + j % 4] (ref::q3_k_scale); Sb byte b = scale 4k + b minus 32, as a signed byte, as
    // words E[k] = (s_4k, s_4k+2), O[k] = (s_4k+1, s_4k+3) per dword.
    // The super-block integer chain (qmatmul.h): S = sum_j sc_j I_j exact in int32 by vpdpwssd, the
    // scale operand a dword with high word 0 and low word sc_j, I_j a sign-extended int16 (|I_j| <=
    // 16 x 4 x 128); one f32 FMA per super-block. S is accumulated after each step (integer: any
    // order gives the same S), so no step's granule sums stay live across steps (register pressure).
    const __m512i c0f = _mm512_set1_epi32(0x0f0f0f0f), c30 = _mm512_set1_epi32(0x30303030), c20 = _mm512_set1_epi8(32);
    __m512i E[4], O[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
        const __m512i lo4 = _mm512_and_si512(k < 2 ? T[k] : _mm512_srli_epi32(T[k - 2], 4), c0f);
        const __m512i hi = k < 2 ? _mm512_slli_epi32(T[2], 4 - 2 * k) : _mm512_srli_epi32(T[2], 2 * k - 4);
        const __m512i Sb = _mm512_sub_epi8(_mm512_ternarylogic_epi32(lo4, hi, c30, 0xF8), c20);  // lo4 | (hi & 0x30), - 32
        E[k] = _mm512_srai_epi16(_mm512_slli_epi16(Sb, 8), 8);
        O[k] = _mm512_srai_epi16(Sb, 8);
    }
    // the scale operand of granule j = 4 k + i
    const auto scale = [&](int j) {
        const __m512i v = j % 2 ? O[j / 4] : E[j / 4];
        return (j % 4) < 2 ? _mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)) : _mm512_srli_epi32(v, 16);
    };
    __m512i S = _mm512_setzero_si512();
    const int8_t* xq = x.qs + 256 * sb;
#pragma GCC unroll 4
    for (int s = 0; s < 4; ++s) {
        __m512i xs;
        xs_q2(xq, s, xs);
        const int sh = s < 3 ? 2 * s : 0;  // fields 0-2 in place (x 4^s), field 3 shifted down
        const __m512i msk = _mm512_set1_epi8(static_cast<char>(3 << sh));
        const __m512i four = _mm512_set1_epi8(static_cast<char>(4 << sh));
        const __m512i bits = cat256(_mm256_set1_epi8(static_cast<char>(1 << s)), _mm256_set1_epi8(static_cast<char>(1 << (4 + s))));
        // GFNI: output bit 2 + sh of byte j = hmask bit s (first half) / 4 + s (second half): the
        // affine matrix's byte 7 - b is the input-bit mask of output bit b
        const int ob = 2 + sh;
        const __m512i aff = cat256(_mm256_set1_epi64x(static_cast<long long>(static_cast<uint64_t>(1u << s) << (8 * (7 - ob)))),
                                   _mm256_set1_epi64x(static_cast<long long>(static_cast<uint64_t>(1u << (4 + s)) << (8 * (7 - ob)))));
        // the -4 offset (x 4^s like the levels) as the start of every row's vpdpbusd: dword 0 of
        // 128-bit lane L = 4 x nsum of the lane's granule (the reduction adds it once per row)
        // (granules 2s, 2s+1 are lanes 8 (s % 2), +4 of ActQ8 nsum unit 4 sb + s / 2; 8+2s, 9+2s the
        // same lanes of unit 4 sb + 2 + s / 2)
        const int o = 8 * (s % 2);
        const __m512i pick = _mm512_setr_epi32(o, 0, 0, 0, o + 4, 0, 0, 0, 16 + o, 0, 0, 0, 20 + o, 0, 0, 0);
        const __m512i start = _mm512_slli_epi32(
            _mm512_maskz_permutex2var_epi32(0x1111, _mm512_loadu_si512(x.nsum + 16 * (4 * sb + s / 2)), pick,
                                            _mm512_loadu_si512(x.nsum + 16 * (4 * sb + 2 + s / 2))),
            2 + sh);
        __m512i dp[16], R[4];
        prefetch_share(ps, s, 4);
#pragma GCC unroll 16
        for (int c = 0; c < 16; ++c) {
            __m512i v = _mm512_loadu_si512(w[c] + off + 32);
            if (s == 3) v = _mm512_srli_epi16(v, 6);
            const __m512i hm = _mm512_broadcast_i64x4(load256(w[c] + off));
            __m512i lev;
            if constexpr (kGfni) {
                lev = _mm512_ternarylogic_epi32(v, msk, gf2p8affine(hm, aff), 0xEA);  // (v & msk) | H
            } else {
                const __m512i lo = _mm512_and_si512(v, msk);
                lev = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(hm, bits), lo, four);
            }
            dp[c] = _mm512_dpbusd_epi32(start, lev, xs);
        }
        granule_sums(dp, R);
        // R[0..3]: granules 2s, 2s+1, 8+2s, 9+2s (x 4^sh in place)
        S = _mm512_dpwssd_epi32(S, _mm512_srai_epi32(R[0], sh), scale(2 * s));
        S = _mm512_dpwssd_epi32(S, _mm512_srai_epi32(R[1], sh), scale(2 * s + 1));
        S = _mm512_dpwssd_epi32(S, _mm512_srai_epi32(R[2], sh), scale(8 + 2 * s));
        S = _mm512_dpwssd_epi32(S, _mm512_srai_epi32(R[3], sh), scale(9 + 2 * s));
    }
    // dx: Q8_K has one activation scale per 256 values (every granule of the super-block)
    const __m512 dx = _mm512_set1_ps(x.dxv[64 * sb]);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d, dx), acc);
}

// IQ4_XS (136 bytes: d, scales_h, scales_l[4], qs[128]): 32-value sub-block ib = qs[16 ib, +16),
// low nibbles values 0-15, high nibbles 16-31, each an index into the 16 IQ4 levels (+128,
// vpshufb), scale d (ls - 32) with the 6-bit ls = nibble ib of scales_l | bits 2 ib.. of scales_h.
// Per 128-value step one 64-byte load per row (128-bit lane k = sub-block 4 s + k), two look-ups,
// two vpdpbusd against the activations regrouped the same way (act_step128), granule_sums ->
// R[k] = sub-block sums; the -128 offset is added after the reduction (ActQ8's nsum).
void iq4xs_sb(const uint8_t* const* w, __m512i, const ref::ActQ8Row& x, int64_t sb, const PanelShare& ps, __m512& acc) {
    const int64_t off = sb * 136;
    __m512i T[4];
    dwords16(w, off, 0xFFFF, T);  // T[0] lane c: d | scales_h << 16, T[1]: scales_l[0..3]
    const __m512 d = f16_lo(T[0]);
    // ref::kIq4nlValues + 128 as bytes (the kernel tests against the reference catch any difference)
    const __m512i tbl = _mm512_broadcast_i32x4(_mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, -127, -115, -103, -90, -75, -59, -39, -15));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 2
    for (int s = 0; s < 2; ++s) {
        __m512i xA, xB;
        act_step128(x.qs + 256 * sb + 128 * s, 4, xA, xB);
        __m512i dp[16], R[4];
        prefetch_share(ps, s, 2);
#pragma GCC unroll 16
        for (int c = 0; c < 16; ++c) {
            const __m512i v = _mm512_loadu_si512(w[c] + off + 8 + 64 * s);
            const __m512i L = _mm512_shuffle_epi8(tbl, _mm512_and_si512(v, m4));
            const __m512i H = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
            dp[c] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), L, xA), H, xB);
        }
        granule_sums(dp, R);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
            const int ib = 4 * s + k;
            const int64_t g = 8 * sb + ib;  // 32-value granule within the row
            const __m512i ls = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(T[1], 4 * ib), _mm512_set1_epi32(0xF)),
                                               _mm512_and_si512(_mm512_srli_epi32(T[0], 12 + 2 * ib), _mm512_set1_epi32(0x30)));
            const __m512 ws = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(ls, _mm512_set1_epi32(32))), d);
            const __m512i I = _mm512_add_epi32(R[k], _mm512_set1_epi32((x.nsum[8 * g] + x.nsum[8 * g + 4]) * 128));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(ws, _mm512_set1_ps(x.dxv[8 * g])), acc);
        }
    }
}

MOE_TARGET_POP  // regions do not nest under clang: the outer set is closed, then widened
MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2,bmi2,avx512vbmi,avx512bitalg,gfni")
// ref::kIq2xxsGrid as 2-bit codes (magnitude 8, 25, 43 -> 0, 1, 2; element j in bits 2j..2j+1 of
// a 16-bit code), split into the low byte (elements 0-3) and the high byte (4-7) of every entry:
// two 256-byte tables, 4 zmm each, so that one vpermi2b pair + blend looks up 64 grid indices.
struct Iq2xxsCodes {
    alignas(64) uint8_t lo[256], hi[256];
    Iq2xxsCodes() {
        for (int e = 0; e < 256; ++e) {
            unsigned c = 0;
            for (int j = 0; j < 8; ++j) {
                const int m = ref::grid_byte(ref::kIq2xxsGrid[e], j);
                c |= static_cast<unsigned>(m == 8 ? 0 : m == 25 ? 1 : 2) << (2 * j);
            }
            lo[e] = static_cast<uint8_t>(c);
            hi[e] = static_cast<uint8_t>(c >> 8);
        }
    }
};
const Iq2xxsCodes& iq2xxs_codes() {
    static const Iq2xxsCodes t;
    return t;
}

// 64 grid indices (bytes) -> the low or high code byte of each, from the 4 table vectors T.
inline __m512i iq2xxs_lookup(const __m512i T[4], __m512i idx, __mmask64 b7) {
    return _mm512_mask_blend_epi8(b7, _mm512_permutex2var_epi8(T[0], idx, T[1]), _mm512_permutex2var_epi8(T[2], idx, T[3]));
}

// Constants of iq2xxs_sb, built once (they do not depend on the data).
struct Iq2xxsConsts {
    // idx byte p = 16 L + 8 b + 4 h + r (L sub-block, b: half, h: group in the half, r: row of
    // 4) <- grid index byte 2 b + h of sub-block L's qword of row r, in the vpermi2b space of the
    // two 2-row vectors (row r at 64 (r / 2) + 32 (r % 2))
    alignas(64) uint8_t idx[64];
    // scale byte 16 k + r (sub-block k, row r of 4) <- byte 7 of sub-block k's qword of row r
    alignas(64) uint8_t scl[64];
    Iq2xxsConsts() {
        for (int p = 0; p < 64; ++p) {
            const int L = p / 16, b = (p / 8) % 2, h = (p / 4) % 2, r = p % 4;
            idx[p] = static_cast<uint8_t>(64 * (r / 2) + 32 * (r % 2) + 8 * L + 2 * b + h);
            const int k = p / 16, rr = p % 4;
            scl[p] = static_cast<uint8_t>(64 * (rr / 2) + 32 * (rr % 2) + 8 * k + 7);
        }
    }
};
const Iq2xxsConsts& iq2xxs_consts() {
    static const Iq2xxsConsts t;
    return t;
}

// IQ2_XXS (66 bytes: d, then per 32-value sub-block ib the qwords a0 | a1 << 32: a0 = 4 grid
// indices (8 magnitudes each, ref::kIq2xxsGrid), a1 = 4 7-bit sign fields and the 4-bit scale
// s, y = d (0.5 + s) / 4 x sign x magnitude). The grid decode is the work here (2 bits per weight
// select one of 256 8-value entries), so it is shared as widely as the registers allow. Per
// 128-value step and 4 rows (the 64 grid indices of one vpermi2b from the rows' 4 x 32 bytes):
//   - one look-up of all 64 indices in registers (Iq2xxsCodes: 2 x (2 vpermi2b + blend)) gives the
//     low and high code bytes; two byte unpacks interleave them into Z0, Z1 so that qword q of Z
//     holds the 16-bit codes of group q of the 4 rows' half-steps (Z0: groups 0, 1 of each
//     sub-block, the xA half; Z1: groups 2, 3, xB). Per row and 64 values one vpmultishiftqb then
//     pulls element j's 2 bits to byte j and one map (vgf2p8affineqb: 8 ^ 17 c0 ^ 35 c1 is affine
//     in the code bits, the other bits ignored) gives the magnitudes 8, 25, 43 -- 2 ops per 64
//     values instead of a placement, a shift and a look-up per row (session 7: vpermw,
//     vpmultishiftqb, vpermb, after a look-up per 2 rows);
//   - signs: per 2 rows one vpmultishiftqb puts the 4 sign fields of each sub-block in bytes and
//     one vgf2p8affineqb adds the parity bit (bit 7 = xor of bits 0-6, the sign table as a bit
//     matrix); per row one vpermq spreads its sub-blocks to the qword pairs of the lanes and one
//     vpshufbitqmb per 64 values reads the 64-bit mask straight from them (no mask moves through
//     general registers); the masks negate the activations (the magnitudes are vpdpbusd's unsigned
//     operand, no offset: sum m (s x) = the chain's exact integer sum, |x| <= 127);
//   - the 16 rows' scale nibbles are collected by one vpermi2b + blend per 4 rows.
// 2 vpdpbusd per row and step, the sums reduced per 4 rows as they come (granule_sums' levels),
// then the per-sub-block f32 chain of qmatmul.h (same bits as before). Kernel alone 1.57x the
// session-7 version (one thread, in cache; docs/PERFORMANCE.md, session 8). Needs AVX512_VBMI,
// BITALG and GFNI (gemv_vbmi_usable).
void iq2xxs_sb(const uint8_t* const* w, __m512i rows, const ref::ActQ8Row& x, int64_t sb, const PanelShare& ps, __m512& acc) {
    const int64_t off = sb * 66;
    const __m512 d = f16_lo(_mm512_i32gather_epi32(rows, w[0] + off, 1));
    const Iq2xxsCodes& tc = iq2xxs_codes();
    const Iq2xxsConsts& cc = iq2xxs_consts();
    __m512i TL[4], TH[4];
    for (int i = 0; i < 4; ++i) {
        TL[i] = _mm512_load_si512(tc.lo + 64 * i);
        TH[i] = _mm512_load_si512(tc.hi + 64 * i);
    }
    const __m512i ictrl = _mm512_load_si512(cc.idx), sctrl = _mm512_load_si512(cc.scl);
    // per qword of a row's step: bytes 0-3 = bits 32 + 7 l (sign field l, 8 bits: bit 7 is the
    // next field's and is ignored)
    const __m512i fctrl = _mm512_set1_epi64(0x00000000352E2720ll);
    // bit matrix (row of output bit i in byte 7 - i): bits 0-6 kept, bit 7 = parity of bits 0-6
    const __m512i parity = _mm512_set1_epi64(0x010204081020407Fll);
    // code (c0 = bit 0, c1 = bit 1) -> 8 ^ 17 c0 ^ 35 c1 = 8, 25, 43 (code 3 does not occur)
    const __m512i magm = _mm512_set1_epi64(0x0302000001020000ll);
    const __m512i jsh = _mm512_set1_epi64(0x0E0C0A0806040200ll);  // element j: bits 2 j of slot 0
    const __m512i pq0 = _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3), pq1 = _mm512_setr_epi64(4, 4, 5, 5, 6, 6, 7, 7);
    // mask bit 8 q + j of the xA half = bit j of group q % 2's sign byte, of the xB half group 2 + q % 2
    const __m512i selA = _mm512_setr_epi64(0x0706050403020100ll, 0x0F0E0D0C0B0A0908ll, 0x0706050403020100ll, 0x0F0E0D0C0B0A0908ll,
                                           0x0706050403020100ll, 0x0F0E0D0C0B0A0908ll, 0x0706050403020100ll, 0x0F0E0D0C0B0A0908ll);
    const __m512i selB = _mm512_add_epi8(selA, _mm512_set1_epi8(16));
    const __m512i zero = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int s = 0; s < 2; ++s) {
        __m512i xA, xB;
        act_step128(x.qs + 256 * sb + 128 * s, 4, xA, xB);
        __m512i u[4], R[4], SC = zero;
        prefetch_share(ps, s, 2);
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
            const int64_t o = off + 2 + 32 * s;
            const __m512i P01 = cat256(load256(w[4 * g] + o), load256(w[4 * g + 1] + o));
            const __m512i P23 = cat256(load256(w[4 * g + 2] + o), load256(w[4 * g + 3] + o));
            const __m512i idx = _mm512_permutex2var_epi8(P01, ictrl, P23);
            const __mmask64 b7 = _mm512_movepi8_mask(idx);
            const __m512i lo = iq2xxs_lookup(TL, idx, b7), hi = iq2xxs_lookup(TH, idx, b7);
            const __m512i Z0 = _mm512_unpacklo_epi8(lo, hi), Z1 = _mm512_unpackhi_epi8(lo, hi);
            const __m512i Y01 = _mm512_gf2p8affine_epi64_epi8(_mm512_multishift_epi64_epi8(fctrl, P01), parity, 0);
            const __m512i Y23 = _mm512_gf2p8affine_epi64_epi8(_mm512_multishift_epi64_epi8(fctrl, P23), parity, 0);
            SC = _mm512_mask_blend_epi8(0x000F000F000F000Full << (4 * g), SC, _mm512_permutex2var_epi8(P01, sctrl, P23));
            __m512i dp[4];
#pragma GCC unroll 4
            for (int r = 0; r < 4; ++r) {
                const __m512i ms = _mm512_add_epi8(jsh, _mm512_set1_epi8(static_cast<char>(16 * r)));  // slot r of each qword
                const __m512i A = _mm512_gf2p8affine_epi64_epi8(_mm512_multishift_epi64_epi8(ms, Z0), magm, 8);
                const __m512i B = _mm512_gf2p8affine_epi64_epi8(_mm512_multishift_epi64_epi8(ms, Z1), magm, 8);
                const __m512i Y = _mm512_permutexvar_epi64(r % 2 ? pq1 : pq0, r < 2 ? Y01 : Y23);
                const __mmask64 MA = _mm512_bitshuffle_epi64_mask(Y, selA), MB = _mm512_bitshuffle_epi64_mask(Y, selB);
                const __m512i xa = _mm512_mask_sub_epi8(xA, MA, zero, xA), xb = _mm512_mask_sub_epi8(xB, MB, zero, xB);
                dp[r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, A, xa), B, xb);
            }
            const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(dp[0], dp[1]), _mm512_unpackhi_epi32(dp[0], dp[1]));
            const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(dp[2], dp[3]), _mm512_unpackhi_epi32(dp[2], dp[3]));
            u[g] = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
        }
        granule_lanes(u, R);  // R[k] lane c: row c's exact sum over sub-block 4 s + k
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
            const int64_t gi = 8 * sb + 4 * s + k;
            // 128-bit lane k of SC (a vpermd with a constant index once unrolled; clang needs the
            // extract's lane as a literal, which the loop variable is not)
            const __m128i lane = _mm512_castsi512_si128(
                _mm512_permutexvar_epi32(_mm512_add_epi32(_mm512_set1_epi32(4 * k), _mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3)), SC));
            const __m512i sk = _mm512_cvtepu8_epi32(lane);  // lane c: byte 7 of row c's qword
            const __m512 sc = _mm512_cvtepi32_ps(_mm512_srli_epi32(sk, 4));
            const __m512 ws = _mm512_mul_ps(_mm512_mul_ps(d, _mm512_add_ps(sc, _mm512_set1_ps(0.5f))), _mm512_set1_ps(0.25f));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(R[k]), _mm512_mul_ps(ws, _mm512_set1_ps(x.dxv[8 * gi])), acc);
        }
    }
}
__attribute__((noinline)) void gemv16_iq2xxs_vbmi(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    gemv16_k256<iq2xxs_sb>(a, x, r, n, nc);
}
MOE_TARGET_POP
MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2,bmi2")

}  // namespace

void gemv16_q2k(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) { gemv16_k256<q2k_sb>(a, x, r, n, nc); }
void gemv16_q3k(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    if (gemv_gfni_usable()) gemv16_k256<q3k_sb<true>>(a, x, r, n, nc);
    else gemv16_q3k_nogfni(a, x, r, n, nc);
}
void gemv16_q3k_nogfni(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) { gemv16_k256<q3k_sb<false>>(a, x, r, n, nc); }
bool gemv_gfni_usable() {
    static const bool ok = __builtin_cpu_supports("gfni");
    return ok;
}
void gemv16_iq4xs(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) { gemv16_k256<iq4xs_sb>(a, x, r, n, nc); }
// Called only where gemv_vbmi_usable() (AVX512_VBMI, BITALG, GFNI); the VBMI body is a separate function (a definition with
// another target than its declaration would be a GCC function version, not this symbol).
void gemv16_iq2xxs(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) { gemv16_iq2xxs_vbmi(a, x, r, n, nc); }
bool gemv_vbmi_usable() {
    static const bool ok = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bitalg") && __builtin_cpu_supports("gfni");
    return ok;
}

}  // namespace moe::kernels::avx512

#pragma GCC diagnostic pop
MOE_TARGET_POP
