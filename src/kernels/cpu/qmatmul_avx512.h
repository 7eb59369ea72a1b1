#pragma once
// The AVX-512 + VNNI int8 weight-kernel engine (math and determinism argument: qmatmul.h), shared
// by the per-family kernel files behind the one kernel table qmm_avx512_kernel (qmatmul_avx512.cpp):
//   qmatmul_avx512_q8k.cpp       Q8_0, Q4_0, Q4_K, Q5_K, Q6_K (+ their specialised decode GEMVs)
//   qmatmul_avx512_legacy_k.cpp  Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q3_K, Q2_K, MXFP4, TQ2_0
//   qmatmul_avx512_iq.cpp        IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M
//   qmatmul_avx512_kq_gemv.cpp   the decode GEMVs of Q2_K, Q3_K, IQ4_XS (used by the legacy_k table), IQ2_XXS
//   qmatmul_avx512_iq_gemv.cpp   the decode GEMVs of IQ3_XXS, IQ3_S (used by the iq table)
//   qmatmul_avx512_iq_grid8_gemv.cpp  the decode GEMVs of IQ2_XS, IQ2_S, IQ1_S, IQ1_M (used by the iq table)
//   qmatmul_avx512_q6k_gemv.cpp  the decode GEMV of Q6_K (used by the q8k table)
// A family file defines register decoders D (interface: DQ4_0 / DQ6_K in qmatmul_avx512_q8k.cpp)
// and instantiates qmm512<D> (prefill panel GEMM: repack + rows_block; decode: direct_row or a
// specialised GEMV).
// This header holds the common helpers and qmm512; its two parts, included below:
//   qmatmul_avx512_panel.h   the panel engine (Panel, repack, rows_block: prefill)
//   qmatmul_avx512_direct.h  the decode-sized path (direct_row, the decode GEMVs' helpers)
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

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
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

}  // namespace avx512
}  // namespace moe::kernels

#include "kernels/cpu/qmatmul_avx512_panel.h"   // Panel, repack, rows_block (prefill)
#include "kernels/cpu/qmatmul_avx512_direct.h"  // direct_row and the decode helpers (m <= 2)

namespace moe::kernels {
namespace avx512 {

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
