#pragma once
// The panel engine of the AVX-512 int8 kernels (prefill: calls with m > 2 rows): the column-
// interleaved panel, its per-call repack from the blocks, and rows_block over it. Part of
// qmatmul_avx512.h (read its header comment): include that header, not this one.

#include "kernels/cpu/panel_prefetch.h"  // NextPanels, SlicedPrefetch

namespace moe::kernels::avx512 {

// ---------------------------------------------------------------- engine
// A panel is 16 weight rows (columns of y) repacked "column-interleaved": for every 4 consecutive
// values k..k+3 one zmm whose 32-bit lane c holds the 4 levels of column c, so one vpdpbusd with
// the 4 activation bytes broadcast adds 4 products to each of the 16 columns' integer sums. Per
// granule (kG values) and activation row: the integer sums I (exact; seeded with -2^shift * sum of
// the activations), then acc = fma(float(I), ws * dx, acc) and, for Q4_K/Q5_K after each 32-value
// group, acc = fma(-wm, dxs, acc): one sequential f32 chain per output, in K order (Q2_K / Q3_K:
// the integer sums times the integer scales summed per super-block, then sb_flush). That is also
// exactly what the scalar and AVX2 paths compute (qmatmul_generic.cpp, std::fma), so every path
// gives the same bits, whatever m, the column range or the thread.
struct Panel {
    __m512i* q;   // [K/4] quads
    float* ws;    // [K/kG][16] (kSbInt: int32 scales)
    float* wm;    // [K/32][16] (Q2_K: [K/16][16] int32 mins)
    float* wd;    // kSbInt: [K/256][2][16] d, dmin
    // D::kNibbles (the stored Q4_K panel, qmatmul_panel_gemm.cpp): the levels are read from there
    // (64-byte vector v of granule g at lev + 256 g + 64 v: quads 2 v, 2 v + 1 as its low and high
    // nibbles; with D::nibble_table() each nibble is a code mapped to its level by vpshufb, MXFP4)
    // instead of q
    const uint8_t* lev = nullptr;
};
// D::kF32Halves: the super-block's granule chain S = sum_g sc_g I_g may run as two f32 FMA chains of
// half the granules each, every partial sum of a half being an integer of magnitude below 2^24.
template <class D>
constexpr bool f32_halves_of() {
    if constexpr (requires { D::kF32Halves; }) return D::kF32Halves;
    else return false;
}
template <class D>
constexpr bool nibbles_of() {
    if constexpr (requires { D::kNibbles; }) return D::kNibbles;
    else return false;
}

// Scales of super-block sb of up to 16 weight rows as [granule][column] (ws) and [group][column]
// (wm) f32 vectors; also runs D::begin for each row (st).
template <class D>
void pack_scales(const uint8_t* const* w, int nc, int64_t sb, int64_t nblocks, typename D::State* st, float* ws_out,
                 float* wm_out, float* wd_out) {
    constexpr int kGran = D::kSbElems / D::kG;
    if constexpr (requires { D::scales16(w, sb, ws_out, wm_out, wd_out); }) {
        // the decoder reads the 16 rows' scales as [granule][column] vectors itself (w[nc..15]: row 0)
        for (int c = 0; c < nc; ++c) D::begin(st[c], w[c], sb, nblocks);
        D::scales16(w, sb, ws_out, wm_out, wd_out);
    } else if constexpr (sbint_of<D>()) {
        static_assert(kGran == 16, "super-block chain without scales16: 16 granules of 16");
        __m512i sv[16], tv[16];
        alignas(64) float dv[32] = {};
        for (int c = 0; c < nc; ++c) {
            D::begin(st[c], w[c], sb, nblocks);
            dv[c] = D::sb_d(w[c], sb);
            if constexpr (min16_of<D>()) dv[16 + c] = D::sb_dmin(w[c], sb);
        }
        for (int c = 0; c < 16; ++c) sv[c] = c < nc ? D::int_scales(w[c], sb) : _mm512_setzero_si512();
        transpose16(sv, tv);
        for (int k = 0; k < 16; ++k) _mm512_store_si512(ws_out + k * 16, tv[k]);
        if constexpr (min16_of<D>()) {
            for (int c = 0; c < 16; ++c) sv[c] = c < nc ? D::int_mins(w[c], sb) : _mm512_setzero_si512();
            transpose16(sv, tv);
            for (int k = 0; k < 16; ++k) _mm512_store_si512(wm_out + k * 16, tv[k]);
        }
        _mm512_store_ps(wd_out, _mm512_load_ps(dv));
        _mm512_store_ps(wd_out + 16, _mm512_load_ps(dv + 16));
    } else if constexpr (D::kVecScales) {
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
    for (int c = 0; c < 16; ++c) w[c] = static_cast<const uint8_t*>(a.w) + (n + (c < nc ? c : 0)) * static_cast<int64_t>(a.w_row_stride);
    constexpr int kGran = D::kSbElems / D::kG;  // granules per super-block
    for (int64_t sb = 0; sb < nsb; ++sb) {
        typename D::State st[16];
        pack_scales<D>(w, nc, sb, nblocks, st, p.ws + sb * kGran * 16, p.wm + sb * wm_per_sb<D>() * 16, p.wd + sb * 32);
        for (int u = 0; u < D::kUnits; ++u) {
            __m512i lv[16];
            for (int c = 0; c < 16; ++c) lv[c] = c < nc ? D::levels(st[c], w[c], sb, u, nblocks) : _mm512_setzero_si512();
            transpose16(lv, p.q + (sb * D::kUnits + u) * 16);
        }
    }
}

// Q4_K / Q5_K: M = sum_g m_g nsum_g (int32, exact) of super-block sb, lane c = column c, from the
// 8 mins per 32 values as word pairs mp[k] = m_2k | m_2k+1 << 16: one vpdpwssd per pair of
// granules (the mins 0..63 and the granule sums |nsum| <= 32 * 128 fit int16).
inline void mins32_pairs(const ref::ActQ8Row& x, int64_t sb, __m512i pr[4]) {
    const auto ns32 = [&](int64_t g) { return x.nsum[8 * g] + x.nsum[8 * g + 4]; };  // granule g of 32
    for (int k = 0; k < 4; ++k) {
        const int64_t g = 8 * sb + 2 * k;
        const uint32_t pair = (static_cast<uint32_t>(ns32(g)) & 0xFFFFu) | (static_cast<uint32_t>(ns32(g + 1)) << 16);
        pr[k] = _mm512_set1_epi32(static_cast<int32_t>(pair));
    }
}
// mins32 from the activation row's pairs (mins32_pairs), which rows_block forms once per row and
// super-block for all its panels
inline __m512i mins32(const __m512i mp[4], const __m512i pr[4]) {
    __m512i M = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) M = _mm512_dpwssd_epi32(M, mp[k], pr[k]);
    return M;
}
inline __m512i mins32(const __m512i mp[4], const ref::ActQ8Row& x, int64_t sb) {
    __m512i pr[4];
    mins32_pairs(x, sb, pr);
    return mins32(mp, pr);
}

// M of super-block sb from its packed mins (pack_scales' wm for the super-block): Q2_K 16 granules
// of 16 (int32 mins times nsum), Q4_K / Q5_K mins32.
template <class D>
inline __m512i sb_mins(const float* wm_sb, const ref::ActQ8Row& x, int64_t sb) {
    if constexpr (min16_of<D>()) {
        __m512i M = _mm512_setzero_si512();
        for (int k = 0; k < 16; ++k)
            M = _mm512_add_epi32(M, _mm512_mullo_epi32(_mm512_load_si512(wm_sb + k * 16), _mm512_set1_epi32(x.nsum[4 * (16 * sb + k)])));
        return M;
    } else {
        __m512i mp[4];
        for (int k = 0; k < 4; ++k) mp[k] = _mm512_load_si512(wm_sb + k * 16);
        return mins32(mp, x, sb);
    }
}

// A stored nibble vector b (the panel's quads 2 v and 2 v + 1 as low and high nibbles) as its two
// int8 quads; with D::nibble_table() each nibble is a code mapped to its level (MXFP4).
template <class D>
[[gnu::always_inline]] inline void nibble_quads(__m512i b, __m512i& lo, __m512i& hi) {
    const __m512i lo4 = _mm512_set1_epi8(0x0F);
    lo = _mm512_and_si512(b, lo4);
    hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), lo4);
    if constexpr (requires { D::nibble_table(); }) {
        lo = _mm512_shuffle_epi8(D::nibble_table(), lo);
        hi = _mm512_shuffle_epi8(D::nibble_table(), hi);
    }
}

// The exact integer sums I[i][j] (activation row i, panel j: lane c = column c) of granule g,
// seeded with -2^shift * the granule's activation sum (qmatmul.h).
template <class D, int MR, int NP>
[[gnu::always_inline]] inline void granule_isums(const ref::ActQ8Row* x, const Panel* p, int64_t g, __m512i (&I)[MR][NP]) {
    constexpr int kQuads = D::kG / 4, kSub = D::kG / 16;
    const int64_t k0 = g * D::kG, i16 = k0 / 16;
    for (int i = 0; i < MR; ++i) {
        int32_t ns = x[i].nsum[4 * i16];
        if constexpr (kSub == 2) ns += x[i].nsum[4 * i16 + 4];
        const __m512i init =
            D::kShift >= 0 ? _mm512_set1_epi32(ns * (1 << (D::kShift >= 0 ? D::kShift : 0))) : _mm512_setzero_si512();
        for (int j = 0; j < NP; ++j) I[i][j] = init;
    }
    if constexpr (nibbles_of<D>()) {
        static_assert(D::kG == 32, "nibble panels: 32-value granules");
        for (int v = 0; v < 4; ++v) {
            __m512i wl[NP], wh[NP];
            for (int j = 0; j < NP; ++j) nibble_quads<D>(_mm512_loadu_si512(p[j].lev + 256 * g + 64 * v), wl[j], wh[j]);
            for (int i = 0; i < MR; ++i) {
                int32_t xl, xh;
                std::memcpy(&xl, x[i].qs + k0 + 8 * v, 4);
                std::memcpy(&xh, x[i].qs + k0 + 8 * v + 4, 4);
                const __m512i bl = _mm512_set1_epi32(xl), bh = _mm512_set1_epi32(xh);
                for (int j = 0; j < NP; ++j) {
                    I[i][j] = _mm512_dpbusd_epi32(I[i][j], wl[j], bl);
                    I[i][j] = _mm512_dpbusd_epi32(I[i][j], wh[j], bh);
                }
            }
        }
        return;
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
}

// pf (may be null): the next panels' requests, one slice per 256 values of K (rows_all).
template <class D, int MR, int NP>
void rows_block(const MatmulArgs& a, const unsigned char* act, size_t act_stride, int64_t r0, int64_t n,
                const int* nc, const Panel* p, panel::SlicedPrefetch* pf = nullptr) {
    ref::ActQ8Row x[MR];
    for (int i = 0; i < MR; ++i) x[i] = ref::act_q8_row(const_cast<unsigned char*>(act + (r0 + i) * act_stride), a.K);
    // acc stays in registers only if every loop over it is unrolled (GCC otherwise kept a stack copy,
    // zeroed at entry and stored then re-read before the masked stores)
    __m512 acc[MR][NP];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
        for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_setzero_ps();
    if constexpr (sbint_of<D>()) {
        // the super-block integer chain: S = sum_g sc_g I_g per super-block, then acc = fma(float(S),
        // d * dx, acc) and, for the types with mins, acc = fma(float(M), dmin * dx, acc) (qmatmul.h)
        constexpr int kGran = D::kSbElems / D::kG;
        const int64_t nsb = a.K / D::kSbElems;
        for (int64_t sb = 0; sb < nsb; ++sb) {
            if (pf) pf->step();
            __m512i S[MR][NP];
            if constexpr (f32_halves_of<D>()) {
                // S in two f32 FMA chains of kGran / 2 granules, each converted back to int32: every
                // partial sum of a half is an integer below 2^24 (D::kF32Halves), so each FMA is exact
                // and S the same integers; 2 uops per granule and row (convert, FMA) where vpmulld +
                // vpaddd take 3, on the ports the vpdpbusd need (docs/PERFORMANCE.md, session 54)
                for (int h = 0; h < 2; ++h) {
                    __m512 Sf[MR][NP];
                    for (int i = 0; i < MR; ++i)
                        for (int j = 0; j < NP; ++j) Sf[i][j] = _mm512_setzero_ps();
                    for (int k = h * kGran / 2; k < (h + 1) * kGran / 2; ++k) {
                        const int64_t g = sb * kGran + k;
                        __m512i I[MR][NP];
                        granule_isums<D, MR, NP>(x, p, g, I);
                        for (int j = 0; j < NP; ++j) {
                            const __m512 sc = _mm512_cvtepi32_ps(_mm512_load_si512(p[j].ws + g * 16));
                            for (int i = 0; i < MR; ++i) Sf[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[i][j]), sc, Sf[i][j]);
                        }
                    }
                    for (int i = 0; i < MR; ++i)
                        for (int j = 0; j < NP; ++j)
                            S[i][j] = h == 0 ? _mm512_cvtps_epi32(Sf[i][j]) : _mm512_add_epi32(S[i][j], _mm512_cvtps_epi32(Sf[i][j]));
                }
            } else {
                for (int i = 0; i < MR; ++i)
                    for (int j = 0; j < NP; ++j) S[i][j] = _mm512_setzero_si512();
                for (int k = 0; k < kGran; ++k) {
                    const int64_t g = sb * kGran + k;
                    __m512i I[MR][NP];
                    granule_isums<D, MR, NP>(x, p, g, I);
                    for (int j = 0; j < NP; ++j) {
                        const __m512i sc = _mm512_load_si512(p[j].ws + g * 16);
                        for (int i = 0; i < MR; ++i) S[i][j] = _mm512_add_epi32(S[i][j], _mm512_mullo_epi32(I[i][j], sc));
                    }
                }
            }
            // per row: the activation side (dx, the mins' pairs) formed once for the NP panels; each
            // acc[i][j] keeps its own chain order (S term, then M term). Unrolled (GCC kept it a loop):
            // the rows' scalar mins pairs and f32 tails interleave; panel_gemm_bench Q4_K m = 64 +4 %
            // at K = 1024, +2.5 % at K = 2048, Q6_K unchanged.
#pragma GCC unroll 4
            for (int i = 0; i < MR; ++i) {
                const __m512 dx = _mm512_set1_ps(x[i].dxv[64 * sb]);
                if constexpr (min16_of<D>()) {
                    for (int j = 0; j < NP; ++j) {
                        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[i][j]), _mm512_mul_ps(_mm512_load_ps(p[j].wd + sb * 32), dx),
                                                    acc[i][j]);
                        const __m512i M = sb_mins<D>(p[j].wm + sb * wm_per_sb<D>() * 16, x[i], sb);
                        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(M), _mm512_mul_ps(_mm512_load_ps(p[j].wd + sb * 32 + 16), dx),
                                                    acc[i][j]);
                    }
                } else if constexpr (D::kMin) {
                    __m512i pr[4];
                    mins32_pairs(x[i], sb, pr);
                    for (int j = 0; j < NP; ++j) {
                        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[i][j]), _mm512_mul_ps(_mm512_load_ps(p[j].wd + sb * 32), dx),
                                                    acc[i][j]);
                        const float* wm = p[j].wm + sb * wm_per_sb<D>() * 16;
                        const __m512i mp[4] = {_mm512_load_si512(wm), _mm512_load_si512(wm + 16), _mm512_load_si512(wm + 32),
                                               _mm512_load_si512(wm + 48)};
                        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mins32(mp, pr)),
                                                    _mm512_mul_ps(_mm512_load_ps(p[j].wd + sb * 32 + 16), dx), acc[i][j]);
                    }
                } else {
                    for (int j = 0; j < NP; ++j)
                        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[i][j]), _mm512_mul_ps(_mm512_load_ps(p[j].wd + sb * 32), dx),
                                                    acc[i][j]);
                }
            }
        }
    } else {
        constexpr int kPerSlice = D::kG < 256 ? 256 / D::kG : 1;  // granules per prefetch slice
        const int64_t ng = a.K / D::kG;
        for (int64_t g = 0; g < ng; ++g) {
            if (pf && g % kPerSlice == 0) pf->step();
            const int64_t i16 = g * D::kG / 16;
            __m512i I[MR][NP];
            granule_isums<D, MR, NP>(x, p, g, I);
            for (int j = 0; j < NP; ++j) {
                const __m512 ws = _mm512_load_ps(p[j].ws + g * 16);
                for (int i = 0; i < MR; ++i)
                    acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[i][j]), _mm512_mul_ps(ws, _mm512_set1_ps(x[i].dxv[4 * i16])),
                                                acc[i][j]);
                if constexpr (D::kMin) {  // kG == 32: one group per granule
                    const __m512 wm = _mm512_load_ps(p[j].wm + g * 16);
                    for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fnmadd_ps(wm, _mm512_set1_ps(x[i].dxs[g]), acc[i][j]);
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < NP; ++j) {
        const __mmask16 keep = static_cast<__mmask16>((1u << nc[j]) - 1u);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(a.y + (r0 + i) * a.ldy + (n + 16 * j - a.n0), keep, acc[i][j]);
    }
}

// rows_all requests the next panels (NextPanels, panel_prefetch.h) a slice per 256 values of each
// row block, so that they arrive from DRAM while this pair computes. Spread out, not one burst ahead
// of the pair: panel_gemm_bench Q4_K, 128 matrices of 1024 x 2048 (beyond L3), the two forms
// alternating pass by pass, 30-40 rounds: m = 32 1.10x, m = 64 1.06-1.09x, m = 128 1.02x, m = 16
// 1.02x; Q6_K 1.04x, Q5_K 1.03x (docs/PERFORMANCE.md). A slice per row block (36 lines of a Q4_K
// pair at m = 64) stalled on the line fill buffers: 3-4 % of pp512's samples on the instruction after
// the PREFETCHT0s (session 55).
template <class D, int NP>
void rows_all(const MatmulArgs& a, const unsigned char* act, size_t act_stride, int64_t n, const int* nc,
              const Panel* p, const panel::NextPanels& next = {}) {
    panel::SlicedPrefetch pf(next, (a.m + 3) / 4 * ((a.K + 255) / 256));
    int64_t r = 0;
    for (; r + 4 <= a.m; r += 4) rows_block<D, 4, NP>(a, act, act_stride, r, n, nc, p, &pf);
    switch (a.m - r) {
        case 3: rows_block<D, 3, NP>(a, act, act_stride, r, n, nc, p, &pf); break;
        case 2: rows_block<D, 2, NP>(a, act, act_stride, r, n, nc, p, &pf); break;
        case 1: rows_block<D, 1, NP>(a, act, act_stride, r, n, nc, p, &pf); break;
        default: break;
    }
}

struct PanelScratch {
    std::vector<unsigned char> buf;
};
inline PanelScratch& tls_panel() {
    thread_local PanelScratch s;
    return s;
}

// The per-thread buffers of two panels of Kp values (nsb super-blocks) for rows_block.
inline void panel_pair(int64_t Kp, int64_t nsb, Panel p[2]) {
    const size_t qb = static_cast<size_t>(Kp / 4) * 64, wsb = static_cast<size_t>(Kp / 16) * 64,
                 wmb = static_cast<size_t>(Kp / 16) * 64, wdb = static_cast<size_t>(nsb) * 128, pb = qb + wsb + wmb + wdb;
    if (tls_panel().buf.size() < 2 * pb + 64) tls_panel().buf.resize(2 * pb + 64);
    unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(tls_panel().buf.data()) + 63) & ~uintptr_t{63});
    for (int j = 0; j < 2; ++j)
        p[j] = Panel{reinterpret_cast<__m512i*>(base + j * pb), reinterpret_cast<float*>(base + j * pb + qb),
                     reinterpret_cast<float*>(base + j * pb + qb + wsb), reinterpret_cast<float*>(base + j * pb + qb + wsb + wmb)};
}

}  // namespace moe::kernels::avx512
