#pragma once
// The decode-sized path of the AVX-512 int8 kernels (m <= 2 rows, no panel): direct_row, the
// decode GEMVs' shared helpers (row sets, prefetch streams) and the specialised GEMVs' entries.
// Part of qmatmul_avx512.h (read its header comment): include that header, not this one.

namespace moe::kernels::avx512 {

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

// The driver of the 256-value super-block GEMVs (qmatmul_avx512_kq_gemv.cpp,
// qmatmul_avx512_iq_gemv.cpp, qmatmul_avx512_iq_grid8_gemv.cpp): SB(w, rows, x, sb, ps, acc) adds super-block sb of the 16 rows
// (pointers w, byte offsets rows from row n) to acc in K order. K a multiple of 256.
template <auto SB>
void gemv16_k256(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    const Rows16 rw(a, n, nc);
    const __m512i rows = rw.offsets();
    const int64_t nsb = a.K / 256;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) SB(rw.w, rows, x, sb, panel_share(a, n, sb, nsb), acc);
    store_row16(a, r, n, nc, acc);
}

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
// needs AVX512_VBMI (qmatmul_avx512_iq_gemv.cpp)
void gemv16_iq3xxs(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc);
void gemv16_iq3s(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc);
// needs AVX512_VBMI (qmatmul_avx512_iq_grid8_gemv.cpp)
void gemv16_iq2xs(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc);
void gemv16_iq2s(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc);
void gemv16_iq1s(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc);
void gemv16_iq1m(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc);
bool gemv_vbmi_usable();  // this CPU has AVX512_VBMI, BITALG and GFNI (the IQ GEMVs above)
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

}  // namespace moe::kernels::avx512
