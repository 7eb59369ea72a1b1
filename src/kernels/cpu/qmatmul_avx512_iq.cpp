// AVX-512 VNNI register decoders for the grid-based IQ types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// IQ1_S, IQ1_M), run by the engine of qmatmul_avx512.h. Each unit of 64 values is 8 (IQ2 / IQ1) or
// 16 (IQ3) grid entries fetched with one gather, turned into unsigned levels 128 +- magnitude by a
// 64-bit sign mask; the scales are computed as in qmatmul_decode_more.h, so every path gives the
// same bits.
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
// The IQ2/IQ3 sign table (iq_signs8 of every 7-bit pattern), built at compile time.
struct Signs8 {
    uint8_t v[128];
    constexpr Signs8() : v() {
        for (unsigned i = 0; i < 128; ++i) v[i] = ref::iq_signs8(i);
    }
};
inline constexpr Signs8 kSigns8{};

// IQ2_XXS (66 bytes: d, 8 x (u32 grid bytes, u32 signs/scale)): unit u = groups of 32 ib = 2u, 2u+1,
// 8 grid entries of 8 magnitudes gathered at once.
struct DIQ2_XXS {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 32, kSbBytes = 66;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 66 + 2 + 16 * u;
        uint32_t a[4];  // grid bytes and signs of group 2u, then of 2u + 1
        std::memcpy(a, b, 16);
        const __m512i idx = _mm512_cvtepu8_epi64(_mm_cvtsi64_si128(static_cast<long long>(a[0] | (static_cast<uint64_t>(a[2]) << 32))));
        const __m512i mag = _mm512_i64gather_epi64(idx, reinterpret_cast<const long long*>(ref::kIq2xxsGrid), 8);
        uint64_t neg = 0;
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 4; ++l) neg |= static_cast<uint64_t>(kSigns8.v[(a[2 * h + 1] >> (7 * l)) & 127]) << (8 * (4 * h + l));
        return signed_levels(mag, neg);
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 66;
        const float d = h2f(b);
        alignas(64) float ws[16] = {};
        for (int ib = 0; ib < 8; ++ib) {
            uint32_t a1;
            std::memcpy(&a1, b + 2 + 8 * ib + 4, 4);
            ws[ib] = qdec::db_iq2(d, static_cast<int>(a1 >> 28));
        }
        return _mm512_load_ps(ws);
    }
};

// Sign mask of 8 groups of 8 from 8 explicit sign bytes (IQ2_S, IQ3_S): byte g = group g.
inline uint64_t signs_explicit(const uint8_t* s) {
    uint64_t v;
    std::memcpy(&v, s, 8);
    return v;
}

// IQ2_XS (74 bytes: d, qs[32] u16 = 9-bit index | 7 sign bits << 9, scales[8]): per-16 scales.
struct DIQ2_XS {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 16, kSbBytes = 74;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + sb * 74 + 2 + 16 * u));  // 8 x u16
        const __m512i idx = _mm512_cvtepu16_epi64(_mm_and_si128(q, _mm_set1_epi16(511)));
        const __m512i mag = _mm512_i64gather_epi64(idx, reinterpret_cast<const long long*>(ref::kIq2xsGrid), 8);
        alignas(16) uint16_t v[8];
        _mm_store_si128(reinterpret_cast<__m128i*>(v), q);
        uint64_t neg = 0;
        for (int g = 0; g < 8; ++g) neg |= static_cast<uint64_t>(kSigns8.v[v[g] >> 9]) << (8 * g);
        return signed_levels(mag, neg);
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 74;
        const float d = h2f(b);
        alignas(64) float ws[16];
        for (int ib = 0; ib < 8; ++ib) {
            ws[2 * ib] = qdec::db_iq2(d, b[66 + ib] & 0xF);
            ws[2 * ib + 1] = qdec::db_iq2(d, b[66 + ib] >> 4);
        }
        return _mm512_load_ps(ws);
    }
};

// IQ2_S (82 bytes: d, qs[32], signs[32], qh[8], scales[8]): 10-bit index, explicit signs, per-16 scales.
struct DIQ2_S {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 16, kSbBytes = 82;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 82;
        alignas(64) int64_t ix[8];
        for (int g = 0; g < 8; ++g) {
            const int ib = 2 * u + g / 4, l = g % 4;
            ix[g] = b[2 + 4 * ib + l] | (((b[66 + ib] >> (2 * l)) & 3) << 8);
        }
        const __m512i mag = _mm512_i64gather_epi64(_mm512_load_si512(ix), reinterpret_cast<const long long*>(ref::kIq2sGrid), 8);
        return signed_levels(mag, signs_explicit(b + 34 + 8 * u));
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 82;
        const float d = h2f(b);
        alignas(64) float ws[16];
        for (int ib = 0; ib < 8; ++ib) {
            ws[2 * ib] = qdec::db_iq2(d, b[74 + ib] & 0xF);
            ws[2 * ib + 1] = qdec::db_iq2(d, b[74 + ib] >> 4);
        }
        return _mm512_load_ps(ws);
    }
};

// IQ3_XXS (98 bytes: d, qs[64] grid bytes, 8 x u32 signs/scale): 16 entries of 4 per unit.
struct DIQ3_XXS {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 32, kSbBytes = 98;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 98;
        const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * u)));
        const __m512i mag = _mm512_i32gather_epi32(idx, reinterpret_cast<const int*>(ref::kIq3xxsGrid), 4);
        uint32_t w[2];
        std::memcpy(w, b + 66 + 8 * u, 8);
        uint64_t neg = 0;
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 4; ++l) neg |= static_cast<uint64_t>(kSigns8.v[(w[h] >> (7 * l)) & 127]) << (8 * (4 * h + l));
        return signed_levels(mag, neg);
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 98;
        const float d = h2f(b);
        alignas(64) float ws[16] = {};
        for (int ib = 0; ib < 8; ++ib) {
            uint32_t w;
            std::memcpy(&w, b + 66 + 4 * ib, 4);
            ws[ib] = d * (0.5f + static_cast<float>(w >> 28)) * 0.5f;
        }
        return _mm512_load_ps(ws);
    }
};

// IQ3_S (110 bytes: d, qs[64], qh[8], signs[32], scales[4]): 9-bit indices, explicit signs.
struct DIQ3_S {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 32, kSbBytes = 110;
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
        const float d = h2f(b);
        alignas(64) float ws[16] = {};
        for (int ib = 0; ib < 8; ++ib) ws[ib] = d * static_cast<float>(1 + 2 * ((b[106 + ib / 2] >> (4 * (ib % 2))) & 0xF));
        return _mm512_load_ps(ws);
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
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 32, kSbBytes = 50;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 50;
        uint16_t qh[2];
        std::memcpy(qh, b + 34 + 4 * u, 4);
        alignas(64) int64_t ix[8];
        unsigned negs = 0;
        for (int g = 0; g < 8; ++g) {
            const unsigned h = qh[g / 4];
            ix[g] = b[2 + 8 * u + g] | static_cast<int>(((h >> (3 * (g % 4))) & 7) << 8);
            negs |= ((h >> 15) & 1u) << g;
        }
        const __m512i grid = _mm512_i64gather_epi64(_mm512_load_si512(ix), reinterpret_cast<const long long*>(ref::kIq1sGrid), 8);
        return iq1_levels(grid, group_mask(negs));
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 50;
        const float d = h2f(b);
        alignas(64) float ws[16] = {};
        for (int ib = 0; ib < 8; ++ib) {
            uint16_t h;
            std::memcpy(&h, b + 34 + 2 * ib, 2);
            ws[ib] = d * static_cast<float>(2 * ((h >> 12) & 7) + 1) * 0.125f;
        }
        return _mm512_load_ps(ws);
    }
};

// IQ1_M (56 bytes: qs[32], qh[16], scales[8]): 11-bit indices, per-8 delta signs, per-16 scales.
struct DIQ1_M {
    static constexpr int kShift = 7, kUnits = 4, kSbElems = 256, kG = 16, kSbBytes = 56;
    static constexpr bool kMin = false, kVecScales = true;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static __m512i levels(const State&, const uint8_t* row, int64_t sb, int u, int64_t) {
        const uint8_t* b = row + sb * 56;
        alignas(64) int64_t ix[8];
        unsigned negs = 0;
        for (int g = 0; g < 8; ++g) {
            const unsigned h = b[32 + 4 * u + g / 2] >> (4 * (g % 2));
            ix[g] = b[8 * u + g] | static_cast<int>((h & 7) << 8);
            negs |= ((h >> 3) & 1u) << g;
        }
        const __m512i grid = _mm512_i64gather_epi64(_mm512_load_si512(ix), reinterpret_cast<const long long*>(ref::kIq1sGrid), 8);
        return iq1_levels(grid, group_mask(negs));
    }
    static __m512 scale_vec(const State&, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * 56;
        const float d = fp16_to_fp32(ref::iq1_m_scale_bits(b + 48));
        uint16_t sc[4];
        std::memcpy(sc, b + 48, 8);
        alignas(64) float ws[16];
        for (int ib = 0; ib < 8; ++ib) {
            const unsigned w = sc[ib / 2] >> (6 * (ib % 2));
            ws[2 * ib] = d * static_cast<float>(2 * (w & 7) + 1) * 0.125f;
            ws[2 * ib + 1] = d * static_cast<float>(2 * ((w >> 3) & 7) + 1) * 0.125f;
        }
        return _mm512_load_ps(ws);
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

}  // namespace

MatmulFn qmm512_iq_kernel(DType t) {
    switch (t) {
        case DType::IQ2_XXS: return qmm512<DType::IQ2_XXS, DIQ2_XXS, FastIQ2XXS>;
        case DType::IQ2_XS: return qmm512<DType::IQ2_XS, DIQ2_XS>;
        case DType::IQ2_S: return qmm512<DType::IQ2_S, DIQ2_S>;
        case DType::IQ3_XXS: return qmm512<DType::IQ3_XXS, DIQ3_XXS>;
        case DType::IQ3_S: return qmm512<DType::IQ3_S, DIQ3_S>;
        case DType::IQ1_S: return qmm512<DType::IQ1_S, DIQ1_S>;
        case DType::IQ1_M: return qmm512<DType::IQ1_M, DIQ1_M>;
        default: return nullptr;
    }
}

MatmulFn qmm512_iq_baseline(DType t) { return t == DType::IQ2_XXS ? qmm512<DType::IQ2_XXS, DIQ2_XXS> : nullptr; }

}  // namespace moe::kernels

#pragma GCC diagnostic pop
MOE_TARGET_POP
