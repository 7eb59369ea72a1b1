// AVX2 + F16C row conversion to f32 for F16, BF16, Q8_0, Q4_K, Q5_K and Q6_K: dequant_row.cpp's
// AVX-512 forms on 8-float vectors, for CPUs without AVX-512 (Zen 2/3, Haswell..Alder Lake). MLA
// reads kv_b in place at every decode step through dequant_row (model/weights.cpp kv_b_in_place),
// where the scalar reference costs 0.3-0.5 ns per value. Every product below is exact in f32 (the
// bit counts are given per type), so these give ref::dequant_row's bits in any evaluation order.
#include "kernels/cpu/dequant_row_avx2.h"

#include <immintrin.h>

#include <cstring>

#include "kernels/ref/quant_formats.h"

namespace moe::cpu {

namespace {

#define MOE_DQ_AVX2 __attribute__((target("avx2,fma,f16c")))

MOE_DQ_AVX2 inline __m256 f16x1(const uint8_t* p) {  // one f16 at p, broadcast
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
}

// 8 bytes at p, sign-extended, as floats
MOE_DQ_AVX2 inline __m256 i8x8(const uint8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

MOE_DQ_AVX2 int64_t halves(DType type, const uint16_t* s, float* d, int64_t n) {
    const int64_t nv = n & ~int64_t{7};
    for (int64_t i = 0; i < nv; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        _mm256_storeu_ps(d + i, type == DType::F16 ? _mm256_cvtph_ps(h)
                                                   : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
    }
    return nv;
}

// Q8_0 (34 bytes: f16 d, 32 int8): d * q exact (11 + 8 bits).
MOE_DQ_AVX2 void q8_0(const uint8_t* s, float* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, s += 34, y += 32) {
        const __m256 d = f16x1(s);
        for (int k = 0; k < 4; ++k) _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(d, i8x8(s + 2 + 8 * k)));
    }
}

// Q4_K / Q5_K (144 / 176 bytes: f16 d, f16 dmin, 12 scale bytes, (Q5_K) qh[32], qs[128]):
// y = (d * sc) * q - dmin * m; d * sc (11 + 6 bits) times q (4 or 5 bits) exact, so the fused
// multiply-subtract rounds as the reference's separate ones.
template <bool kQ5>
MOE_DQ_AVX2 void q45_k(const uint8_t* s, float* y, int64_t n) {
    constexpr size_t kBytes = kQ5 ? 176 : 144;
    const __m256i low = _mm256_set1_epi32(0xF), one = _mm256_set1_epi32(1);
    for (int64_t b = 0; b < n / 256; ++b, s += kBytes) {
        const float d = _mm256_cvtss_f32(f16x1(s)), dmin = _mm256_cvtss_f32(f16x1(s + 2));
        const uint8_t* qh = s + 16;
        const uint8_t* qs = s + (kQ5 ? 48 : 16);
        for (int j = 0; j < 8; ++j, y += 32) {  // 32 values per scale: nibble half j & 1 of bytes 32 (j / 2) ..
            uint8_t sc, m;
            ref::get_scale_min_k4(j, s + 4, &sc, &m);
            const __m256 d1 = _mm256_set1_ps(d * static_cast<float>(sc)), m1 = _mm256_set1_ps(dmin * static_cast<float>(m));
            for (int part = 0; part < 4; ++part) {
                const __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 32 * (j / 2) + 8 * part)));
                __m256i v = (j & 1) ? _mm256_srli_epi32(q, 4) : _mm256_and_si256(q, low);
                if constexpr (kQ5) {
                    const __m256i hb = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qh + 8 * part)));
                    v = _mm256_or_si256(v, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hb, j), one), 4));
                }
                _mm256_storeu_ps(y + 8 * part, _mm256_fmsub_ps(d1, _mm256_cvtepi32_ps(v), m1));
            }
        }
    }
}

// Q6_K (210 bytes: ql[128], qh[64], int8 scales[16], f16 d): y = d * sc * (q - 32), (d * sc) *
// (q - 32) exact (11 + 8 + 6 bits).
MOE_DQ_AVX2 void q6_k(const uint8_t* s, float* y, int64_t n) {
    const __m256i low = _mm256_set1_epi32(0xF), three = _mm256_set1_epi32(3), bias = _mm256_set1_epi32(32);
    for (int64_t b = 0; b < n / 256; ++b, s += 210) {
        const float d = _mm256_cvtss_f32(f16x1(s + 208));
        const auto* scales = reinterpret_cast<const int8_t*>(s + 192);
        for (int half = 0; half < 2; ++half, y += 128) {
            const uint8_t* ql = s + 64 * half;
            const uint8_t* qh = s + 128 + 32 * half;
            const int8_t* sc = scales + 8 * half;
            for (int l = 0; l < 32; l += 8) {
                auto load = [](const uint8_t* p) MOE_DQ_AVX2 {
                    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
                };
                const __m256i a = load(ql + l), c = load(ql + l + 32), hb = load(qh + l);
                const __m256i q[4] = {
                    _mm256_or_si256(_mm256_and_si256(a, low), _mm256_slli_epi32(_mm256_and_si256(hb, three), 4)),
                    _mm256_or_si256(_mm256_and_si256(c, low), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hb, 2), three), 4)),
                    _mm256_or_si256(_mm256_srli_epi32(a, 4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hb, 4), three), 4)),
                    _mm256_or_si256(_mm256_srli_epi32(c, 4), _mm256_slli_epi32(_mm256_srli_epi32(hb, 6), 4))};
                for (int k = 0; k < 4; ++k) {
                    const __m256 ds = _mm256_set1_ps(d * static_cast<float>(sc[l / 16 + 2 * k]));
                    _mm256_storeu_ps(y + l + 32 * k, _mm256_mul_ps(ds, _mm256_cvtepi32_ps(_mm256_sub_epi32(q[k], bias))));
                }
            }
        }
    }
}

}  // namespace

int64_t dequant_row_avx2(DType type, const void* src, float* dst, int64_t n) {
    const auto* s = static_cast<const uint8_t*>(src);
    switch (type) {
        case DType::F16: case DType::BF16:
            return halves(type, static_cast<const uint16_t*>(src), dst, n);
        case DType::Q8_0:
            if (n % 32 != 0) return 0;
            q8_0(s, dst, n);
            return n;
        case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
            if (n % 256 != 0) return 0;
            type == DType::Q4_K ? q45_k<false>(s, dst, n) : type == DType::Q5_K ? q45_k<true>(s, dst, n) : q6_k(s, dst, n);
            return n;
        default:
            return 0;
    }
}

}  // namespace moe::cpu
