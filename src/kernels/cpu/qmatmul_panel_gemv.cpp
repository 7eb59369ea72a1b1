// AVX-512 VNNI + GFNI decode GEMVs over the Q3_K / Q2_K / Q4_K / Q6_K / Q8_0 / Q4_0 / Q5_K panel layouts
// (qmatmul_panel_layout.h; the routed experts' decode calls with --repack-experts,
// moe/experts.cpp), and the paired GEMV of two matrices (panel_gemv_pair_avx512). Q3_K, Q2_K: the
// GFNI level kernels of qmatmul_panel_gemv_q3k_q2k.cpp. Q4_K: plain nibbles, no GFNI (panels_q4k below). Q6_K: Q4_K's nibbles and
// Q2_K's top bits (panels_q6k below). Q8_0: the stored quads are vpdpbusd operands as they are
// (panels_q80 below). Q4_0: Q4_K's nibbles per block (DecQ40 below, run by gemv_blocks of
// qmatmul_panel_gemv_avx512.inc: the per-block loop it shares with Q5_0 and MXFP4); Q5_K: one
// quad's level in place and the other's low bits beside it, its top bits in a side vector per
// granule (panels_q5k).
// MXFP4: Q4_0's nibbles through a level table (qmatmul_panel_mxfp4.cpp, detail::gemv_mxfp4_avx512).
// The "from DRAM" figures below that use `panel_gemv_bench T 64 1024 2048` were partly L3 hits
// (75 MB against a 32 MiB L3) and, at two threads, timed each thread alone (fixed in session 20).
// On a DRAM stream (384 matrices, docs/PERFORMANCE.md session 20) the panels read, against the
// blocks: Q8_0 1.3-1.5x, Q5_0 1.1-1.6x. Q4_K, Q5_K and Q6_K, since their matrices are region-major
// (sessions 26, 27; 256 matrices of 1024 x 2048): Q4_K 1.29-1.36x, Q6_K 1.1-1.25x (0.79x before),
// Q5_K 0.98x one thread, 1.08x two (0.86-0.9x before).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/cpu/isa_target.h"

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,gfni,fma,f16c,avx2")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace moe::kernels::panel {

namespace {

#include "kernels/cpu/qmatmul_panel_gemv_avx512.inc"  // bcast, load_once, prefetch_next, gemv_blocks
#include "kernels/cpu/q4k_scales_avx512.inc"         // q4k_scales_unpack

inline __m512i gf(__m512i v, long long m) { return _mm512_gf2p8affine_epi64_epi8(v, _mm512_set1_epi64(m), 0); }

// Q4_K: per granule (32 values) four 64-byte loads; vector v's low nibbles are the column-
// interleaved quad of values 32 g + 8 v .. + 3, its high nibbles the quad + 4 .. + 7. The high
// nibble stays in place (v & 0xF0 = 16 x level: its sums come out x 16, exact, and are shifted back
// per granule: I_g = Ilo + (Ihi >> 4), |I_g| <= 32 x 15 x 128 < 2^16, int32), S += sc_g I_g with
// vpmulld. (Measured against the other form, two 16-value halves whose sums fit int16 packed as
// words and one vpdpwssd against (sc_g, sc_g): 0.9x, the extra shifts; docs/PERFORMANCE.md.) M as
// mins32 (qmatmul_avx512.h): the stored min pairs (m_2k, m_2k+1) as words against the broadcast
// nsum pair of granules 2k, 2k+1 (|nsum| <= 32 x 128, int16). Per super-block the two FMAs of
// gemv16_q4k in its order, so the bits are gemv16_q4k's. The loads limit it in cache (one thread,
// in L2): each level vector is loaded once (load_once: 1.27x); the template can take up to four
// panels at once, sharing the activation broadcasts (in L2: 1 -> 2 panels 1.09x, 2 -> 4 1.08x); from
// DRAM, adjacent panels at once streamed slower (sessions 18-20), two panels from the two halves of
// the call's rows faster (session 29): the engine calls it so (panel_gemv_avx512).
// Q4_K matrices are region-major (qmatmul_panel_layout.h): the level loads of consecutive panels
// form one stream, the scale and d loads two more. Over the panel-major layout this GEMV needed a
// software prefetch of the next panel (PREFETCHT2, one slot per level vector load) and still
// streamed at ~80 % of the read loop (docs/PERFORMANCE.md, sessions 18 and 26); region-major
// (then with no software prefetch) it streamed 1.17x faster on one thread and 1.1x on two
// (session 26). The granule loop is NOT unrolled and the engine ran one panel at a time until
// session 29: on an AMD Zen 5 host (2 vCPUs) the unrolled four-panel form streamed 15-23 GB/s from
// DRAM on one thread and the hardware prefetchers did nothing for it (no software prefetch: 8-9
// GB/s), while this form
// runs 28-33 (`panel_gemv_bench Q4_K 64 1024 2048`, 2 MiB pages; two threads 30-37 -> 33-55, noisy);
// docs/PERFORMANCE.md, session 18. (In L2 the unrolled four panels were faster: only decode, which
// streams from DRAM, takes this GEMV.) The same change to Q6_K's octet loop and Q8_0's block loop
// measured no different there (within the noise); timed token by token in session 29, Q6_K's
// octet loop not unrolled made OLMoE Q4_K_M decode tokens 0.6-3.7 % faster (kept; Q8_0 stays
// unrolled). Over the region-major layout the unrolled granule loop streams 31 GB/s on one thread
// and 58-61 on two, against 44 and 82-85 (session 26): the hardware prefetchers follow a load
// instruction whose stride stays constant.
// The end of a Q4_K / Q5_K super-block (the same scales and d regions): M = mins32 of the stored
// min pairs (scs[j] + 128) against the granules' nsum pairs (panel j's activation row: ns[j], its
// dx dxs[j]), then the two FMAs of gemv16_q4k in its order with panel j's d, dmin at dd[j] (f16
// [2][16]).
template <int NP>
[[gnu::always_inline]] inline void sb_end_q45(const uint8_t* const (&scs)[NP], const uint8_t* const (&dd)[NP], const int32_t* const (&ns)[NP],
                                              const float (&dxs)[NP], const __m512i (&S)[NP], __m512 (&acc)[NP]) {
    __m512i M[NP];
    for (int j = 0; j < NP; ++j) M[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
        for (int j = 0; j < NP; ++j) {
            const int32_t n0 = ns[j][16 * k] + ns[j][16 * k + 4], n1 = ns[j][16 * k + 8] + ns[j][16 * k + 12];
            const __m512i npair = _mm512_set1_epi32(static_cast<int32_t>((static_cast<uint32_t>(n0) & 0xFFFFu) | (static_cast<uint32_t>(n1) << 16)));
            M[j] = _mm512_dpwssd_epi32(M[j], _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scs[j] + 128 + 32 * k))), npair);
        }
    }
    for (int j = 0; j < NP; ++j) {
        const __m512 dx = _mm512_set1_ps(dxs[j]);
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dd[j])));
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dd[j] + 32)));
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[j]), _mm512_mul_ps(d, dx), acc[j]);
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(M[j]), _mm512_mul_ps(dmin, dx), acc[j]);
    }
}
// NP panels (their regions at pp[j]) at once against x: the activation broadcasts are shared.
// acc[j] lane c = row c of panel j. Over the region-major layout the hardware prefetchers follow
// the three streams (session 26: a PREFETCHT2 of the next panel's levels was no faster there), yet
// in the model on the session-29 VM the samples sat on the granules' first level loads: a
// PREFETCHT0 of the level lines kQ4Ahead bytes on (four granules, half a super-block) made OLMoE
// Q4_K_M decode tokens 11-12 % faster on one and two threads (tokens alternating between both forms
// in one run; 512 B ahead and a second PREFETCHT2 4-16 KiB ahead were slower, 1.5-2 KiB ahead and
// PREFETCHT1 no better; docs/PERFORMANCE.md session 29; a second PREFETCHT2 2 KiB ahead: below).
inline constexpr int kQ4Ahead = 1024;
// And a PREFETCHT2 of the same lines kQ4AheadL2 bytes ahead (into L2): the hardware prefetchers do not
// keep the L2 far enough ahead of the T0 stream. Session 48, OLMoE Q4_K_M decode tokens alternating
// in one run (moe bench -p 0 -n 128 -t 2 -r 4): 0.8-1.7 % faster with 2 KiB, 0.8-1.4 % with 4 KiB,
// 0.3-0.9 % with 8 KiB; both this and Q6_K's kQ6AheadL2 together 2.3-3.9 % (docs/PERFORMANCE.md). A
// T0 on every other line only (128 B apart) was 4.5-5.4 % slower.
inline constexpr int kQ4AheadL2 = 2048;
// xs[j]: panel j's activation row; kOneX: all the same row (the broadcasts are shared), else each
// panel its own (panel_gemv_pair_avx512: two experts' down matrices).
template <int NP, bool kOneX = true>
void panels_q4k(const PanelParts (&pp)[NP], int64_t nsb, const ref::ActQ8Row* const (&xs)[NP], __m512 (&acc)[NP]) {
    constexpr int NX = kOneX ? 1 : NP;
    const __m512i m4 = _mm512_set1_epi8(0x0F), mf0 = _mm512_set1_epi8(static_cast<char>(0xF0));
    for (int j = 0; j < NP; ++j) acc[j] = _mm512_setzero_ps();
    alignas(64) uint8_t su[NP][kQ4kScalesUnpacked];  // the super-block's scales, unpacked
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* L[NP];
        const uint8_t* scs[NP];
        const int8_t* xq[NX];
        const int32_t* ns[NP];
        float dxs[NP];
        for (int j = 0; j < NP; ++j) {
            L[j] = pp[j].lev + sb * kQ4kSbLevelBytes;
            q4k_scales_unpack(pp[j].sc + sb * kQ4kSbScaleBytes, su[j]);
            scs[j] = su[j];
            const ref::ActQ8Row& x = *xs[kOneX ? 0 : j];
            if (j < NX) xq[j] = x.qs + 256 * sb;
            ns[j] = x.nsum + 64 * sb;
            dxs[j] = x.dxv[64 * sb];
        }
        __m512i S[NP];
        for (int j = 0; j < NP; ++j) S[j] = _mm512_setzero_si512();
#pragma GCC unroll 1  // not unrolled: see above
        for (int g = 0; g < 8; ++g) {
            for (int j = 0; j < NP; ++j) prefetch_ahead<4>(L[j] + 256 * g, kQ4Ahead);
            for (int j = 0; j < NP; ++j) prefetch_ahead_l2<4>(L[j] + 256 * g, kQ4AheadL2);
            __m512i Il[NP], Ih[NP];
            for (int j = 0; j < NP; ++j) Il[j] = Ih[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) {
                __m512i xl[NX], xh[NX];
                for (int k = 0; k < NX; ++k) {
                    xl[k] = bcast(xq[k] + 32 * g + 8 * v);
                    xh[k] = bcast(xq[k] + 32 * g + 8 * v + 4);
                }
#pragma GCC unroll 4
                for (int j = 0; j < NP; ++j) {
                    const __m512i V = load_once(L[j] + 256 * g + 64 * v);
                    Il[j] = _mm512_dpbusd_epi32(Il[j], _mm512_and_si512(V, m4), xl[kOneX ? 0 : j]);
                    Ih[j] = _mm512_dpbusd_epi32(Ih[j], _mm512_and_si512(V, mf0), xh[kOneX ? 0 : j]);
                }
            }
            for (int j = 0; j < NP; ++j) {
                const __m512i scg = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scs[j] + 16 * g)));
                S[j] = _mm512_add_epi32(S[j], _mm512_mullo_epi32(_mm512_add_epi32(Il[j], _mm512_srai_epi32(Ih[j], 4)), scg));
            }
        }
        const uint8_t* dd[NP];
        for (int j = 0; j < NP; ++j) dd[j] = pp[j].d + sb * kQ4kSbDBytes;
        sb_end_q45<NP>(scs, dd, ns, dxs, S, acc);
    }
}
// All NP panels against one activation row.
template <int NP>
void panels_q4k(const PanelParts (&pp)[NP], int64_t nsb, const ref::ActQ8Row& x, __m512 (&acc)[NP]) {
    const ref::ActQ8Row* xs[NP];
    for (int j = 0; j < NP; ++j) xs[j] = &x;
    panels_q4k<NP, true>(pp, nsb, xs, acc);
}

// Q6_K: per octet (32 values: granule 2 o = quads 0..3, 2 o + 1 = quads 4..7) four nibble vectors
// (vector v: quad 2 v in the low nibbles, 2 v + 1 in the high) and two top-bit vectors (vector h:
// bits 2 q, 2 q + 1 of byte p = quad 4 h + q's top bits), each loaded once. Quad qi's level vector
// is nibble | top << 4: one vgf2p8affineqb moves the quad's two top bits to bits 4-5 (all others
// zero) and one vpternlogd ORs them with the masked nibble (odd quads: after a 16-bit shift by 4).
// The -32 offset seeds the granule sums as 32 * nsum (exact, as the block kernels); |I_g| <= 16 x
// 32 x 128 = 2^16 does not fit int16, so S += sc_g I_g by vpmulld with the sign-extended scale
// bytes, then per super-block acc = fma(float(S), d * dx, acc): gemv16_q6k's chain, its bits.
// Q6_K matrices are region-major and an octet's six vectors lie in load order, so the level loads
// are one ascending stream; still the hardware prefetchers do not keep up with it (unlike Q4_K's):
// panel_gemv_bench Q6_K 256 1024 2048 ran 23.5-25 GB/s on one thread, 46-49 on two, without
// software prefetch. PREFETCHT0 of each octet's lines kQ6Ahead bytes ahead (across panel ends: the
// next panel's levels follow). Session 27, one panel at a time, two super-blocks (6 KiB) ahead:
// 40-42 / 77-82 GB/s (3840: 40 / 75, 4608 to 9216 alike; the scales prefetched too: no better);
// two adjacent panels at once (sharing the broadcasts) ran 0.83-0.87x one, and in session 29 two
// panels from the two halves of the call's rows (as Q4_K) 3-6 % slower per decode token, both with
// the prefetch 6 KiB ahead. Session 33, on a VM phase where one panel at a time streamed at ~65 %
// of the read loop (23-24 GB/s of 36 on one thread): the two halves at once with the prefetch
// 2 KiB ahead of each stream ran 28-33 GB/s, and OLMoE Q4_K_M decode tokens 6.1 % faster on two
// threads, 6.5 % on one (3 or 4 KiB ahead: alike; docs/PERFORMANCE.md). So the engine runs Q6_K in
// halves too (panel_gemv_avx512).
inline constexpr int kQ6Ahead = 2048;
// A second PREFETCHT2 of each octet's lines twice as far ahead, as Q4_K's kQ4AheadL2: 0.5-1.6 % faster
// decode tokens on top of Q4_K's (session 48).
inline constexpr int kQ6AheadL2 = 2 * kQ6Ahead;
constexpr int kTop[4][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}}, kTo45[2] = {4, 5};
constexpr long long kQ6Top[4] = {gf_matrix(2, kTop[0], kTo45), gf_matrix(2, kTop[1], kTo45), gf_matrix(2, kTop[2], kTo45),
                                 gf_matrix(2, kTop[3], kTo45)};
// xs, kOneX as panels_q4k's.
template <int NP, bool kOneX = true>
void panels_q6k(const PanelParts (&pp)[NP], int64_t nsb, const ref::ActQ8Row* const (&xs)[NP], __m512 (&acc)[NP]) {
    constexpr int NX = kOneX ? 1 : NP;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int j = 0; j < NP; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* L[NP];
        const uint8_t* scs[NP];
        const int8_t* xq[NX];
        const int32_t* ns[NP];
        for (int j = 0; j < NP; ++j) {
            L[j] = pp[j].lev + sb * kQ6kSbLevelBytes;
            scs[j] = pp[j].sc + sb * kQ6kSbScaleBytes;
            const ref::ActQ8Row& x = *xs[kOneX ? 0 : j];
            if (j < NX) xq[j] = x.qs + 256 * sb;
            ns[j] = x.nsum + 64 * sb;
        }
        __m512i S[NP];
        for (int j = 0; j < NP; ++j) S[j] = _mm512_setzero_si512();
#pragma GCC unroll 1  // not unrolled: 0.6-3.7 % faster decode tokens (session 29, see panels_q4k)
        for (int o = 0; o < 8; ++o) {
            for (int j = 0; j < NP; ++j) prefetch_ahead<6>(L[j] + 384 * o, kQ6Ahead);  // the octet's 6 lines (see above)
            for (int j = 0; j < NP; ++j) prefetch_ahead_l2<6>(L[j] + 384 * o, kQ6AheadL2);
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {  // granule 2 o + h: quads 4 h .. 4 h + 3
                __m512i I[NP], H[NP];
                for (int j = 0; j < NP; ++j) {
                    I[j] = _mm512_set1_epi32(32 * ns[j][8 * o + 4 * h]);
                    H[j] = load_once(L[j] + q6k_top_at(o, h));
                }
#pragma GCC unroll 2
                for (int u = 0; u < 2; ++u) {  // nibble vector 2 h + u: quads 4 h + 2 u, + 1
                    __m512i xa[NX], xb[NX];
                    for (int k = 0; k < NX; ++k) {
                        xa[k] = bcast(xq[k] + 32 * o + 16 * h + 8 * u);
                        xb[k] = bcast(xq[k] + 32 * o + 16 * h + 8 * u + 4);
                    }
                    for (int j = 0; j < NP; ++j) {
                        const __m512i V = load_once(L[j] + q6k_nib_at(o, 2 * h + u));
                        const __m512i la = _mm512_ternarylogic_epi32(gf(H[j], kQ6Top[2 * u]), V, m4, 0xF8);  // A | (B & C)
                        const __m512i lb = _mm512_ternarylogic_epi32(gf(H[j], kQ6Top[2 * u + 1]), _mm512_srli_epi16(V, 4), m4, 0xF8);
                        I[j] = _mm512_dpbusd_epi32(I[j], la, xa[kOneX ? 0 : j]);
                        I[j] = _mm512_dpbusd_epi32(I[j], lb, xb[kOneX ? 0 : j]);
                    }
                }
                for (int j = 0; j < NP; ++j) {
                    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scs[j] + 16 * (2 * o + h))));
                    S[j] = _mm512_add_epi32(S[j], _mm512_mullo_epi32(I[j], sc));
                }
            }
        }
        for (int j = 0; j < NP; ++j) {
            const __m512 dx = _mm512_set1_ps(xs[kOneX ? 0 : j]->dxv[64 * sb]);
            const uint8_t* dd = pp[j].d + sb * kQ6kSbDBytes;
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dd)));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[j]), _mm512_mul_ps(d, dx), acc[j]);
        }
    }
}
template <int NP>
void panels_q6k(const PanelParts (&pp)[NP], int64_t nsb, const ref::ActQ8Row& x, __m512 (&acc)[NP]) {
    const ref::ActQ8Row* xs[NP];
    for (int j = 0; j < NP; ++j) xs[j] = &x;
    panels_q6k<NP, true>(pp, nsb, xs, acc);
}

// Q8_0: NP panels at once (pb bytes apart). Per block (32 values) and panel the 8 stored quad vectors (u8 q + 128)
// go straight into one vpdpbusd chain against the broadcast activation quads, seeded with
// 128 x nsum (= -128 x the block's activation sum), so I = sum q x exactly; then
// acc = fma(float(I), d * dx, acc) per block in K order: gemv16_q80's chain, the same bits.
// Not prefetch_next (the other per-block types' spread PREFETCHT2 of the next panels): its 34
// PREFETCHT2 per block cost more than they hid (panel_gemv_bench Q8_0 64 1024 2048, 2 MiB pages, one
// thread: 21.4-23.0 GB/s with them, 24.7-28.6 without; two threads 33.9-44.0 against 35.7-39.7).
// But each quad line PREFETCHT0 kQ80Ahead bytes ahead (on through the d bytes into the next panel,
// the next in the call's stream). Session 48 (the AMX VM) against no prefetch, OLMoE Q8_0 decode
// tokens alternating in one run (moe bench -p 0 -n 128 -t 2 -r 3): PREFETCHT2 2 KiB ahead 8-9 %
// faster, 4 KiB 5-6 %; PREFETCHT0 1 KiB or 2 KiB 7-9 %; T0 1 KiB and T2 2 KiB both 6-7 %; the T2
// 2 KiB was kept. Session 52 (the Emerald Rapids VM without AMX, the harness's phase rotated per
// repetition, -r 8): the T0 1 KiB alone took 0.932-0.939 the time per token of that T2 on two
// threads, 0.927 on one; 256 B to 1.5 KiB ahead alike (0.930-0.947), T0 and T2 together 0.957-0.968,
// no prefetch 0.963-0.968 (docs/PERFORMANCE.md). The other types keep their T2 streams: without
// them Q4_K_M 1.028 the time, Q5_K_M 1.005, Q4_0 1.009, Q5_0 1.012, MXFP4 1.002.
inline constexpr int kQ80Ahead = 1024;
template <int NP>
[[gnu::always_inline]] inline void block_q80(const uint8_t* const (&L)[NP], const uint8_t* const (&dd)[NP], int64_t g,
                                             const ref::ActQ8Row& x, __m512 (&acc)[NP]) {
    const int8_t* xb = x.qs + 32 * g;
    const __m512i seed = _mm512_set1_epi32((x.nsum[8 * g] + x.nsum[8 * g + 4]) * 128);
    __m512i I[NP];
    for (int j = 0; j < NP; ++j) I[j] = seed;
#pragma GCC unroll 8
    for (int qi = 0; qi < 8; ++qi) {
        const __m512i xv = bcast(xb + 4 * qi);
        const uint8_t* Lq[NP];  // panel j's quad vector qi
        for (int j = 0; j < NP; ++j) Lq[j] = L[j] + 512 * g + 64 * qi;
        for (int j = 0; j < NP; ++j) prefetch_ahead<1>(Lq[j], kQ80Ahead);
        for (int j = 0; j < NP; ++j) I[j] = _mm512_dpbusd_epi32(I[j], load_once(Lq[j]), xv);
    }
    const __m512 dx = _mm512_set1_ps(x.dxv[8 * g]);
    for (int j = 0; j < NP; ++j) {
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dd[j] + 32 * g)));
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[j]), _mm512_mul_ps(d, dx), acc[j]);
    }
}
// nb = K / 32 blocks: whole groups of 8 blocks (256 values, the loop unrolled), then the nb % 8 left.
template <int NP>
void panels_q80(const uint8_t* P, int64_t pb, int64_t nb, const ref::ActQ8Row& x, __m512 (&acc)[NP]) {
    for (int j = 0; j < NP; ++j) acc[j] = _mm512_setzero_ps();
    const uint8_t* L[NP];
    const uint8_t* dd[NP];
    for (int j = 0; j < NP; ++j) {
        L[j] = P + j * pb;
        dd[j] = P + j * pb + nb * kQ80BlkLevelBytes;
    }
    const int64_t nsb = nb / 8;
    for (int64_t sb = 0; sb < nsb; ++sb) {
#pragma GCC unroll 8
        for (int b = 0; b < 8; ++b) block_q80<NP>(L, dd, 8 * sb + b, x, acc);
    }
    for (int64_t g = 8 * nsb; g < nb; ++g) block_q80<NP>(L, dd, g, x, acc);
}

// Q4_0 (gemv_blocks): per block four nibble vectors as panels_q4k's granule: the low nibbles as
// they are, the high ones in place (x 16, shifted back: exact), the offset 8 as the seed 8 x nsum.
struct DecQ40 {
    static constexpr int kLevelBytes = kQ40BlkLevelBytes, kOffset = 8, kHiShift = 4;
    static constexpr bool kGroups = true;
    struct Blk {};
    // Members set in a written constructor: GCC compiles an implicit one (default member
    // initializers) without the file's target pragma, which fails in the portable build.
    __m512i m4, mf0;
    DecQ40() : m4(_mm512_set1_epi8(0x0F)), mf0(_mm512_set1_epi8(static_cast<char>(0xF0))) {}
    Blk block(const uint8_t*) const { return {}; }
    void levels(const Blk&, __m512i V, int, __m512i& lo, __m512i& hi) const {
        lo = _mm512_and_si512(V, m4);
        hi = _mm512_and_si512(V, mf0);
    }
    __m512 scale(const uint8_t* P, int64_t nb, int64_t g) const {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + nb * kQ40BlkLevelBytes + 32 * g)));
    }
};

// Q5_K: as panels_q4k with 5-bit levels. Per granule 4 level vectors and one side vector, each
// loaded once. Vector v's quad 2 v + 1 stays in place (v & 0xF8 = 8 x level: its sums come out x 8,
// exact, shifted back per granule); quad 2 v's level vector is (v & 7) | its bits 3-4 (bits 2 v,
// 2 v + 1 of the side byte, moved by one vgf2p8affineqb, all other bits zero) by one vpternlogd.
// |I_g| <= 32 x 31 x 128 < 2^17, so S += sc_g I_g by vpmulld; M as mins32; per super-block the two
// FMAs of the Q5_K block kernels (gemv16<G45_K<true>>, DQ45_K<true>), their bits.
// Memory stream: Q5_K matrices are region-major and a granule's side vector comes before its level
// vectors (load order), one panel at a time, PREFETCHT0 of each granule's 5 lines kQ5Ahead bytes
// (two super-blocks) ahead: panel_gemv_bench Q5_K 256 1024 2048 one thread 36.6 GB/s, two 71.9
// (panel-major, two panels at a time with PREFETCHT2 of the next two and PREFETCHT0 four granules
// ahead: 32.0 / 60.6; the block GEMV 37.3 / 66.7). Without the software prefetch 28.0 / 54.5; one
// or three super-blocks ahead: 36.5 / 71.0, 35.5 / 70.7; two adjacent panels at a time 31.0 / 60.6.
// In the model two panels from the call's two halves are faster (panel_gemv_avx512, session 49).
constexpr int kSide[4][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}}, kTo34[2] = {3, 4};
constexpr long long kQ5Side[4] = {gf_matrix(2, kSide[0], kTo34), gf_matrix(2, kSide[1], kTo34), gf_matrix(2, kSide[2], kTo34),
                                  gf_matrix(2, kSide[3], kTo34)};
inline constexpr int kQ5Ahead = 2 * kQ5kSbLevelBytes;
// And a PREFETCHT2 of the same lines twice as far ahead (as Q4_K's kQ4AheadL2): OLMoE Q5_K_M decode
// tokens alternating per 4 in one run, 0.7-1.4 % faster in four runs (1.5 x kQ5Ahead: 0.5-1.4 %;
// session 49, docs/PERFORMANCE.md).
inline constexpr int kQ5AheadL2 = 2 * kQ5Ahead;
template <int NP>
void panels_q5k(const PanelParts (&pp)[NP], int64_t nsb, const ref::ActQ8Row& x, __m512 (&acc)[NP]) {
    const __m512i m7 = _mm512_set1_epi8(7), mf8 = _mm512_set1_epi8(static_cast<char>(0xF8));
    for (int j = 0; j < NP; ++j) acc[j] = _mm512_setzero_ps();
    alignas(64) uint8_t su[NP][kQ4kScalesUnpacked];  // the super-block's scales, unpacked
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* L[NP];
        const uint8_t* scs[NP];
        for (int j = 0; j < NP; ++j) {
            L[j] = pp[j].lev + sb * kQ5kSbLevelBytes;
            q4k_scales_unpack(pp[j].sc + sb * kQ5kSbScaleBytes, su[j]);
            scs[j] = su[j];
        }
        const int8_t* xq = x.qs + 256 * sb;
        const int32_t* ns = x.nsum + 64 * sb;
        __m512i S[NP];
        for (int j = 0; j < NP; ++j) S[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
            for (int j = 0; j < NP; ++j) prefetch_ahead<5>(L[j] + 320 * g, kQ5Ahead);  // the granule's 5 lines (see above)
            for (int j = 0; j < NP; ++j) prefetch_ahead_l2<5>(L[j] + 320 * g, kQ5AheadL2);
            const int8_t* xg = xq + 32 * g;
            __m512i Il[NP], Ih[NP], H[NP];
            for (int j = 0; j < NP; ++j) {
                Il[j] = Ih[j] = _mm512_setzero_si512();
                H[j] = load_once(L[j] + q5k_side_at(g));
            }
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) {
                const __m512i xl = bcast(xg + 8 * v), xh = bcast(xg + 8 * v + 4);
                for (int j = 0; j < NP; ++j) {
                    const __m512i V = load_once(L[j] + q5k_lev_at(g, v));
                    const __m512i la = _mm512_ternarylogic_epi32(gf(H[j], kQ5Side[v]), V, m7, 0xF8);  // A | (B & C)
                    Il[j] = _mm512_dpbusd_epi32(Il[j], la, xl);
                    Ih[j] = _mm512_dpbusd_epi32(Ih[j], _mm512_and_si512(V, mf8), xh);
                }
            }
            for (int j = 0; j < NP; ++j) {
                const __m512i scg = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scs[j] + 16 * g)));
                S[j] = _mm512_add_epi32(S[j], _mm512_mullo_epi32(_mm512_add_epi32(Il[j], _mm512_srai_epi32(Ih[j], 3)), scg));
            }
        }
        const uint8_t* dd[NP];
        for (int j = 0; j < NP; ++j) dd[j] = pp[j].d + sb * kQ5kSbDBytes;
        const int32_t* nss[NP];
        float dxs[NP];
        for (int j = 0; j < NP; ++j) {
            nss[j] = ns;
            dxs[j] = x.dxv[64 * sb];
        }
        sb_end_q45<NP>(scs, dd, nss, dxs, S, acc);
    }
}

// NP panels of type t (Q4_K, Q5_K or Q6_K: panel_gemv_avx512's region-major types) at once against x.
template <int NP>
void panels_q456k(DType t, const PanelParts (&pp)[NP], int64_t nsb, const ref::ActQ8Row& x, __m512 (&acc)[NP]) {
    if (t == DType::Q4_K) panels_q4k<NP>(pp, nsb, x, acc);
    else if (t == DType::Q5_K) panels_q5k<NP>(pp, nsb, x, acc);
    else panels_q6k<NP>(pp, nsb, x, acc);
}

}  // namespace

void panel_gemv_avx512(const PanelMatrix& w, const ref::ActQ8Row& x, int64_t n0, int64_t n1, float* y) {
    const size_t pb = panel_bytes(w.type, w.K);
    check_range(w, n0, n1);
    if (w.type == DType::Q5_0) return detail::panel_gemv_q50(w, x, n0, n1, y);  // K step 32: its own file
    if (w.type == DType::MXFP4) return detail::gemv_mxfp4_avx512(w, x, n0, n1, y);  // K step 32
    if (w.type == DType::Q4_0) return gemv_blocks<DecQ40>(w, x, n0, n1, y);
    if (w.type == DType::Q3_K || w.type == DType::Q2_K) return detail::panel_gemv_q3k_q2k(w, x, n0, n1, y);  // GFNI levels
    const int64_t nsb = w.K / 256, nb = w.K / 32;  // super-blocks (K-quants), blocks (Q8_0)
    const int64_t n_panels = (w.N + 15) / 16;
    const int64_t pbi = static_cast<int64_t>(pb);
    const auto parts = [&](int64_t p) { return panel_parts(w.type, w.K, w.panels, n_panels, p); };
    // Q8_0: two panels at a time, panel i of the call's first half of rows beside panel i of its
    // second (the stride between the two passed to panels_q80), then the odd panel and a partial
    // last one (run_halves). OLMoE Q8_0 decode tokens, token by token against four adjacent panels at a time:
    // -7 % on two threads, -12 % on one; panel i of each quarter (four streams): about half the
    // gain (session 33, docs/PERFORMANCE.md).
    if (w.type == DType::Q8_0)
        return run_halves(
            n0, n1, y, [&](int64_t p0, int64_t p1, __m512(&acc)[2]) { panels_q80<2>(w.panels + p0 * pbi, (p1 - p0) * pbi, nb, x, acc); },
            [&](int64_t p, __m512(&acc)[1]) { panels_q80<1>(w.panels + p * pbi, pbi, nb, x, acc); });
    // Q4_K, Q5_K, Q6_K: the call's whole panels in two halves, panel i of the first half beside panel i
    // of the second (two level streams, each prefetched ahead; the template's chain per panel, so
    // the same bits). OLMoE Q4_K_M decode tokens: Q4_K 2-6.5 % faster on two threads and 5.5 % on
    // one, equal when the VM's bandwidth is starved; four quarters gained less (session 29); Q6_K
    // 6.1 % / 6.5 % faster with its prefetch 2 KiB ahead (session 33, see kQ6Ahead). On a Xeon
    // (Emerald Rapids, two threads) one panel at a time for both types was 1.8-4.7 % slower per
    // token (session 43). Q5_K (OLMoE Q5_K_M, 97 Q5_K matrices, tokens alternating per 4 with one
    // panel at a time): 4.1-4.2 % faster in three runs (session 49; panel_gemv_bench on an earlier
    // VM favoured one panel at a time, see panels_q5k).
    run_halves(
        n0, n1, y,
        [&](int64_t p0, int64_t p1, __m512(&acc)[2]) {
            const PanelParts pp[2] = {parts(p0), parts(p1)};
            panels_q456k<2>(w.type, pp, nsb, x, acc);
        },
        [&](int64_t p, __m512(&acc)[1]) {
            const PanelParts pp[1] = {parts(p)};
            panels_q456k<1>(w.type, pp, nsb, x, acc);
        });
}

bool panel_gemv_pair_supported(DType t) { return t == DType::Q4_K || t == DType::Q6_K; }

// Panel i of matrix 0 beside panel i of matrix 1: two long level streams (whole matrices), where
// a matrix alone runs its two halves. Token by token in OLMoE Q4_K_M decode (docs/PERFORMANCE.md,
// session 47) the experts' gate and up matrices so were faster than each in halves (a matrix's
// halves are only ~0.5 MiB apart; streams that short ran ~10 % below long ones in a pattern
// benchmark). The templates' chain per panel, so the bits equal panel_gemv_avx512's.
void panel_gemv_pair_avx512(const PanelMatrix (&w)[2], const ref::ActQ8Row* const (&x)[2], int64_t n0, int64_t n1,
                            float* const (&y)[2]) {
    if (w[0].type != w[1].type || w[0].K != w[1].K || w[0].N != w[1].N || !panel_gemv_pair_supported(w[0].type))
        throw_error("kernels", "paired panel GEMV of ", dtype_name(w[0].type), " ", w[0].N, " x ", w[0].K, " and ",
                    dtype_name(w[1].type), " ", w[1].N, " x ", w[1].K,
                    ": both matrices must have one shape and type, Q4_K or Q6_K (run them one by one otherwise)");
    check_range(w[0], n0, n1);
    const int64_t nsb = w[0].K / 256, n_panels = (w[0].N + 15) / 16;
    const bool one_x = x[0] == x[1];
    for (int64_t n = n0; n < n1; n += 16) {
        const PanelParts pp[2] = {panel_parts(w[0].type, w[0].K, w[0].panels, n_panels, n / 16),
                                  panel_parts(w[1].type, w[1].K, w[1].panels, n_panels, n / 16)};
        __m512 acc[2];
        if (w[0].type == DType::Q4_K) {
            if (one_x) panels_q4k<2, true>(pp, nsb, x, acc);
            else panels_q4k<2, false>(pp, nsb, x, acc);
        } else {
            if (one_x) panels_q6k<2, true>(pp, nsb, x, acc);
            else panels_q6k<2, false>(pp, nsb, x, acc);
        }
        const int nc = static_cast<int>(n1 - n < 16 ? n1 - n : 16);
        const __mmask16 mk = static_cast<__mmask16>((1u << nc) - 1u);
        _mm512_mask_storeu_ps(y[0] + (n - n0), mk, acc[0]);
        _mm512_mask_storeu_ps(y[1] + (n - n0), mk, acc[1]);
    }
}

}  // namespace moe::kernels::panel

#pragma GCC diagnostic pop
MOE_TARGET_POP
