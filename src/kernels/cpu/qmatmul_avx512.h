#pragma once
// The AVX-512 + VNNI int8 weight-kernel engine (math and determinism argument: qmatmul.h), shared
// by the per-family kernel files behind the one kernel table qmm_avx512_kernel (qmatmul_avx512.cpp):
//   qmatmul_avx512_q8k.cpp       Q8_0, Q4_0, Q4_K, Q5_K, Q6_K (+ their specialised decode GEMVs)
//   qmatmul_avx512_legacy_k.cpp  Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q3_K, Q2_K, MXFP4, TQ2_0
//   qmatmul_avx512_iq.cpp        IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M
//   qmatmul_avx512_kq_gemv.cpp   the decode GEMVs of Q2_K, Q3_K, IQ4_XS (used by the legacy_k table)
//   qmatmul_avx512_q6k_gemv.cpp  the decode GEMV of Q6_K (used by the q8k table)
// A family file defines register decoders D (interface: DQ4_0 / DQ6_K in qmatmul_avx512_q8k.cpp)
// and instantiates qmm512<D> (prefill panel GEMM: repack + rows_block; decode: direct_row or a
// specialised GEMV).
//
// Kernel structure: weight rows are taken 16 at a time (a panel), decoded and transposed into a
// column-interleaved int8 panel in a per-thread buffer (repack below), then every activation row
// (4 at a time) runs over it: per 4 values one vpdpbusd feeds 16 columns, per granule of 16/32
// values one convert, one scale multiply and one FMA (see "engine" below). The decode and the
// transposition are paid once per panel and call, and amortised over the m activation rows.
// Decode-sized calls (m <= 2) skip the panel (direct_row: vpdpbusd along K, then an add/unpack
// tree to per-granule sums) and run the same f32 chain, so both give the same bits.
//
// Include this header only after every other include and inside the AVX-512 target pragma (as the
// qmatmul_avx512*.cpp files do): all its code is compiled for AVX-512; standard-library code must not be,
// or the linker may pick an AVX-512 copy of an inline function for portable callers).

namespace moe::kernels {

// Kernel table of each family (nullptr: not in the family).
MatmulFn qmm512_q8k_kernel(DType t);
MatmulFn qmm512_legacy_k_kernel(DType t);
MatmulFn qmm512_legacy_k_baseline(DType t);  // qmm_avx512_baseline_kernel's Q3_K
MatmulFn qmm512_iq_baseline(DType t);        // and IQ2_XXS
MatmulFn qmm512_iq_kernel(DType t);

namespace avx512 {

inline float h2f(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

inline __m512i cat256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// Up to 16 bytes at byte `off` of 16 rows (masked load: never past the block) as 4 vectors, lane c =
// dword k of row c.
inline void dwords16(const uint8_t* const* p, int64_t off, __mmask16 m, __m512i T[4]) {
    __m512i Z[4];
    for (int i = 0; i < 4; ++i) {
        __m512i z = _mm512_castsi128_si512(_mm_maskz_loadu_epi8(m, p[i] + off));
        z = _mm512_inserti32x4(z, _mm_maskz_loadu_epi8(m, p[i + 4] + off), 1);
        z = _mm512_inserti32x4(z, _mm_maskz_loadu_epi8(m, p[i + 8] + off), 2);
        Z[i] = _mm512_inserti32x4(z, _mm_maskz_loadu_epi8(m, p[i + 12] + off), 3);
    }
    const __m512i a0 = _mm512_unpacklo_epi32(Z[0], Z[1]), a1 = _mm512_unpackhi_epi32(Z[0], Z[1]);
    const __m512i a2 = _mm512_unpacklo_epi32(Z[2], Z[3]), a3 = _mm512_unpackhi_epi32(Z[2], Z[3]);
    T[0] = _mm512_unpacklo_epi64(a0, a2);
    T[1] = _mm512_unpackhi_epi64(a0, a2);
    T[2] = _mm512_unpacklo_epi64(a1, a3);
    T[3] = _mm512_unpackhi_epi64(a1, a3);
}

// The f16 in the low half of each dword, as f32.
inline __m512 f16_lo(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)); }


// The super-block integer chain of qmatmul.h (D::kSbInt, absent = false; the K-quants Q2_K..Q6_K):
// pack_scales stores the integer granule scales as int32 [granule][column] in ws, the mins in wm
// (Q2_K: int32 [granule][column]; Q4_K / Q5_K: [pair k][column] dwords m_2k | m_2k+1 << 16, the
// word pairs of one vpdpwssd against the activations' granule sums) and d, dmin as [2][column]
// floats in wd; the chain runs once per super-block. Q4_K / Q5_K give those vectors straight from
// their 16 rows' headers (D::scales16); Q2_K, Q3_K and Q6_K give a row's 16 integer granule scales
// (D::int_scales), its d (D::sb_d) and, with D::kMin16 (Q2_K), its 16 mins per 16 values
// (D::int_mins) and dmin (D::sb_dmin), transposed here.
template <class D>
constexpr bool sbint_of() {
    if constexpr (requires { D::kSbInt; }) return D::kSbInt;
    else return false;
}
template <class D>
constexpr bool min16_of() {
    if constexpr (requires { D::kMin16; }) return D::kMin16;
    else return false;
}
// wm floats per super-block and column: per-32 mins (Q4_K/Q5_K/Q4_1/Q5_1) or per-16 (Q2_K).
template <class D>
constexpr int wm_per_sb() { return min16_of<D>() ? D::kSbElems / 16 : D::kSbElems / 32; }

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
    // nibbles) instead of q
    const uint8_t* lev = nullptr;
};
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
inline __m512i mins32(const __m512i mp[4], const ref::ActQ8Row& x, int64_t sb) {
    const auto ns32 = [&](int64_t g) { return x.nsum[8 * g] + x.nsum[8 * g + 4]; };  // granule g of 32
    __m512i M = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) {
        const int64_t g = 8 * sb + 2 * k;
        const uint32_t pair = (static_cast<uint32_t>(ns32(g)) & 0xFFFFu) | (static_cast<uint32_t>(ns32(g + 1)) << 16);
        M = _mm512_dpwssd_epi32(M, mp[k], _mm512_set1_epi32(static_cast<int32_t>(pair)));
    }
    return M;
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
        const __m512i lo4 = _mm512_set1_epi8(0x0F);
        for (int v = 0; v < 4; ++v) {
            __m512i wl[NP], wh[NP];
            for (int j = 0; j < NP; ++j) {
                const __m512i b = _mm512_loadu_si512(p[j].lev + 256 * g + 64 * v);
                wl[j] = _mm512_and_si512(b, lo4);
                wh[j] = _mm512_and_si512(_mm512_srli_epi16(b, 4), lo4);
            }
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

template <class D, int MR, int NP>
void rows_block(const MatmulArgs& a, const unsigned char* act, size_t act_stride, int64_t r0, int64_t n,
                const int* nc, const Panel* p) {
    ref::ActQ8Row x[MR];
    for (int i = 0; i < MR; ++i) x[i] = ref::act_q8_row(const_cast<unsigned char*>(act + (r0 + i) * act_stride), a.K);
    __m512 acc[MR][NP];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_setzero_ps();
    if constexpr (sbint_of<D>()) {
        // the super-block integer chain: S = sum_g sc_g I_g per super-block, then acc = fma(float(S),
        // d * dx, acc) and, for the types with mins, acc = fma(float(M), dmin * dx, acc) (qmatmul.h)
        constexpr int kGran = D::kSbElems / D::kG;
        const int64_t nsb = a.K / D::kSbElems;
        for (int64_t sb = 0; sb < nsb; ++sb) {
            __m512i S[MR][NP];
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
            for (int j = 0; j < NP; ++j) {
                const __m512 d = _mm512_load_ps(p[j].wd + sb * 32);
                for (int i = 0; i < MR; ++i) {
                    const __m512 dx = _mm512_set1_ps(x[i].dxv[64 * sb]);
                    acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[i][j]), _mm512_mul_ps(d, dx), acc[i][j]);
                    if constexpr (min16_of<D>() || D::kMin) {
                        const __m512i M = sb_mins<D>(p[j].wm + sb * wm_per_sb<D>() * 16, x[i], sb);
                        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(M), _mm512_mul_ps(_mm512_load_ps(p[j].wd + sb * 32 + 16), dx),
                                                    acc[i][j]);
                    }
                }
            }
        }
    } else {
        const int64_t ng = a.K / D::kG;
        for (int64_t g = 0; g < ng; ++g) {
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
// Last level: u[q], 128-bit lane L = granule L of rows 4q..4q+3 -> R[L], lane c = row c.
inline void granule_lanes(const __m512i u[4], __m512i R[4]) {
    const __m512i c0 = _mm512_shuffle_i32x4(u[0], u[1], 0x44), c1 = _mm512_shuffle_i32x4(u[0], u[1], 0xEE);
    const __m512i c2 = _mm512_shuffle_i32x4(u[2], u[3], 0x44), c3 = _mm512_shuffle_i32x4(u[2], u[3], 0xEE);
    R[0] = _mm512_shuffle_i32x4(c0, c2, 0x88);
    R[1] = _mm512_shuffle_i32x4(c0, c2, 0xDD);
    R[2] = _mm512_shuffle_i32x4(c1, c3, 0x88);
    R[3] = _mm512_shuffle_i32x4(c1, c3, 0xDD);
}
inline void granule_sums(const __m512i dp[16], __m512i R[4]) {
    __m512i t[8], u[4];
    for (int i = 0; i < 8; ++i)
        t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(dp[2 * i], dp[2 * i + 1]),
                                _mm512_unpackhi_epi32(dp[2 * i], dp[2 * i + 1]));
    for (int i = 0; i < 4; ++i)
        u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]), _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    granule_lanes(u, R);
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

// The first panel of a call has no panel before it to prefetch it (panel_share stops at the call's
// rows), so the demand loads of its 16 rows meet DRAM latency one step at a time. Per step, its
// rows' bytes `ahead` steps (of step_bytes each) ahead are prefetched as well (at step 0 steps
// 1..ahead). Measured on the Q6_K GEMV, 2 threads streaming from DRAM (docs/PERFORMANCE.md,
// "Q6_K decode GEMV"): +8 % with 256-row calls (the dense projections' grain), +20 % with 64-row calls.
inline void prefetch_first_panel(const uint8_t* const* w, int64_t step, int64_t nsteps, int64_t step_bytes, int ahead) {
    for (int64_t s = step == 0 ? 1 : step + ahead; s <= step + ahead && s < nsteps; ++s)
        for (int c = 0; c < 16; ++c) {
            const char* p = reinterpret_cast<const char*>(w[c]) + s * step_bytes;
            for (int64_t o = 0; o < step_bytes + 63; o += 64) asm volatile("prefetcht2 %0" : : "m"(p[std::min(o, step_bytes - 1)]));
        }
}

// Decoders of 32-value blocks with one scale field at the start of each block (Q8_0, Q4_0, MXFP4)
// may give kBlockBytes and gather_scale(offs, p): the scales of 16 rows' blocks at byte p of row 0
// and p + offs[c] of row c, as one vector. direct_row then gathers them instead of going through
// pack_scales' per-row scalar stores (measured on gpt-oss-20b shapes, whose K = 2880 keeps Q8_0 off
// its 128-value GEMV: see docs/PERFORMANCE.md, "gpt-oss decode").
template <class D>
constexpr bool gathers_scales() {
    return requires { D::kBlockBytes; };
}

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

// Activations of a 128-value decode step (4 blocks of 32) regrouped so that 128-bit lane k holds
// block k's first 16 values (xA) and its second 16 (xB); a last step of nbs < 4 blocks reads only
// its own bytes (the rest are zero).
inline void act_step128(const int8_t* xq, int nbs, __m512i& xA, __m512i& xB) {
    const __mmask64 k0 = nbs < 2 ? 0xFFFFFFFFull : ~0ull;
    const __mmask64 k1 = nbs == 4 ? ~0ull : nbs == 3 ? 0xFFFFFFFFull : 0ull;
    const __m512i x0 = _mm512_maskz_loadu_epi8(k0, xq), x1 = _mm512_maskz_loadu_epi8(k1, xq + 64);
    xA = _mm512_shuffle_i64x2(x0, x1, 0x88);
    xB = _mm512_shuffle_i64x2(x0, x1, 0xDD);
}

// Dedicated decode GEMVs of the low-bit K-quants and IQ4_XS (qmatmul_avx512_kq_gemv.cpp): 16 rows
// n.. of activation row r; K a multiple of 256, 15 * w_row_stride <= INT32_MAX (gathered scales).
void gemv16_q2k(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc);
void gemv16_q3k(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc);
void gemv16_iq4xs(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc);
void gemv16_q6k(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc);  // qmatmul_avx512_q6k_gemv.cpp
void gemv16_iq2xxs(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc);  // needs AVX512_VBMI
bool gemv_vbmi_usable();  // this CPU has AVX512_VBMI, BITALG and GFNI (the IQ2_XXS GEMV)
bool gemv_gfni_usable();  // this CPU has GFNI
void gemv16_q3k_nogfni(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc);  // gemv16_q3k's fallback

template <class D>
void direct_row(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc, int64_t nblocks,
                int64_t nsb) {
    const uint8_t* w[16];  // rows past nc re-read row n (pack_scales may read 16 rows)
    for (int c = 0; c < 16; ++c) w[c] = static_cast<const uint8_t*>(a.w) + (n + (c < nc ? c : 0)) * static_cast<int64_t>(a.w_row_stride);
    constexpr int kGran = D::kSbElems / D::kG, kSub = D::kG / 16;
    alignas(64) float ws[kGran * 16], wm[16 * 16], wd[32];
    __m512i S = _mm512_setzero_si512();  // kSbInt: the super-block's integer sum
    const int64_t ng = a.K / D::kG;
    const int64_t stride = static_cast<int64_t>(a.w_row_stride);
    bool gather = false;
    __m512i offs = _mm512_setzero_si512();
    if constexpr (gathers_scales<D>()) {
        static_assert(kGran == 2 && D::kUnits == 1, "gathered scales: two 32-value blocks per super-block");
        gather = 15 * stride <= INT32_MAX;
        alignas(64) int32_t off[16];
        for (int c = 0; c < 16; ++c) off[c] = c < nc ? static_cast<int32_t>(c * stride) : 0;  // rows past nc re-read row n
        offs = _mm512_load_si512(off);
    }
    __m512 acc = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
        typename D::State st[16];
        const PanelShare ps = panel_share(a, n, sb, nsb);
        if constexpr (gathers_scales<D>()) {
            if (gather) {
                const uint8_t* b0 = w[0] + 2 * sb * D::kBlockBytes;
                _mm512_store_ps(ws, D::gather_scale(offs, b0));
                _mm512_store_ps(ws + 16, 2 * sb + 1 < nblocks ? D::gather_scale(offs, b0 + D::kBlockBytes) : _mm512_setzero_ps());
            } else {
                pack_scales<D>(w, nc, sb, nblocks, st, ws, wm, wd);
            }
        } else {
            pack_scales<D>(w, nc, sb, nblocks, st, ws, wm, wd);
        }
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
                if constexpr (sbint_of<D>()) {
                    S = _mm512_add_epi32(S, _mm512_mullo_epi32(I, _mm512_load_si512(ws + 16 * k)));
                    continue;
                }
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(_mm512_load_ps(ws + 16 * k), _mm512_set1_ps(x.dxv[4 * i16])), acc);
                if constexpr (D::kMin) acc = _mm512_fnmadd_ps(_mm512_load_ps(wm + 16 * k), _mm512_set1_ps(x.dxs[g]), acc);
            }
        }
        if constexpr (sbint_of<D>()) {  // as sb_flush
            const __m512 dx = _mm512_set1_ps(x.dxv[64 * sb]);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(_mm512_load_ps(wd), dx), acc);
            S = _mm512_setzero_si512();
            if constexpr (min16_of<D>() || D::kMin)
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sb_mins<D>(wm, x, sb)), _mm512_mul_ps(_mm512_load_ps(wd + 16), dx), acc);
        }
    }
    store_row16(a, r, n, nc, acc);
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

// A decode GEMV specialised for one type (Fast::run: 16 rows n.. of activation row r) where
// Fast::usable(a) holds; the generic direct_row otherwise.
struct NoGemv {
    static bool usable(const MatmulArgs&) { return false; }
    static void run(const MatmulArgs&, const ref::ActQ8Row&, int64_t, int64_t, int) {}
};

template <DType T, class D, class Fast = NoGemv>
void qmm512(const MatmulArgs& a) {
    static_assert(!D::kMin || D::kG == 32, "min term is applied per granule");
    static_assert(!min16_of<D>() || sbint_of<D>(), "per-16 min term only in the super-block chain");
    size_t act_stride = 0;
    const unsigned char* act = qmm_activations(a, Isa::Avx512, act_quant(T), &act_stride);
    const int64_t nblocks = D::kSbElems == 256 ? a.K / 256 : a.K / 32;
    const int64_t nsb = D::kSbElems == 256 ? a.K / 256 : (a.K / 32 + 1) / 2;
    if (a.m <= 2) {
        const bool fast = Fast::usable(a);
        for (int64_t r = 0; r < a.m; ++r) {
            const ref::ActQ8Row x = ref::act_q8_row(const_cast<unsigned char*>(act + r * act_stride), a.K);
            for (int64_t n = a.n0; n < a.n1; n += 16) {
                const int nc = static_cast<int>(a.n1 - n >= 16 ? 16 : a.n1 - n);
                if (fast) Fast::run(a, x, r, n, nc);
                else direct_row<D>(a, x, r, n, nc, nblocks, nsb);
            }
        }
        return;
    }
    // Two panels (32 weight rows) per pass over the activation rows: per 4 values, 2 panel loads
    // and MR broadcasts feed 2 x MR vpdpbusd.
    Panel p[2];
    panel_pair(nsb * D::kSbElems, nsb, p);
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

}  // namespace avx512
}  // namespace moe::kernels
