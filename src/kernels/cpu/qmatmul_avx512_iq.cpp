// AVX-512 VNNI register decoders for the grid-based IQ types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// IQ1_S, IQ1_M), run by the engine of qmatmul_avx512.h. Each unit of 64 values is 8 (IQ2 / IQ1) or
// 16 (IQ3) grid entries (scalar loads; IQ3_S: one gather), turned into unsigned levels
// 128 +- magnitude by a 64-bit sign mask; the scales are computed as in qmatmul_decode_more.h, so
// every path gives the same bits. Indices, sign masks and the scale vectors are built with vector
// and SWAR operations: no per-group scalar loop and no index array written by scalar stores and
// reloaded as a vector (a failed store forward). These decoders run prefill (the panel GEMM) on
// every AVX-512 CPU, and decode (direct_row) where the CPU lacks AVX512_VBMI / BITALG / GFNI; with
// them decode takes the register look-up GEMVs (IQ2_XXS: qmatmul_avx512_kq_gemv.cpp; IQ3:
// qmatmul_avx512_iq_gemv.cpp; the rest: qmatmul_avx512_iq_grid8_gemv.cpp), 1.5-6x these decoders
// on AMD Zen 5 (docs/PERFORMANCE.md, session 24).
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

// Signed grid magnitudes -> unsigned levels 128 +- m (bit 8g + j of neg: element j of group g negative).
inline __m512i signed_levels(__m512i mag, __mmask64 neg) {
    const __m512i c128 = _mm512_set1_epi8(static_cast<char>(0x80));
    return _mm512_mask_sub_epi8(_mm512_add_epi8(mag, c128), neg, c128, mag);
}
// The IQ2/IQ3 negate masks of 8 groups come from ref::iq_signs8_bytes (one shift/xor chain on a
// general register instead of 8 table look-ups, shifts and ORs).
// The 4 7-bit sign fields in bits 0-27 of each of two u32 (IQ2_XXS, IQ3_XXS) -> 8 field bytes.
inline uint64_t fields7x8(uint32_t w0, uint32_t w1) {
    return _pdep_u64(w0, 0x7F7F7F7Full) | (_pdep_u64(w1, 0x7F7F7F7Full) << 32);
}
// 8 f32 scales (the low 256 bits; lanes 8-15 zero, as the scalar decoders' ws of 32-value granules).
inline __m512 scales8(__m256 v) { return _mm512_zextps256_ps512(v); }
// The IQ2 scales db_iq2(d, s) = d (0.5 + s) / 4 of the nibbles of 8 bytes at p, in the order
// low nibble of byte i, high nibble of byte i (per-16 scales); same f32 steps as db_iq2.
inline __m512 iq2_nibble_scales(const uint8_t* p, float d) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), m4 = _mm_set1_epi8(0x0F);
    const __m128i s = _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
    const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(s));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(d), _mm512_add_ps(_mm512_set1_ps(0.5f), f)), _mm512_set1_ps(0.25f));
}

// The 8 entries of a 64-bit grid table at idx's 64-bit lanes, by scalar loads and inserts: on AMD
// Zen 5 one vpgatherqq zmm costs ~3.6 ns of throughput, storing the indices and 8 scalar loads
// and inserts ~2.1 ns (a gather-only loop; 16 dwords: vpgatherdd 4.9 ns, scalar 6.8 there, yet in
// the GEMV IQ3_XXS's 16 scalar loads straight from its index bytes measured 1.19x the gather;
// IQ3_S, whose indices need a shift and OR each, keeps it: scalar 0.62x, stored vector indices
// 1.06x in decode but 0.95x in prefill).
inline __m512i grid8(const uint64_t* G, __m512i idx) {
    alignas(64) uint64_t x[8];
    _mm512_store_si512(x, idx);
    auto e = [&](int g) { return static_cast<long long>(G[x[g]]); };
    const __m128i g01 = _mm_insert_epi64(_mm_cvtsi64_si128(e(0)), e(1), 1), g23 = _mm_insert_epi64(_mm_cvtsi64_si128(e(2)), e(3), 1);
    const __m128i g45 = _mm_insert_epi64(_mm_cvtsi64_si128(e(4)), e(5), 1), g67 = _mm_insert_epi64(_mm_cvtsi64_si128(e(6)), e(7), 1);
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(g01), g23, 1)),
                              _mm256_inserti128_si256(_mm256_castsi128_si256(g45), g67, 1), 1);
}

// IQ2_XXS (66 bytes: d, 8 x (u32 grid bytes, u32 signs/scale)): unit u = groups of 32 ib = 2u, 2u+1,
// 8 grid entries of 8 magnitudes (grid8).
struct DIQ2_XXS {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 32;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 66 + 2 + 16 * u;
        uint32_t a[4];  // grid bytes and signs of group 2u, then of 2u + 1
        std::memcpy(a, b, 16);
        const __m512i idx = _mm512_cvtepu8_epi64(_mm_cvtsi64_si128(static_cast<long long>(a[0] | (static_cast<uint64_t>(a[2]) << 32))));
        const __m512i mag = grid8(ref::kIq2xxsGrid, idx);
        return signed_levels(mag, ref::iq_signs8_bytes<uint64_t>(fields7x8(a[1], a[3])));
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 66;
        // the 8 qwords' top nibbles (a1 >> 28), then db_iq2's f32 steps
        const __m256i s = _mm512_cvtepi64_epi32(_mm512_srli_epi64(_mm512_loadu_si512(b + 2), 60));
        const __m256 f = _mm256_cvtepi32_ps(s);
        return scales8(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(h2f(b)), _mm256_add_ps(_mm256_set1_ps(0.5f), f)), _mm256_set1_ps(0.25f)));
    }
};

// 8 grid indices lo8[g] | ((hi << 8) >> sh[g] & mask) as 64-bit lanes (IQ2_S, IQ1_S, IQ1_M: the
// index's high bits packed in a qh word).
inline __m512i grid_index8(const uint8_t* lo8, uint64_t hi, __m512i sh, int64_t mask) {
    const __m512i lo = _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(lo8)));
    const __m512i h = _mm512_srlv_epi64(_mm512_set1_epi64(static_cast<int64_t>(hi << 8)), sh);
    return _mm512_ternarylogic_epi64(lo, h, _mm512_set1_epi64(mask), 0xF8);  // lo | (h & mask)
}

// Sign mask of 8 groups of 8 from 8 explicit sign bytes (IQ2_S, IQ3_S): byte g = group g.
inline uint64_t signs_explicit(const uint8_t* s) {
    uint64_t v;
    std::memcpy(&v, s, 8);
    return v;
}

// IQ2_XS (74 bytes: d, qs[32] u16 = 9-bit index | 7 sign bits << 9, scales[8]): per-16 scales.
struct DIQ2_XS {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 16;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + sb * 74 + 2 + 16 * u));  // 8 x u16
        const __m512i idx = _mm512_cvtepu16_epi64(_mm_and_si128(q, _mm_set1_epi16(511)));
        const __m512i mag = grid8(ref::kIq2xsGrid, idx);
        const __m128i f = _mm_srli_epi16(q, 9);  // the 7 sign bits of each entry
        return signed_levels(mag, ref::iq_signs8_bytes<uint64_t>(static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_packus_epi16(f, f)))));
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 74;
        return iq2_nibble_scales(b + 66, h2f(b));
    }
};

// IQ2_S (82 bytes: d, qs[32], signs[32], qh[8], scales[8]): 10-bit index, explicit signs, per-16 scales.
struct DIQ2_S {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 16;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 82;
        // index g = qs[8 u + g] | bits 2 g, 2 g + 1 of the unit's two qh bytes << 8
        uint16_t qh;
        std::memcpy(&qh, b + 66 + 2 * u, 2);
        const __m512i idx = grid_index8(b + 2 + 8 * u, qh, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), 0x300);
        const __m512i mag = grid8(ref::kIq2sGrid, idx);
        return signed_levels(mag, signs_explicit(b + 34 + 8 * u));
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 82;
        return iq2_nibble_scales(b + 74, h2f(b));
    }
};

// IQ3_XXS (98 bytes: d, qs[64] grid bytes, 8 x u32 signs/scale): 16 entries of 4 per unit.
struct DIQ3_XXS {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 32;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 98;
        const uint8_t* q = b + 2 + 16 * u;
        const uint32_t* G = ref::kIq3xxsGrid;
        auto h8 = [&](int o) {
            return _mm256_setr_epi32(static_cast<int>(G[q[o]]), static_cast<int>(G[q[o + 1]]), static_cast<int>(G[q[o + 2]]), static_cast<int>(G[q[o + 3]]),
                                     static_cast<int>(G[q[o + 4]]), static_cast<int>(G[q[o + 5]]), static_cast<int>(G[q[o + 6]]), static_cast<int>(G[q[o + 7]]));
        };
        const __m512i mag = _mm512_inserti64x4(_mm512_castsi256_si512(h8(0)), h8(8), 1);
        uint32_t w[2];
        std::memcpy(w, b + 66 + 8 * u, 8);
        return signed_levels(mag, ref::iq_signs8_bytes<uint64_t>(fields7x8(w[0], w[1])));
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 98;
        const __m256 f = _mm256_cvtepi32_ps(_mm256_srli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 66)), 28));
        return scales8(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(h2f(b)), _mm256_add_ps(_mm256_set1_ps(0.5f), f)), _mm256_set1_ps(0.5f)));
    }
};

// IQ3_S (110 bytes: d, qs[64], qh[8], signs[32], scales[4]): 9-bit indices, explicit signs.
struct DIQ3_S {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 32;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 110;
        // index t of the unit (0..15): qs[16 u + t] | bit (t % 8) of qh[2 u + t / 8] << 8
        uint16_t hb;
        std::memcpy(&hb, b + 66 + 2 * u, 2);
        const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * u)));
        const __m512i idx = _mm512_mask_or_epi32(lo, static_cast<__mmask16>(hb), lo, _mm512_set1_epi32(256));
        const __m512i mag = _mm512_i32gather_epi32(idx, reinterpret_cast<const int*>(ref::kIq3sGrid), 4);
        return signed_levels(mag, signs_explicit(b + 74 + 8 * u));
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 110;
        uint32_t s4;
        std::memcpy(&s4, b + 106, 4);
        const __m128i v = _mm_cvtsi32_si128(static_cast<int>(s4)), m4 = _mm_set1_epi8(0x0F);
        const __m128i nib = _mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));  // ib order
        const __m256i odd = _mm256_add_epi32(_mm256_slli_epi32(_mm256_cvtepu8_epi32(nib), 1), _mm256_set1_epi32(1));
        return scales8(_mm256_mul_ps(_mm256_set1_ps(h2f(b)), _mm256_cvtepi32_ps(odd)));
    }
};

// IQ1: grid int8 values g in {-1, 0, 1} -> 128 + 8 g, then +1 (delta +1/8) or -1 (bit of neg).
inline __m512i iq1_levels(__m512i grid, __mmask64 neg) {
    const __m512i t = _mm512_broadcast_i32x4(_mm_setr_epi8(static_cast<char>(128), static_cast<char>(136), 0, 0, 0, 0, 0, 0,
                                                          0, 0, 0, 0, 0, 0, 0, static_cast<char>(120)));
    const __m512i base = _mm512_shuffle_epi8(t, _mm512_and_si512(grid, _mm512_set1_epi8(0x0F)));  // 0 -> 128, 1 -> 136, 0xFF -> 120
    const __m512i one = _mm512_set1_epi8(1);
    return _mm512_mask_sub_epi8(_mm512_add_epi8(base, one), neg, base, one);
}
inline uint64_t group_mask(unsigned bits8) {  // bit g set -> byte g all ones
    return _pdep_u64(bits8, 0x0101010101010101ull) * 0xFF;
}

// IQ1_S (50 bytes: d, qs[32], qh[8] u16): 11-bit indices, per-32 scale dl / 8 (qmatmul_decode_more.h).
struct DIQ1_S {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 32;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 50;
        // index g = qs[8 u + g] | bits 3 (g % 4).. of qh[2 u + g / 4] << 8; group g negative: bit 15
        // of that qh (the two u16 as one u32: shifts 3 (g % 4) + 16 (g / 4))
        uint32_t qh;
        std::memcpy(&qh, b + 34 + 4 * u, 4);
        const __m512i idx = grid_index8(b + 2 + 8 * u, qh, _mm512_setr_epi64(0, 3, 6, 9, 16, 19, 22, 25), 0x700);
        const __m512i grid = grid8(ref::kIq1sGrid, idx);
        const uint64_t neg = ((qh & 0x8000u) ? 0x00000000FFFFFFFFull : 0) | ((qh & 0x80000000u) ? 0xFFFFFFFF00000000ull : 0);
        return iq1_levels(grid, neg);
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 50;
        const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 34)));
        const __m256i odd = _mm256_add_epi32(_mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 12), _mm256_set1_epi32(7)), 1), _mm256_set1_epi32(1));
        return scales8(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(h2f(b)), _mm256_cvtepi32_ps(odd)), _mm256_set1_ps(0.125f)));
    }
};

// IQ1_M (56 bytes: qs[32], qh[16], scales[8]): 11-bit indices, per-8 delta signs, per-16 scales.
struct DIQ1_M {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 16;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 56;
        // nibble g of the unit's 4 qh bytes (bits 4 g..): bits 0-2 = index bits 8-10, bit 3 = sign
        uint32_t q4;
        std::memcpy(&q4, b + 32 + 4 * u, 4);
        const __m512i idx = grid_index8(b + 8 * u, q4, _mm512_setr_epi64(0, 4, 8, 12, 16, 20, 24, 28), 0x700);
        const __m512i grid = grid8(ref::kIq1sGrid, idx);
        return iq1_levels(grid, group_mask(_pext_u32(q4, 0x88888888u)));
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 56;
        const float d = fp16_to_fp32(ref::iq1_m_scale_bits(b + 48));
        // scale j (per 16 values) = bits 3 (j % 4).. of sc[j / 4] (the u16 words at b + 48)
        const __m512i w = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                                   _mm512_castsi128_si512(_mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 48)))));
        const __m512i s = _mm512_and_si512(_mm512_srlv_epi32(w, _mm512_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9)), _mm512_set1_epi32(7));
        const __m512 odd = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(s, 1), _mm512_set1_epi32(1)));
        return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(d), odd), _mm512_set1_ps(0.125f));
    }
};

// IQ2_XXS decode GEMV (qmatmul_avx512_kq_gemv.cpp) where the CPU has AVX512_VBMI, BITALG and GFNI and the gathered d
// fits 32-bit row offsets.
struct FastIQ2XXS {
    static bool usable(const MatmulArgs& a) {
        return gemv_vbmi_usable() && a.K % 256 == 0 && 15 * static_cast<int64_t>(a.w_row_stride) <= INT32_MAX;
    }
    static void run(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) { gemv16_iq2xxs(a, x, r, n, nc); }
};

// The other IQ decode GEMVs (qmatmul_avx512_iq_gemv.cpp, qmatmul_avx512_iq_grid8_gemv.cpp), same conditions.
template <auto G>
struct FastIQ : FastIQ2XXS {
    static void run(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) { G(a, x, r, n, nc); }
};

}  // namespace

MatmulFn qmm512_iq_kernel(DType t) {
    switch (t) {
        case DType::IQ2_XXS: return qmm512<DType::IQ2_XXS, DIQ2_XXS, FastIQ2XXS>;
        case DType::IQ2_XS: return qmm512<DType::IQ2_XS, DIQ2_XS, FastIQ<gemv16_iq2xs>>;
        case DType::IQ2_S: return qmm512<DType::IQ2_S, DIQ2_S, FastIQ<gemv16_iq2s>>;
        case DType::IQ3_XXS: return qmm512<DType::IQ3_XXS, DIQ3_XXS, FastIQ<gemv16_iq3xxs>>;
        case DType::IQ3_S: return qmm512<DType::IQ3_S, DIQ3_S, FastIQ<gemv16_iq3s>>;
        case DType::IQ1_S: return qmm512<DType::IQ1_S, DIQ1_S, FastIQ<gemv16_iq1s>>;
        case DType::IQ1_M: return qmm512<DType::IQ1_M, DIQ1_M, FastIQ<gemv16_iq1m>>;
        default: return nullptr;
    }
}

MatmulFn qmm512_iq_baseline(DType t) {
    switch (t) {
        case DType::IQ2_XXS: return qmm512<DType::IQ2_XXS, DIQ2_XXS>;
        case DType::IQ2_XS: return qmm512<DType::IQ2_XS, DIQ2_XS>;
        case DType::IQ2_S: return qmm512<DType::IQ2_S, DIQ2_S>;
        case DType::IQ3_XXS: return qmm512<DType::IQ3_XXS, DIQ3_XXS>;
        case DType::IQ3_S: return qmm512<DType::IQ3_S, DIQ3_S>;
        case DType::IQ1_S: return qmm512<DType::IQ1_S, DIQ1_S>;
        case DType::IQ1_M: return qmm512<DType::IQ1_M, DIQ1_M>;
        default: return nullptr;
    }
}

}  // namespace moe::kernels

#pragma GCC diagnostic pop
MOE_TARGET_POP
