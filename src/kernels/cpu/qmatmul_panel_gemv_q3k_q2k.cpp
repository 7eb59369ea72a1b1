// AVX-512 VNNI + GFNI decode GEMVs over the Q3_K and Q2_K panel layouts (qmatmul_panel_layout.h;
// panel_gemv_avx512's Q3_K / Q2_K case). Q3_K: per 16 rows and octet (32 values, granules 2 o and
// 2 o + 1): three 64-byte loads (A, B, C), per quad one vgf2p8affineqb (quads 2 and 5: two and an
// OR) gives the quad's level vector (lane c = column c's 4 levels), one vpdpbusd with the 4
// activation bytes broadcast adds them to the granule's sums of all 16 columns -- the accumulators
// are the [granule][column] sums, no reduction. The two granule sums (|I| <= 16 x 4 x 128, int16)
// are packed as words and one vpdpwssd against the scale pairs (unpacked per super-block from the
// packed region) adds sc_2o I_2o + sc_2o+1
// I_2o+1 to S; per super-block acc = fma(float(S), d * dx, acc): the super-block integer chain of
// qmatmul.h, so the bits equal gemv16_q3k's and the scalar path's. Q2_K: two loads per octet, one
// vgf2p8affineqb per quad, no offset; the scale bytes sc | m << 4 as word pairs give S as above
// and M = sum m_g nsum_g (one vpdpwssd per octet against the broadcast nsum pair), then the two
// FMAs of gemv16_q2k. Both run two panels at a time, from the call's two halves of rows, sharing
// the activation broadcasts (panels_q3k<2>, panels_q2k<2>).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/isa_target.h"
#include "kernels/cpu/qmatmul_panel_layout.h"

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,gfni,fma,f16c,avx2")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace moe::kernels::panel {

namespace {

#include "kernels/cpu/qmatmul_panel_gemv_avx512.inc"  // bcast, gf_matrix, prefetch_ahead
#include "kernels/cpu/q4k_scales_avx512.inc"         // q4k_scales_unpack (Q3_K's packed scales)

inline __m512i gf(__m512i v, long long m) { return _mm512_gf2p8affine_epi64_epi8(v, _mm512_set1_epi64(m), 0); }
constexpr int kB012[3] = {0, 1, 2}, kB345[3] = {3, 4, 5}, kB67[2] = {6, 7}, kB6[1] = {6}, kB7[1] = {7}, kOut2[1] = {2};
constexpr long long kM012 = gf_matrix(3, kB012, kB012);  // bits 0-2 -> level bits 0-2
constexpr long long kM345 = gf_matrix(3, kB345, kB012);  // bits 3-5 -> 0-2
constexpr long long kM67 = gf_matrix(2, kB67, kB012);    // bits 6-7 -> 0-1
constexpr long long kM6 = gf_matrix(1, kB6, kOut2);      // bit 6 -> 2
constexpr long long kM7 = gf_matrix(1, kB7, kOut2);      // bit 7 -> 2

// Q3_K / Q2_K: how many super-blocks ahead in the level stream (region-major) the GEMV prefetches.
// panel_gemv_bench T 256 1024 2048, one / two threads, GB/s: Q3_K 41.3 / 75-85 (0, 1, 2, 3 ahead:
// 33.9 / 62.8, 38.9 / 74.2, 40.1 / 76.0, 40.4-40.9 / 78-80; panel-major with the next panel's
// PREFETCHT2, as before: 37.5 / 73.5-73.8); Q2_K 40.4-40.8 / 76.8-77.6 (panel-major: 41.0-41.7 /
// 68-90, noisy; PREFETCHT2 8 ahead 42.8-44.1 / 79.6-80.0: within that noise).
inline constexpr int kQ23Ahead = 4;

// NP panels (their regions at pp[j]) at once against x, sharing the activation broadcasts: acc[j]
// lane c = row c of panel j, each panel's chain as gemv16_q3k's (the same bits for any NP).
// PREFETCHT0 kQ23Ahead super-blocks ahead in each level stream.
template <int NP>
void panels_q3k(const PanelParts (&pp)[NP], int64_t nsb, const ref::ActQ8Row& x, __m512 (&acc)[NP]) {
    for (int j = 0; j < NP; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* L[NP];
        __m512i U[NP][4];  // the super-block's scales sc - 32, unpacked: octet o's pairs in half o % 2 of U[o / 2]
        for (int j = 0; j < NP; ++j) {
            L[j] = pp[j].lev + sb * kQ3kSbLevelBytes;
            q4k_scales_unpack_v<32>(pp[j].sc + sb * kQ3kSbScaleBytes, U[j]);
        }
        const int8_t* xq = x.qs + 256 * sb;
        const int32_t* ns = x.nsum + 64 * sb;  // granule g: -(sum of its activations) at ns[4 g]
        __m512i S[NP];
        for (int j = 0; j < NP; ++j) S[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int o = 0; o < 8; ++o) {
            for (int j = 0; j < NP; ++j) prefetch_ahead<3>(L[j] + 192 * o, kQ23Ahead * kQ3kSbLevelBytes);
            const int8_t* xo = xq + 32 * o;
            __m512i xb[8];
            for (int k = 0; k < 8; ++k) xb[k] = bcast(xo + 4 * k);
            for (int j = 0; j < NP; ++j) {
                const __m512i A = _mm512_loadu_si512(L[j] + 192 * o), B = _mm512_loadu_si512(L[j] + 192 * o + 64),
                              C = _mm512_loadu_si512(L[j] + 192 * o + 128);
                // the level offset -4: I = sum level x + 4 nsum
                __m512i I0 = _mm512_set1_epi32(4 * ns[8 * o]), I1 = _mm512_set1_epi32(4 * ns[8 * o + 4]);
                I0 = _mm512_dpbusd_epi32(I0, gf(A, kM012), xb[0]);
                I0 = _mm512_dpbusd_epi32(I0, gf(A, kM345), xb[1]);
                I0 = _mm512_dpbusd_epi32(I0, _mm512_or_si512(gf(A, kM67), gf(C, kM6)), xb[2]);
                I0 = _mm512_dpbusd_epi32(I0, gf(B, kM012), xb[3]);
                I1 = _mm512_dpbusd_epi32(I1, gf(B, kM345), xb[4]);
                I1 = _mm512_dpbusd_epi32(I1, _mm512_or_si512(gf(B, kM67), gf(C, kM7)), xb[5]);
                I1 = _mm512_dpbusd_epi32(I1, gf(C, kM012), xb[6]);
                I1 = _mm512_dpbusd_epi32(I1, gf(C, kM345), xb[7]);
                // words (I0, I1) per column against the scale pair (sc_2o, sc_2o+1)
                const __m512i pair = _mm512_mask_blend_epi16(0xAAAAAAAAu, I0, _mm512_slli_epi32(I1, 16));
                const __m512i s2 = _mm512_cvtepi8_epi16(o % 2 ? _mm512_extracti64x4_epi64(U[j][o / 2], 1) : _mm512_castsi512_si256(U[j][o / 2]));
                S[j] = _mm512_dpwssd_epi32(S[j], pair, s2);
            }
        }
        for (int j = 0; j < NP; ++j) {
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pp[j].d + sb * kQ3kSbDBytes)));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[j]), _mm512_mul_ps(d, _mm512_set1_ps(x.dxv[64 * sb])), acc[j]);
        }
    }
}

constexpr int kB01[2] = {0, 1}, kB23[2] = {2, 3}, kB45[2] = {4, 5};
constexpr long long kQ2M[4] = {gf_matrix(2, kB01, kB012), gf_matrix(2, kB23, kB012), gf_matrix(2, kB45, kB012), gf_matrix(2, kB67, kB012)};

// NP panels at once (as panels_q3k), each panel's chain as gemv16_q2k's.
template <int NP>
void panels_q2k(const PanelParts (&pp)[NP], int64_t nsb, const ref::ActQ8Row& x, __m512 (&acc)[NP]) {
    const __m512i m4 = _mm512_set1_epi16(0x0F);
    for (int j = 0; j < NP; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* L[NP];
        for (int j = 0; j < NP; ++j) L[j] = pp[j].lev + sb * kQ2kSbLevelBytes;
        const int8_t* xq = x.qs + 256 * sb;
        const int32_t* ns = x.nsum + 64 * sb;
        __m512i S[NP], M[NP];
        for (int j = 0; j < NP; ++j) S[j] = M[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int o = 0; o < 8; ++o) {
            for (int j = 0; j < NP; ++j) prefetch_ahead<2>(L[j] + 128 * o, kQ23Ahead * kQ2kSbLevelBytes);
            const int8_t* xo = xq + 32 * o;
            __m512i xb[8];
            for (int k = 0; k < 8; ++k) xb[k] = bcast(xo + 4 * k);
            // mins against the granules' nsum (|nsum| <= 16 x 128: int16) as one word pair
            const uint32_t npair = (static_cast<uint32_t>(ns[8 * o]) & 0xFFFFu) | (static_cast<uint32_t>(ns[8 * o + 4]) << 16);
            for (int j = 0; j < NP; ++j) {
                const __m512i A = _mm512_loadu_si512(L[j] + 128 * o), B = _mm512_loadu_si512(L[j] + 128 * o + 64);
                __m512i I0 = _mm512_setzero_si512(), I1 = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int q = 0; q < 4; ++q) {
                    I0 = _mm512_dpbusd_epi32(I0, gf(A, kQ2M[q]), xb[q]);
                    I1 = _mm512_dpbusd_epi32(I1, gf(B, kQ2M[q]), xb[4 + q]);
                }
                const __m512i pair = _mm512_mask_blend_epi16(0xAAAAAAAAu, I0, _mm512_slli_epi32(I1, 16));
                const __m512i sm = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pp[j].sc + sb * kQ2kSbScaleBytes + 32 * o)));
                S[j] = _mm512_dpwssd_epi32(S[j], pair, _mm512_and_si512(sm, m4));
                M[j] = _mm512_dpwssd_epi32(M[j], _mm512_srli_epi16(sm, 4), _mm512_set1_epi32(static_cast<int32_t>(npair)));
            }
        }
        const __m512 dx = _mm512_set1_ps(x.dxv[64 * sb]);
        for (int j = 0; j < NP; ++j) {
            const uint8_t* dd = pp[j].d + sb * kQ2kSbDBytes;
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dd)));
            const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dd + 32)));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[j]), _mm512_mul_ps(d, dx), acc[j]);
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(M[j]), _mm512_mul_ps(dmin, dx), acc[j]);
        }
    }
}

// NP panels of type t (Q3_K or Q2_K) at once.
template <int NP>
void panels_q3k_q2k(DType t, const PanelParts (&pp)[NP], int64_t nsb, const ref::ActQ8Row& x, __m512 (&acc)[NP]) {
    if (t == DType::Q3_K) panels_q3k<NP>(pp, nsb, x, acc);
    else panels_q2k<NP>(pp, nsb, x, acc);
}

}  // namespace

void detail::panel_gemv_q3k_q2k(const PanelMatrix& w, const ref::ActQ8Row& x, int64_t n0, int64_t n1, float* y) {
    const int64_t nsb = w.K / 256, n_panels = (w.N + 15) / 16;
    // The call's whole panels in two halves (run_halves), panel i of the first half beside panel i of the
    // second (two level streams; as Q4_K, Q5_K, Q6_K and Q8_0 in panel_gemv_avx512), the odd panel and a
    // partial last one after. Decode tokens alternating per 4 with one panel at a time in one run
    // (moe bench -p 0 -n 128 -t 2 -r 4): OLMoE Q3_K_M (65 of its matrices Q3_K) 1.5-3.4 % faster in
    // four runs, Q2_K (32 Q2_K, 24 Q3_K) 0.8-1.8 % in three; for Q3_K a second PREFETCHT2 stream 2,
    // 4 or 12 KiB ahead on top, or the PREFETCHT0 1.5 or 3 KiB ahead instead of 6: no better
    // (docs/PERFORMANCE.md, session 49).
    run_halves(
        n0, n1, y,
        [&](int64_t p0, int64_t p1, __m512(&acc)[2]) {
            const PanelParts pp[2] = {panel_parts(w.type, w.K, w.panels, n_panels, p0), panel_parts(w.type, w.K, w.panels, n_panels, p1)};
            panels_q3k_q2k<2>(w.type, pp, nsb, x, acc);
        },
        [&](int64_t p, __m512(&acc)[1]) {
            const PanelParts pp[1] = {panel_parts(w.type, w.K, w.panels, n_panels, p)};
            panels_q3k_q2k<1>(w.type, pp, nsb, x, acc);
        });
}

}  // namespace moe::kernels::panel

#pragma GCC diagnostic pop
MOE_TARGET_POP
