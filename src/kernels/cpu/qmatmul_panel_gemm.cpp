// AVX-512 VNNI prefill GEMM (calls with m > 2 activation rows) over the Q4_K, Q3_K, Q2_K, Q6_K, Q8_0, Q4_0, Q5_K, Q5_0 and MXFP4 panel
// layouts (qmatmul_panel_layout.h), so a repacked expert stack serves prefill as well as decode and its
// original blocks need not stay resident (moe/experts.cpp drops their pages).
//
// The block GEMM (qmm512 in qmatmul_avx512.h) decodes each 16-row panel per call: per super-block
// the 16 rows' scales, 4 units of 16 per-row level decodes and a 16 x 16 dword transposition each,
// into a column-interleaved int8 buffer that rows_block then reads. The stored panel is already
// column-interleaved, so filling that buffer is a bit-field split per 64 bytes (and, shift) and
// extensions of the stored scale bytes (Q6_K: and an OR of the nibbles with the top bits; Q4_K: only the scales; its nibbles are read in place;
// Q8_0: only the f32 d, its stored quads are the buffer's quads; Q4_0: only the f32 d, its nibbles are read in
// place as Q4_K's; Q5_K, Q5_0: nibble | fifth bit per quad; MXFP4: only the f32 scales, its codes are read in
// place as Q4_0's nibbles through the level table): the same buffer contents, hence the same
// rows_block, the same integer sums and f32 chain, and the same bits as every other path of the type.
#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_amx.h"
#include "kernels/cpu/qmatmul_panel_gemm.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quantize_act.h"
#include "kernels/cpu/isa_target.h"

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2,bmi2")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/qmatmul_avx512.h"

namespace moe::kernels::panel {

namespace {
using namespace avx512;

#include "kernels/cpu/q4k_scales_avx512.inc"  // q4k_scales_unpack

// rows_block's view of Q4_K (as DQ45_K<false> in qmatmul_avx512_q8k.cpp): 256-value super-blocks,
// 32-value granules with integer scales and mins, no level offset; calls of fewer than
// split_nibbles_min_rows rows read the levels straight from the stored nibbles (granule_isums splits
// each 64-byte vector into its two quads), longer calls split them once per panel (SplitNibbles).
// kF32Halves: |I_g| <= 32 x 15 x 128 (levels 0..15, activations of at most 128 in magnitude) and
// sc_g <= 63, so 4 granules sum to at most 15.5 M < 2^24.
struct PanelQ4K {
    static constexpr int kShift = -1, kSbElems = 256, kG = 32;
    static constexpr bool kMin = true, kSbInt = true, kNibbles = true, kF32Halves = true;
};

// Stored Q4_K panel P (nsb super-blocks) -> rows_block's scale buffers (its levels are read in
// place: PanelQ4K::kNibbles, Panel::lev): ws int32 [granule][column], wm the mins' word pairs
// [pair][column] (wm_per_sb = 8 vectors per super-block, the first 4 used), wd [2][column] f32 d, dmin.
void fill_q4k(const PanelParts& pp, int64_t nsb, const Panel& p) {
    const uint8_t* S0 = pp.sc;  // Q4_K is region-major (qmatmul_panel_layout.h)
    const uint8_t* D0 = pp.d;
    alignas(64) uint8_t S[kQ4kScalesUnpacked];
    for (int64_t sb = 0; sb < nsb; ++sb) {
        q4k_scales_unpack(S0 + sb * kQ4kSbScaleBytes, S);
        for (int g = 0; g < 8; ++g)
            _mm512_store_si512(p.ws + (sb * 8 + g) * 16, _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(S + 16 * g))));
        for (int k = 0; k < 4; ++k)
            _mm512_store_si512(p.wm + (sb * 8 + k) * 16,
                               _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(S + 128 + 32 * k))));
        const uint8_t* D = D0 + sb * kQ4kSbDBytes;
        _mm512_store_ps(p.wd + sb * 32, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D))));
        _mm512_store_ps(p.wd + sb * 32 + 16, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D + 32))));
    }
}

// Q3_K / Q2_K (views as DQ3_K / DQ2_K in qmatmul_avx512_legacy_k.cpp): 16-value granules, Q3_K
// levels 0..7 with offset 4 (kShift 2), Q2_K levels 0..3 with a min per granule (kMin16).
struct PanelQ3K {
    static constexpr int kShift = 2, kSbElems = 256, kG = 16;
    static constexpr bool kMin = false, kSbInt = true;
};
struct PanelQ2K {
    static constexpr int kShift = -1, kSbElems = 256, kG = 16;
    static constexpr bool kMin16 = true, kSbInt = true;
};

// The level bytes of quad qi (of 8) of one octet's vectors V[0..2], as kQ3kPanelBits / the Q2_K
// layout pack them (16-bit shifts: the masks drop the bits that cross from the next byte).
inline __m512i q3_quad(const __m512i V[3], int qi) {
    const __m512i m7 = _mm512_set1_epi8(7), m3 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi8(4);
    const auto sh = [](__m512i v, int n) { return n ? _mm512_srli_epi16(v, n) : v; };
    switch (qi) {
        case 0: return _mm512_and_si512(V[0], m7);
        case 1: return _mm512_and_si512(sh(V[0], 3), m7);
        case 2: return _mm512_or_si512(_mm512_and_si512(sh(V[0], 6), m3), _mm512_and_si512(sh(V[2], 4), m4));
        case 3: return _mm512_and_si512(V[1], m7);
        case 4: return _mm512_and_si512(sh(V[1], 3), m7);
        case 5: return _mm512_or_si512(_mm512_and_si512(sh(V[1], 6), m3), _mm512_and_si512(sh(V[2], 5), m4));
        case 6: return _mm512_and_si512(V[2], m7);
        default: return _mm512_and_si512(sh(V[2], 3), m7);
    }
}

// Stored Q3_K / Q2_K panel P -> rows_block's buffer: int8 level quads, ws int32 [granule][column]
// (Q3_K the signed scales, Q2_K sc), Q2_K wm int32 [granule][column] (m), wd d (and dmin).
template <DType T>
void fill_k23(const PanelParts& pp, int64_t nsb, const Panel& p) {
    const uint8_t* P = pp.lev;
    constexpr bool kQ3 = T == DType::Q3_K;
    constexpr int kLev = kQ3 ? kQ3kSbLevelBytes : kQ2kSbLevelBytes, kSc = kQ3 ? kQ3kSbScaleBytes : kQ2kSbScaleBytes,
                  kD = kQ3 ? kQ3kSbDBytes : kQ2kSbDBytes, kOctet = kLev / 8;
    const uint8_t* S0 = pp.sc;  // Q3_K and Q2_K are region-major (qmatmul_panel_layout.h)
    const uint8_t* D0 = pp.d;
    const __m512i m3 = _mm512_set1_epi8(3), f = _mm512_set1_epi32(0xF);
    alignas(64) uint8_t su[kQ4kScalesUnpacked];  // Q3_K: the super-block's scales sc - 32, unpacked
    for (int64_t sb = 0; sb < nsb; ++sb) {
        if constexpr (kQ3) q4k_scales_unpack<32>(S0 + sb * kSc, su);
        for (int o = 0; o < 8; ++o) {
            const uint8_t* L = P + sb * kLev + kOctet * o;
            __m512i* q = p.q + sb * 64 + 8 * o;
            if constexpr (kQ3) {
                const __m512i V[3] = {_mm512_loadu_si512(L), _mm512_loadu_si512(L + 64), _mm512_loadu_si512(L + 128)};
                for (int qi = 0; qi < 8; ++qi) _mm512_store_si512(q + qi, q3_quad(V, qi));
            } else {
                for (int h = 0; h < 2; ++h) {
                    const __m512i v = _mm512_loadu_si512(L + 64 * h);
                    for (int j = 0; j < 4; ++j)
                        _mm512_store_si512(q + 4 * h + j, _mm512_and_si512(j ? _mm512_srli_epi16(v, 2 * j) : v, m3));
                }
            }
            // scale bytes of granules (2 o, 2 o + 1) per column as one dword (words lo, hi)
            const __m256i sb8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kQ3 ? su + 32 * o : S0 + sb * kSc + 32 * o));
            float* ws = p.ws + (sb * 16 + 2 * o) * 16;
            if constexpr (kQ3) {
                const __m512i w = _mm512_cvtepi8_epi16(sb8);
                _mm512_store_si512(ws, _mm512_srai_epi32(_mm512_slli_epi32(w, 16), 16));
                _mm512_store_si512(ws + 16, _mm512_srai_epi32(w, 16));
            } else {
                const __m512i w = _mm512_cvtepu8_epi16(sb8);  // bytes sc | m << 4
                float* wm = p.wm + (sb * 16 + 2 * o) * 16;
                _mm512_store_si512(ws, _mm512_and_si512(w, f));
                _mm512_store_si512(ws + 16, _mm512_and_si512(_mm512_srli_epi32(w, 16), f));
                _mm512_store_si512(wm, _mm512_and_si512(_mm512_srli_epi32(w, 4), f));
                _mm512_store_si512(wm + 16, _mm512_and_si512(_mm512_srli_epi32(w, 20), f));
            }
        }
        const uint8_t* D = D0 + sb * kD;
        _mm512_store_ps(p.wd + sb * 32, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D))));
        _mm512_store_ps(p.wd + sb * 32 + 16, kQ3 ? _mm512_setzero_ps() : _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D + 32))));
    }
}

// Q6_K (as DQ6_K in qmatmul_avx512_q8k.cpp): 16-value granules with int8 scales, levels 0..63 with
// offset 32 (kShift 5), the super-block integer chain.
struct PanelQ6K {
    static constexpr int kShift = 5, kSbElems = 256, kG = 16;
    static constexpr bool kMin = false, kSbInt = true;
};

// Stored Q6_K panel P -> rows_block's buffer: quad qi of octet o = its nibbles (low or high ones
// of nibble vector qi / 2) | its top bits (bits 2 (qi % 4) of top-bit vector qi / 4, moved to bits
// 4-5 by a 16-bit shift; the mask drops what crosses bytes); ws the sign-extended int8 scales
// [granule][column]; wd d (dmin lanes zero).
void fill_q6k(const PanelParts& pp, int64_t nsb, const Panel& p) {
    const uint8_t* P = pp.lev;
    const uint8_t* S0 = pp.sc;  // Q6_K is region-major (qmatmul_panel_layout.h)
    const uint8_t* D0 = pp.d;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* L = P + sb * kQ6kSbLevelBytes;
        for (int o = 0; o < 8; ++o) {
            __m512i* q = p.q + sb * 64 + 8 * o;
            for (int h = 0; h < 2; ++h) {
                const __m512i H = _mm512_loadu_si512(L + q6k_top_at(o, h));
                const __m512i T[4] = {_mm512_slli_epi16(H, 4), _mm512_slli_epi16(H, 2), H, _mm512_srli_epi16(H, 2)};
                for (int u = 0; u < 2; ++u) {
                    const __m512i V = _mm512_loadu_si512(L + q6k_nib_at(o, 2 * h + u));
                    _mm512_store_si512(q + 4 * h + 2 * u, _mm512_ternarylogic_epi32(_mm512_and_si512(V, m4), T[2 * u], m30, 0xF8));
                    _mm512_store_si512(q + 4 * h + 2 * u + 1,
                                       _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(V, 4), m4), T[2 * u + 1], m30, 0xF8));
                }
            }
        }
        for (int g = 0; g < 16; ++g)
            _mm512_store_si512(p.ws + (sb * 16 + g) * 16,
                               _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(S0 + sb * kQ6kSbScaleBytes + 16 * g))));
        _mm512_store_ps(p.wd + sb * 32, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D0 + sb * kQ6kSbDBytes))));
        _mm512_store_ps(p.wd + sb * 32 + 16, _mm512_setzero_ps());
    }
}

// Q8_0 (as DQ8_0 in qmatmul_avx512_q8k.cpp): 32-value granules (blocks), levels q ^ 0x80 with
// offset 128 (kShift 7), the per-granule f32 chain (rows_block walks K / kG granules: any K % 32 ==
// 0). Its stored quads ([K/32][8][64], u8 q ^ 0x80) are rows_block's quad buffer byte for byte:
// where the panels are 64-byte aligned (huge_alloc; a panel is 544 nb bytes, a multiple of 64 for
// an even number of blocks nb) rows_block reads them in place (kQuadsInPlace, gemm_over), else
// fill_q80 copies them.
struct PanelQ80 {
    static constexpr int kShift = 7, kG = 32;
    static constexpr bool kMin = false, kQuadsInPlace = true;
};

// Stored Q8_0 panel P (nb blocks) -> rows_block's buffer: the quads (unless p.q is P itself), ws
// f32 d [block][column].
void fill_q80(const PanelParts& pp, int64_t nb, const Panel& p) {
    const uint8_t* P = pp.lev;
    if (reinterpret_cast<const uint8_t*>(p.q) != P)
        for (int64_t v = 0; v < 8 * nb; ++v) _mm512_store_si512(p.q + v, _mm512_loadu_si512(P + 64 * v));
    const uint8_t* D = P + static_cast<size_t>(nb) * kQ80BlkLevelBytes;
    for (int64_t g = 0; g < nb; ++g)
        _mm512_store_ps(p.ws + g * 16, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D + 32 * g))));
}

// Q4_0 (as DQ4_0 in qmatmul_avx512_q8k.cpp): 32-value granules (blocks), levels 0..15 with offset 8
// (kShift 3), the per-granule f32 chain. Its level region is Q4_K's nibble layout ([K/32][4][64]),
// so rows_block reads it in place (kNibbles) and fill_q40 gives only ws, f32 d [block][column].
struct PanelQ40 {
    static constexpr int kShift = 3, kG = 32;
    static constexpr bool kMin = false, kNibbles = true;
};
void fill_q40(const PanelParts& pp, int64_t nb, const Panel& p) {
    const uint8_t* P = pp.lev;
    const uint8_t* D = P + static_cast<size_t>(nb) * kQ40BlkLevelBytes;
    for (int64_t g = 0; g < nb; ++g)
        _mm512_store_ps(p.ws + g * 16, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D + 32 * g))));
}

// Q5_K (as DQ45_K<true>): Q4_K's granules, scales, mins and chain with 5-bit levels. rows_block
// cannot read them in place (its kNibbles form is 4 bits), so fill_q5k writes the int8 quads: quad
// 2 v of granule g = (level vector v & 7) | bits 2 v, 2 v + 1 of the granule's side vector moved to
// bits 3-4, quad 2 v + 1 = v >> 3 (16-bit shifts by at most 3: the masks drop what crosses bytes);
// the scale buffers as fill_q4k.
struct PanelQ5K {
    static constexpr int kShift = -1, kSbElems = 256, kG = 32;
    static constexpr bool kMin = true, kSbInt = true;
};
void fill_q5k(const PanelParts& pp, int64_t nsb, const Panel& p) {
    const uint8_t* P = pp.lev;
    const uint8_t* S0 = pp.sc;  // Q5_K is region-major (qmatmul_panel_layout.h)
    const uint8_t* D0 = pp.d;
    const __m512i m7 = _mm512_set1_epi8(7), m18 = _mm512_set1_epi8(0x18), m1f = _mm512_set1_epi8(0x1F);
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* L = P + sb * kQ5kSbLevelBytes;
        for (int g = 0; g < 8; ++g) {
            __m512i* q = p.q + sb * 64 + 8 * g;
            const __m512i H = _mm512_loadu_si512(L + q5k_side_at(g));
            // bits 2 v, 2 v + 1 of the side byte at bits 3-4
            const __m512i T[4] = {_mm512_slli_epi16(H, 3), _mm512_slli_epi16(H, 1), _mm512_srli_epi16(H, 1), _mm512_srli_epi16(H, 3)};
            for (int v = 0; v < 4; ++v) {
                const __m512i V = _mm512_loadu_si512(L + q5k_lev_at(g, v));
                _mm512_store_si512(q + 2 * v, _mm512_ternarylogic_epi32(_mm512_and_si512(V, m7), T[v], m18, 0xF8));
                _mm512_store_si512(q + 2 * v + 1, _mm512_and_si512(_mm512_srli_epi16(V, 3), m1f));
            }
        }
        alignas(64) uint8_t S[kQ4kScalesUnpacked];
        q4k_scales_unpack(S0 + sb * kQ5kSbScaleBytes, S);
        for (int g = 0; g < 8; ++g)
            _mm512_store_si512(p.ws + (sb * 8 + g) * 16, _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(S + 16 * g))));
        for (int k = 0; k < 4; ++k)
            _mm512_store_si512(p.wm + (sb * 8 + k) * 16,
                               _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(S + 128 + 32 * k))));
        const uint8_t* D = D0 + sb * kQ5kSbDBytes;
        _mm512_store_ps(p.wd + sb * 32, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D))));
        _mm512_store_ps(p.wd + sb * 32 + 16, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D + 32))));
    }
}

// Q5_0 (as DLegacy<Q5_0> in qmatmul_avx512_legacy_k.cpp): 32-value granules (blocks), levels 0..31
// with offset 16 (kShift 4), the per-granule f32 chain. fill_q50 writes the int8 quads as fill_q5k
// does per granule (quad 2 v of block b = (vector v & 7) | side bits 2 v, 2 v + 1 at bits 3-4, quad
// 2 v + 1 = v >> 3) and ws, f32 d [block][column]; nb = K / 32 blocks (its K step).
struct PanelQ50 {
    static constexpr int kShift = 4, kG = 32;
    static constexpr bool kMin = false;
};
void fill_q50(const PanelParts& pp, int64_t nb, const Panel& p) {
    const uint8_t* P = pp.lev;
    const __m512i m7 = _mm512_set1_epi8(7), m18 = _mm512_set1_epi8(0x18), m1f = _mm512_set1_epi8(0x1F);
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* L = P + b * kQ50BlkLevelBytes;
        __m512i* q = p.q + 8 * b;
        const __m512i H = _mm512_loadu_si512(L + 256);
        const __m512i T[4] = {_mm512_slli_epi16(H, 3), _mm512_slli_epi16(H, 1), _mm512_srli_epi16(H, 1), _mm512_srli_epi16(H, 3)};
        for (int v = 0; v < 4; ++v) {
            const __m512i V = _mm512_loadu_si512(L + 64 * v);
            _mm512_store_si512(q + 2 * v, _mm512_ternarylogic_epi32(_mm512_and_si512(V, m7), T[v], m18, 0xF8));
            _mm512_store_si512(q + 2 * v + 1, _mm512_and_si512(_mm512_srli_epi16(V, 3), m1f));
        }
    }
    const uint8_t* D = P + static_cast<size_t>(nb) * kQ50BlkLevelBytes;
    for (int64_t b = 0; b < nb; ++b)
        _mm512_store_ps(p.ws + b * 16, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D + 32 * b))));
}

// MXFP4 (as DMXFP4 in qmatmul_avx512_legacy_k.cpp): 32-value granules (blocks), levels 2 x E2M1 + 16
// (kShift 4), the per-granule f32 chain. Its level region is Q4_0's nibble layout holding the codes:
// rows_block reads it in place (kNibbles) and maps each masked nibble vector to the levels by one
// vpshufb with nibble_table() (DMXFP4's); fill_mxfp4 gives ws, f32 2^(e - 128) [block][column].
struct PanelMXFP4 {
    static constexpr int kShift = 4, kG = 32;
    static constexpr bool kMin = false, kNibbles = true;
    static __m512i nibble_table() { return _mm512_broadcast_i32x4(_mm_setr_epi8(16, 17, 18, 19, 20, 22, 24, 28, 16, 15, 14, 13, 12, 10, 8, 4)); }
};
void fill_mxfp4(const PanelParts& pp, int64_t nb, const Panel& p) {
    const uint8_t* P = pp.lev;
    const uint8_t* E = P + static_cast<size_t>(nb) * kMxfp4BlockLevelBytes;
    for (int64_t i = 0; i < 16 * nb; ++i) p.ws[i] = ref::e8m0_half(E[i]);
}

// The nibble types (Q4_K, Q4_0, MXFP4) with their levels split into int8 quads once per panel and
// call (p.q, the order granule_isums reads the nibbles in, so the same bits), rather than per row
// block of 4: calls of many rows repeat the split (24 vector ops per granule beside 64 vpdpbusd)
// once per row block; few rows cannot pay the 32 KiB written per panel (K = 2048).
// panel_gemm_bench T 128 1024 2048 m (from DRAM), split / in place: Q4_K m = 16 0.86x, 24 0.94x,
// 32 0.99x, 48 1.03x, 64 1.02-1.05x, 128 1.12x; Q4_0 m = 8 0.80x, 16 0.97x, 24 1.02x, 48 1.12x;
// MXFP4 m = 16 1.03x, 24 1.08x, 48 1.25x (docs/PERFORMANCE.md, session 55).
constexpr int64_t split_nibbles_min_rows(DType t) { return t == DType::Q4_K ? 48 : 24; }
template <class D>
struct SplitNibbles : D {
    static constexpr bool kNibbles = false;
};
template <class D, void (*Fill)(const PanelParts&, int64_t, const Panel&)>
void fill_split(const PanelParts& pp, int64_t n_steps, const Panel& p) {
    Fill(pp, n_steps, p);
    int64_t granules = n_steps;  // K / 32
    if constexpr (requires { D::kSbElems; }) granules = n_steps * D::kSbElems / 32;
    for (int64_t g = 0; g < granules; ++g)
        for (int v = 0; v < 4; ++v) {
            __m512i lo, hi;
            nibble_quads<D>(_mm512_loadu_si512(pp.lev + 256 * g + 64 * v), lo, hi);
            _mm512_store_si512(p.q + 8 * g + 2 * v, lo);
            _mm512_store_si512(p.q + 8 * g + 2 * v + 1, hi);
        }
}

template <class D>
constexpr bool quads_in_place() {
    if constexpr (requires { D::kQuadsInPlace; }) return D::kQuadsInPlace;
    else return false;
}

}  // namespace

bool panel_gemm_supported(DType t) {
    return t == DType::Q4_K || t == DType::Q3_K || t == DType::Q2_K || t == DType::Q6_K || t == DType::Q8_0 || t == DType::Q4_0 ||
           t == DType::Q5_K || t == DType::Q5_0 || t == DType::MXFP4;
}

namespace {

// rows_all kept out of gemm_over: inlined there (GCC's choice once gemm_over grew by the
// region-major addressing), every rows_block with it, the Q4_K pairs ran 0.75x
// (panel_gemm_bench Q4_K 1 1024 2048 64: 0.49 against 0.37 ms per pass).
// (The K-quants only: Q8_0's pp512 ran 0.97x out of line.)
template <class D, int NP>
[[gnu::noinline]] void rows_all_out(const MatmulArgs& a, const unsigned char* act, size_t act_stride, int64_t n, const int* nc, const Panel* p,
                                    const NextPanels& next) {
    rows_all<D, NP>(a, act, act_stride, n, nc, p, next);
}
template <class D, int NP>
[[gnu::always_inline]] inline void rows_all_pair(const MatmulArgs& a, const unsigned char* act, size_t act_stride, int64_t n, const int* nc, const Panel* p,
                                                 const NextPanels& next) {
    if constexpr (sbint_of<D>()) rows_all_out<D, NP>(a, act, act_stride, n, nc, p, next);
    else rows_all<D, NP>(a, act, act_stride, n, nc, p, next);
}

template <class D>
void gemm_over(const PanelMatrix& w, const MatmulArgs& a, void (*fill)(const PanelParts&, int64_t, const Panel&)) {
    size_t act_stride = 0;
    const unsigned char* act = qmm_activations(a, Isa::Avx512, act_quant(w.type), &act_stride);
    const int64_t nsb = w.K / panel_k_step(w.type);  // the fills' steps: super-blocks (K-quants), blocks (Q8_0, Q4_0, Q5_0, MXFP4)
    const size_t pb_bytes = panel_bytes(w.type, w.K);
    Panel p[2];  // rows_block's buffers for two panels (qmm512's)
    panel_pair(w.K, nsb, p);
    __m512i* const qbuf[2] = {p[0].q, p[1].q};
    const int64_t n_panels = (w.N + 15) / 16;
    const bool in_place = quads_in_place<D>() && reinterpret_cast<uintptr_t>(w.panels) % 64 == 0 && pb_bytes % 64 == 0;
    for (int64_t n = a.n0; n < a.n1; n += 32) {
        int nc[2];
        nc[0] = static_cast<int>(std::min<int64_t>(16, a.n1 - n));
        nc[1] = static_cast<int>(std::clamp<int64_t>(a.n1 - n - 16, 0, 16));
        const PanelParts pp[2] = {panel_parts(w.type, w.K, w.panels, n_panels, n / 16),
                                  panel_parts(w.type, w.K, w.panels, n_panels, std::min(n / 16 + 1, n_panels - 1))};
        if constexpr (nibbles_of<D>())
            for (int j = 0; j < 2; ++j) p[j].lev = pp[j].lev;
        if constexpr (quads_in_place<D>())  // rows_block only reads p.q
            for (int j = 0; j < 2; ++j)
                p[j].q = in_place ? reinterpret_cast<__m512i*>(const_cast<uint8_t*>(w.panels + static_cast<size_t>(n / 16 + j) * pb_bytes)) : qbuf[j];
        fill(pp[0], nsb, p[0]);
        // the next pair's panels, requested by rows_all while this pair computes
        const NextPanels next = next_panels(w, n / 16 + 2, (std::min<int64_t>(a.n1, n + 64) - (n + 32) + 15) / 16);
        if (nc[1] > 0) {
            fill(pp[1], nsb, p[1]);
            rows_all_pair<D, 2>(a, act, act_stride, n, nc, p, next);
        } else {
            rows_all_pair<D, 1>(a, act, act_stride, n, nc, p, next);
        }
    }
}

// gemm_over for a nibble type D: split once per panel from split_nibbles_min_rows rows, else in place.
template <class D, void (*Fill)(const PanelParts&, int64_t, const Panel&)>
void gemm_nibbles(const PanelMatrix& w, const MatmulArgs& a) {
    if (a.m >= split_nibbles_min_rows(w.type)) gemm_over<SplitNibbles<D>>(w, a, fill_split<D, Fill>);
    else gemm_over<D>(w, a, Fill);
}

}  // namespace

void panel_gemm_avx512(const PanelMatrix& w, const MatmulArgs& a) {
    check_range(w, a.n0, a.n1);
    if (!panel_gemm_supported(w.type))
        throw_error("kernels", "panel GEMM: weight type ", dtype_name(w.type), " has none (Q2_K, Q3_K, Q4_K, Q6_K, Q8_0, Q4_0, Q5_K, Q5_0, MXFP4); use the block kernel");
    if (a.K != w.K) throw_error("kernels", "panel GEMM: K = ", a.K, " but the panels hold rows of ", w.K);
    switch (w.type) {
        case DType::Q4_K: gemm_nibbles<PanelQ4K, fill_q4k>(w, a); break;
        case DType::Q3_K: gemm_over<PanelQ3K>(w, a, fill_k23<DType::Q3_K>); break;
        case DType::Q6_K: gemm_over<PanelQ6K>(w, a, fill_q6k); break;
        case DType::Q8_0: gemm_over<PanelQ80>(w, a, fill_q80); break;
        case DType::Q4_0: gemm_nibbles<PanelQ40, fill_q40>(w, a); break;
        case DType::Q5_K: gemm_over<PanelQ5K>(w, a, fill_q5k); break;
        case DType::Q5_0: gemm_over<PanelQ50>(w, a, fill_q50); break;
        case DType::MXFP4: gemm_nibbles<PanelMXFP4, fill_mxfp4>(w, a); break;
        default: gemm_over<PanelQ2K>(w, a, fill_k23<DType::Q2_K>); break;
    }
}

}  // namespace moe::kernels::panel

#pragma GCC diagnostic pop
MOE_TARGET_POP

// Outside the AVX-512 target region: portable code that only calls the kernels above.
namespace moe::kernels::panel {

bool panel_matmul(const PanelMatrix& w, const MatmulArgs& a, bool gemm, bool amx) {
    if (a.m <= 2 && a.xq) {
        for (int64_t r = 0; r < a.m; ++r) {
            auto* row = static_cast<unsigned char*>(const_cast<void*>(a.xq)) + static_cast<size_t>(r) * a.xq_stride;
            panel_gemv_avx512(w, ref::act_q8_row(row, a.K), a.n0, a.n1, a.y + r * a.ldy);
        }
        return true;
    }
    if (!gemm) return false;
    const int64_t chunk = panel_gemm_row_chunk(a.m);
    for (int64_t r0 = 0; r0 < a.m;) {
        MatmulArgs c = a;
        // the last part takes a remainder of fewer than 32 rows rather than running it alone
        c.m = a.m - r0 < chunk + 32 ? a.m - r0 : chunk;
        c.x = a.x ? a.x + r0 * a.ldx : nullptr;
        c.y = a.y + r0 * a.ldy;
        if (a.xq) c.xq = static_cast<const unsigned char*>(a.xq) + static_cast<size_t>(r0) * a.xq_stride;
        if (amx && panel_amx_supported(w.type) && c.m >= panel_amx_min_rows(w.type)) panel_gemm_amx(w, c);
        else panel_gemm_avx512(w, c);
        r0 += c.m;
    }
    return true;
}

bool panel_matmul_pair(const PanelMatrix (&w)[2], const MatmulArgs (&a)[2]) {
    for (int j = 0; j < 2; ++j)
        if (a[j].m != 1 || !a[j].xq) return false;
    if (w[0].type != w[1].type || w[0].N != w[1].N || w[0].K != w[1].K || !panel_gemv_pair_supported(w[0].type) ||
        a[0].n0 != a[1].n0 || a[0].n1 != a[1].n1 || a[0].K != w[0].K || a[1].K != w[1].K)
        return false;
    const ref::ActQ8Row r0 = ref::act_q8_row(static_cast<unsigned char*>(const_cast<void*>(a[0].xq)), a[0].K);
    const ref::ActQ8Row r1 = ref::act_q8_row(static_cast<unsigned char*>(const_cast<void*>(a[1].xq)), a[1].K);
    const ref::ActQ8Row* x[2] = {&r0, a[1].xq == a[0].xq ? &r0 : &r1};
    float* const y[2] = {a[0].y, a[1].y};
    panel_gemv_pair_avx512(w, x, a[0].n0, a[0].n1, y);
    return true;
}

int64_t panel_gemm_row_chunk(int64_t m) {
    constexpr int64_t kMaxRows = 256, kTarget = 128;
    if (m <= kMaxRows) return m;
    const int64_t parts = (m + kTarget - 1) / kTarget;
    return ((m + parts - 1) / parts + 31) / 32 * 32;
}

}  // namespace moe::kernels::panel
