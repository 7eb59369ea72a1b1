// AVX-512 VNNI register decoders for the legacy fallbacks (Q4_1, Q5_0, Q5_1), IQ4_NL, IQ4_XS, Q3_K,
// Q2_K, MXFP4 and TQ2_0, run by the engine of qmatmul_avx512.h (panel GEMM: repack + rows_block;
// decode GEMV: direct_row, gemv16_nibble_blocks for MXFP4 and IQ4_NL, the GEMVs of qmatmul_avx512_kq_gemv.cpp for Q2_K / Q3_K / IQ4_XS). Interface as DQ4_0 / DQ6_K (qmatmul_avx512_q8k.cpp); levels and scales
// are the ones of the scalar decoders (qmatmul_decode_more.h), so every path gives the same bits.
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

// 64-value unit of two 32-value legacy blocks (nibble layout of Q4_0): lanes [b0 lo, b0 hi, b1 lo, b1 hi].
inline __m512i nibbles2(const uint8_t* qs0, const uint8_t* qs1, bool second) {
    const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0));
    const __m128i v1 = second ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)) : _mm_setzero_si128();
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(v0), v1, 1);
    const __m256i m = _mm256_set1_epi8(0x0F);
    const __m512i x = cat256(_mm256_and_si256(v, m), _mm256_and_si256(_mm256_srli_epi16(v, 4), m));
    return _mm512_shuffle_i64x2(x, x, 0xD8);
}

// Q4_1 (20-byte blocks: d, m, qs), Q5_0 (22: d, qh, qs), Q5_1 (24: d, m, qh, qs). Two blocks per unit.
template <DType T>
struct DLegacy {
    static constexpr int kBytes = T == DType::Q4_1 ? 20 : T == DType::Q5_0 ? 22 : 24;
    static constexpr int kQs = T == DType::Q4_1 ? 4 : T == DType::Q5_0 ? 6 : 8;
    static constexpr int kQh = T == DType::Q5_0 ? 2 : 4;
    static constexpr bool kFive = T != DType::Q4_1;
    static constexpr int kShift = T == DType::Q5_0 ? 4 : -1, kUnits = 1, kSbElems = 64, kG = 32;
    static constexpr bool kMin = T != DType::Q5_0, kVecScales = false;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int, int64_t nblocks) {
        const uint8_t* b0 = row + 2 * sb * kBytes;
        const bool second = 2 * sb + 1 < nblocks;
        __m512i x = nibbles2(b0 + kQs, b0 + kBytes + kQs, second);
        if constexpr (kFive) {
            uint32_t h0, h1 = 0;
            std::memcpy(&h0, b0 + kQh, 4);
            if (second) std::memcpy(&h1, b0 + kBytes + kQh, 4);
            const __mmask64 hb = static_cast<__mmask64>(h0) | (static_cast<__mmask64>(h1) << 32);
            x = _mm512_mask_add_epi8(x, hb, x, _mm512_set1_epi8(16));
        }
        return x;
    }
    static void scales(const State&, const uint8_t* row, int64_t sb, int64_t nblocks, float* ws, float* wm) {
        const uint8_t* b0 = row + 2 * sb * kBytes;
        const bool second = 2 * sb + 1 < nblocks;
        ws[0] = h2f(b0);
        ws[16] = second ? h2f(b0 + kBytes) : 0.0f;
        if constexpr (kMin) {
            wm[0] = -h2f(b0 + 2);
            wm[16] = second ? -h2f(b0 + kBytes + 2) : 0.0f;
        }
    }
};

// IQ4 levels: the 16 values + 128 as unsigned bytes, for vpshufb (same table in each 128-bit lane).
inline __m512i iq4_table() {
    alignas(16) uint8_t t[16];
    for (int i = 0; i < 16; ++i) t[i] = static_cast<uint8_t>(ref::kIq4nlValues[i] + 128);
    return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(t)));
}

struct DIQ4_NL {
    static constexpr int kShift = 7, kUnits = 1, kSbElems = 64, kG = 32, kBlockBytes = 18, kQsOff = 2;
    static constexpr bool kMin = false, kVecScales = false;
    struct State {};
    static __m512i table() { return iq4_table(); }
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int, int64_t nblocks) {
        const uint8_t* b0 = row + 2 * sb * 18;
        return _mm512_shuffle_epi8(iq4_table(), nibbles2(b0 + 2, b0 + 20, 2 * sb + 1 < nblocks));
    }
    // the f16 d of 16 rows' blocks (h2f's value)
    static __m512 gather_scale(__m512i offs, const uint8_t* p) { return f16_lo(_mm512_i32gather_epi32(offs, p, 1)); }
    static void scales(const State&, const uint8_t* row, int64_t sb, int64_t nblocks, float* ws, float*) {
        const uint8_t* b0 = row + 2 * sb * 18;
        ws[0] = h2f(b0);
        ws[16] = 2 * sb + 1 < nblocks ? h2f(b0 + 18) : 0.0f;
    }
};

// IQ4_XS (136-byte super-blocks: d, scales_h, scales_l[4], qs[128]); unit u = groups 2u, 2u+1.
struct DIQ4_XS {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 32;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* q = row + sb * 136 + 8 + 32 * u;
        return _mm512_shuffle_epi8(iq4_table(), nibbles2(q, q + 16, true));
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 136;
        uint16_t sh;
        std::memcpy(&sh, b + 2, 2);
        alignas(64) float ls[16] = {};
        for (int ib = 0; ib < 8; ++ib)
            ls[ib] = static_cast<float>((((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4)) - 32);
        return _mm512_mul_ps(_mm512_load_ps(ls), _mm512_set1_ps(h2f(b)));
    }
};

// Q3_K (110 bytes: hmask[32], qs[64], scales[12], d): unit u = half u / 2, shifts s0 = 2 (u % 2) and
// s0 + 1: the 32 values of shift s are bits 2s.. of qs[32 half + j] and hmask bit 4 half + s of byte j.
struct DQ3_K {
    static constexpr int kShift = 2, kUnits = 4, kSbElems = 256, kG = 16;
    static constexpr bool kMin = false, kSbInt = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 110;
        const int half = u / 2, s0 = 2 * (u % 2);
        const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32 + 32 * half)));
        const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
        const __m512i lo = _mm512_and_si512(
            _mm512_srlv_epi16(q, cat256(_mm256_set1_epi16(static_cast<short>(2 * s0)), _mm256_set1_epi16(static_cast<short>(2 * s0 + 2)))),
            _mm512_set1_epi8(3));
        const __m512i bits = cat256(_mm256_set1_epi8(static_cast<char>(1 << (4 * half + s0))),
                                    _mm256_set1_epi8(static_cast<char>(1 << (4 * half + s0 + 1))));
        return _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(hm, bits), lo, _mm512_set1_epi8(4));
    }
    static float sb_d(const uint8_t* row, int64_t sb) { return h2f(row + sb * 110 + 108); }
    static __m512i int_scales(const uint8_t* row, int64_t sb) {
        // The 16 6-bit scales as ref::q3_k_scale, in lanes (decode GEMV calls this per row and
        // super-block; the scalar loop was 4x the dot product): low 4 bits = nibble j / 8 of
        // scales[j % 8], high 2 bits = bits 2 (j / 4) of scales[8 + j % 4]. Masked load: 12 bytes.
        const uint8_t* b = row + sb * 110;
        const __m512i v = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(0x0FFF, b + 96));
        const __m512i lo = _mm512_and_si512(
            _mm512_srlv_epi32(_mm512_permutexvar_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7), v),
                              _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4)),
            _mm512_set1_epi32(0xF));
        const __m512i hi = _mm512_and_si512(
            _mm512_srlv_epi32(_mm512_permutexvar_epi32(_mm512_setr_epi32(8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11), v),
                              _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6)),
            _mm512_set1_epi32(3));
        return _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
    }
};

// Q2_K (84 bytes: scales[16], qs[64], d, dmin): unit u = half u / 2, shifts s0 = 2 (u % 2), s0 + 1:
// the 32 values of shift s are bits 2s.. of qs[32 half + j]. Scale / min j = low / high nibble of
// scales[j] (integers: the super-block chain, kSbInt), d / dmin per super-block; the min is per 16
// values (kMin16).
struct DQ2_K {
    static constexpr int kShift = -1, kUnits = 4, kSbElems = 256, kG = 16;
    static constexpr bool kMin = false, kMin16 = true, kSbInt = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 84;
        const int half = u / 2, s0 = 2 * (u % 2);
        const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * half)));
        return _mm512_and_si512(
            _mm512_srlv_epi16(q, cat256(_mm256_set1_epi16(static_cast<short>(2 * s0)), _mm256_set1_epi16(static_cast<short>(2 * s0 + 2)))),
            _mm512_set1_epi8(3));
    }
    static __m512i nib_vec(const uint8_t* b, int shift) {
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
        return _mm512_and_si512(_mm512_srli_epi32(v, shift), _mm512_set1_epi32(0xF));
    }
    static __m512i int_scales(const uint8_t* row, int64_t sb) { return nib_vec(row + sb * 84, 0); }
    static __m512i int_mins(const uint8_t* row, int64_t sb) { return nib_vec(row + sb * 84, 4); }
    static float sb_d(const uint8_t* row, int64_t sb) { return h2f(row + sb * 84 + 80); }
    static float sb_dmin(const uint8_t* row, int64_t sb) { return h2f(row + sb * 84 + 82); }
};

// MXFP4 (17 bytes: E8M0 e, qs[16]): levels 2 x E2M1 + 16 (shift 4) by vpshufb, scale 2^(e - 128).
// The level table is spelled out (kMxfp4Values + 16; the kernel tests against the reference decoder
// catch any difference) so that it is a constant, not rebuilt per row.
struct DMXFP4 {
    static constexpr int kShift = 4, kUnits = 1, kSbElems = 64, kG = 32, kBlockBytes = 17, kQsOff = 1;
    static constexpr bool kMin = false, kVecScales = false;
    struct State {};
    static __m512i table() { return _mm512_broadcast_i32x4(_mm_setr_epi8(16, 17, 18, 19, 20, 22, 24, 28, 16, 15, 14, 13, 12, 10, 8, 4)); }
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int, int64_t nblocks) {
        const __m512i tbl = table();
        const uint8_t* b0 = row + 2 * sb * 17;
        return _mm512_shuffle_epi8(tbl, nibbles2(b0 + 1, b0 + 18, 2 * sb + 1 < nblocks));
    }
    static void scales(const State&, const uint8_t* row, int64_t sb, int64_t nblocks, float* ws, float*) {
        const uint8_t* b0 = row + 2 * sb * 17;
        ws[0] = ref::e8m0_half(b0[0]);
        ws[16] = 2 * sb + 1 < nblocks ? ref::e8m0_half(b0[17]) : 0.0f;
    }
    // ref::e8m0_half on 16 rows: e >= 2 -> float bits (e - 1) << 23, e = 0, 1 -> subnormal 0x00200000 << e.
    static __m512 gather_scale(__m512i offs, const uint8_t* p) {
        const __m512i e = _mm512_and_si512(_mm512_i32gather_epi32(offs, p, 1), _mm512_set1_epi32(0xFF));
        const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
        const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
        return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmpge_epi32_mask(e, _mm512_set1_epi32(2)), sub, normal));
    }
};

// MXFP4 and IQ4_NL decode GEMV (D: 32-value blocks of a scale field and 16 nibble bytes at
// D::kQsOff, levels by the 16-entry D::table()), 16 rows x 128 values (4 blocks) per step, as
// gemv16_q80: per row one 64-byte vector of the 4 blocks' qs, split into low nibbles (values 0-15 of
// each block, lane k = block k) and high nibbles (values 16-31), both through the level table, two
// vpdpbusd against the step's activations regrouped the same way, granule_sums -> R[k] lane c = row
// c's sum over block k; then the f32 chain of qmatmul.h per block in K order (same bits as the panel
// path). Half the decode work per value of direct_row's 64-value units, which made MXFP4 experts
// compute-bound (19.5 GB/s vs 31 GB/s for the Q8_0 head of the same gpt-oss-20b-shaped file); IQ4_NL
// kernel alone 1.3x direct_row (docs/PERFORMANCE.md, session 24). A last step of 1-3 blocks
// zero-fills the missing ones (never read past the row) and ignores their lanes.
template <class D, bool Tail>
inline void nibble_block_step(const uint8_t* const* w, const ref::ActQ8Row& x, int64_t s, int nbs, __m512i offs,
                              const PanelShare& ps, __m512& acc) {
    constexpr int64_t B = D::kBlockBytes;
    const __m512i tbl = D::table();
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i xA, xB;
    act_step128(x.qs + 128 * s, Tail ? nbs : 4, xA, xB);
    __m512i dp[16], R[4];
    for (int c = 0; c < 16; ++c) {
        prefetch_share(ps, c, 16);
        const uint8_t* b = w[c] + 4 * s * B + D::kQsOff;
        __m512i v;
        if constexpr (Tail) {
            v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
            for (int k = 1; k < 4; ++k) {
                const __m128i q = k < nbs ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + B * k)) : _mm_setzero_si128();
                v = k == 1 ? _mm512_inserti32x4(v, q, 1) : k == 2 ? _mm512_inserti32x4(v, q, 2) : _mm512_inserti32x4(v, q, 3);
            }
        } else {
            v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
            v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + B)), 1);
            v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * B)), 2);
            v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 3 * B)), 3);
        }
        const __m512i L = _mm512_shuffle_epi8(tbl, _mm512_and_si512(v, m4));
        const __m512i H = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        dp[c] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), L, xA), H, xB);
    }
    granule_sums(dp, R);
    for (int k = 0; k < (Tail ? nbs : 4); ++k) {
        const int64_t g = 4 * s + k;
        const __m512i I = _mm512_add_epi32(R[k], _mm512_set1_epi32((x.nsum[8 * g] + x.nsum[8 * g + 4]) * (1 << D::kShift)));
        const __m512 ws = D::gather_scale(offs, w[0] + B * g);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(ws, _mm512_set1_ps(x.dxv[8 * g])), acc);
    }
}

template <class D>
void gemv16_nibble_blocks(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    const Rows16 rw(a, n, nc);
    const uint8_t* const* w = rw.w;
    const __m512i offs = rw.offsets();
    const int64_t nb = a.K / 32, nfull = nb / 4, nstep = (nb + 3) / 4;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t s = 0; s < nfull; ++s) nibble_block_step<D, false>(w, x, s, 4, offs, panel_share(a, n, s, nstep), acc);
    if (nfull < nstep) nibble_block_step<D, true>(w, x, nfull, static_cast<int>(nb - 4 * nfull), offs, panel_share(a, n, nfull, nstep), acc);
    store_row16(a, r, n, nc, acc);
}
template <class D>
struct FastNibbleBlocks {
    static bool usable(const MatmulArgs& a) { return 15 * static_cast<int64_t>(a.w_row_stride) <= INT32_MAX; }
    static void run(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) { gemv16_nibble_blocks<D>(a, x, r, n, nc); }
};
// TQ2_0 (66 bytes: qs[64], d): unit u = bytes 32 (u / 2).., shifts 2 l for l = 2 (u % 2), +1; level
// t in {0, 1, 2} with offset 1 (shift 0).
struct DTQ2_0 {
    static constexpr int kShift = 0, kUnits = 4, kSbElems = 256, kG = 32;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 66;
        const int l0 = 2 * (u % 2);
        const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32 * (u / 2))));
        return _mm512_and_si512(
            _mm512_srlv_epi16(q, cat256(_mm256_set1_epi16(static_cast<short>(2 * l0)), _mm256_set1_epi16(static_cast<short>(2 * l0 + 2)))),
            _mm512_set1_epi8(3));
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        return _mm512_set1_ps(h2f(row + sb * 66 + 64));
    }
};

// The dedicated decode GEMVs (qmatmul_avx512_kq_gemv.cpp) and where they apply (the K-quants' rows
// are whole super-blocks; the scales' d is gathered with 32-bit row offsets).
template <void (*F)(const MatmulArgs&, const ref::ActQ8Row&, int64_t, int64_t, int)>
struct FastK256 {
    static bool usable(const MatmulArgs& a) { return a.K % 256 == 0 && 15 * static_cast<int64_t>(a.w_row_stride) <= INT32_MAX; }
    static void run(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) { F(a, x, r, n, nc); }
};

}  // namespace

MatmulFn qmm512_legacy_k_kernel(DType t) {
    switch (t) {
        case DType::Q4_1: return qmm512<DType::Q4_1, DLegacy<DType::Q4_1>>;
        case DType::Q5_0: return qmm512<DType::Q5_0, DLegacy<DType::Q5_0>>;
        case DType::Q5_1: return qmm512<DType::Q5_1, DLegacy<DType::Q5_1>>;
        case DType::IQ4_NL: return qmm512<DType::IQ4_NL, DIQ4_NL, FastNibbleBlocks<DIQ4_NL>>;
        case DType::IQ4_XS: return qmm512<DType::IQ4_XS, DIQ4_XS, FastK256<gemv16_iq4xs>>;
        case DType::Q3_K: return qmm512<DType::Q3_K, DQ3_K, FastK256<gemv16_q3k>>;
        case DType::Q2_K: return qmm512<DType::Q2_K, DQ2_K, FastK256<gemv16_q2k>>;
        case DType::MXFP4: return qmm512<DType::MXFP4, DMXFP4, FastNibbleBlocks<DMXFP4>>;
        case DType::TQ2_0: return qmm512<DType::TQ2_0, DTQ2_0>;
        default: return nullptr;
    }
}

MatmulFn qmm512_legacy_k_baseline(DType t) {
    return t == DType::Q3_K ? qmm512<DType::Q3_K, DQ3_K, FastK256<gemv16_q3k_nogfni>> : nullptr;
}

}  // namespace moe::kernels

#pragma GCC diagnostic pop
MOE_TARGET_POP
