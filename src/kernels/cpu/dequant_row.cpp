#include "kernels/cpu/dequant_row.h"

#include <immintrin.h>

#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/cpu/dequant_row_avx2.h"
#include "kernels/ref/dequant_row.h"
#include "kernels/ref/quant_formats.h"

namespace moe::cpu {

#if MOE_DENSE_HAS_AVX512
MOE_DENSE_AVX512_BEGIN
// Returns the number of elements converted (a multiple of 16); the caller finishes the tail.
static int64_t dequant_avx512(DType type, const uint16_t* s, float* d, int64_t n) {
    const int64_t nv = n & ~int64_t{15};
    if (type == DType::F16) {
        for (int64_t i = 0; i < nv; i += 16)
            _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
    } else {  // BF16: the 16 bits are the top half of the f32
        for (int64_t i = 0; i < nv; i += 16) {
            const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
            _mm512_storeu_ps(d + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
        }
    }
    return nv;
}

// Q8_0 (34-byte blocks: f16 d, 32 int8): d * q is exact in f32 (11 + 8 significant bits), so any
// evaluation order gives ref::dequant_row's bits.
static void dequant_q8_0_avx512(const uint8_t* s, float* d, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, s += 34, d += 32) {
        uint16_t h;
        std::memcpy(&h, s, 2);
        const __m512 scale = _mm512_set1_ps(fp16_to_fp32(h));
        for (int half = 0; half < 2; ++half) {
            const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 + 16 * half));
            _mm512_storeu_ps(d + 16 * half, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))));
        }
    }
}

// Q4_K (144-byte blocks: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles)
// and Q5_K (176 bytes: the same header, qh[32], then the 128 bytes of nibbles; value l of sub-block j
// gets 16 x bit j of qh[l]): y = (d * sc) * q - dmin * m. d * sc (11 + 6 bits) and its product
// with q (4 or 5 bits) are exact in f32, so the fused and the separate multiply-subtract round
// alike: ref::dequant_row's bits. (The reference's per-block memcpy into a struct made MLA's
// per-call kv_b reads 10 % of decode; a Q5_K_M file's kv_b goes through the Q5_K form.)
template <bool kQ5>
static void dequant_q45_k_avx512(const uint8_t* s, float* y, int64_t n) {
    constexpr size_t kBytes = kQ5 ? 176 : 144;
    const __m512i low = _mm512_set1_epi32(0xF), one = _mm512_set1_epi32(1);
    for (int64_t b = 0; b < n / 256; ++b, s += kBytes) {
        uint16_t h[2];
        std::memcpy(h, s, 4);
        const float d = fp16_to_fp32(h[0]), dmin = fp16_to_fp32(h[1]);
        const uint8_t* qh = s + 16;  // Q5_K only
        const uint8_t* qs = s + (kQ5 ? 48 : 16);
        for (int j = 0; j < 8; ++j, y += 32) {  // 32 values per scale: nibble half j & 1 of bytes 32 (j / 2) ..
            uint8_t sc, m;
            ref::get_scale_min_k4(j, s + 4, &sc, &m);
            const __m512 d1 = _mm512_set1_ps(d * static_cast<float>(sc)), m1 = _mm512_set1_ps(dmin * static_cast<float>(m));
            for (int part = 0; part < 2; ++part) {
                const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 32 * (j / 2) + 16 * part)));
                __m512i v = (j & 1) ? _mm512_srli_epi32(q, 4) : _mm512_and_si512(q, low);
                if constexpr (kQ5) {
                    const __m512i hb = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + 16 * part)));
                    v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hb, j), one), 4));
                }
                _mm512_storeu_ps(y + 16 * part, _mm512_fmsub_ps(d1, _mm512_cvtepi32_ps(v), m1));
            }
        }
    }
}

// Q6_K (210-byte blocks: ql[128], qh[64], int8 scales[16], f16 d): y = d * sc * (q - 32), with
// (d * sc) * q exact in f32 (11 + 8 + 6 bits), so any order gives ref::dequant_row's bits.
static void dequant_q6_k_avx512(const uint8_t* s, float* y, int64_t n) {
    const __m512i low = _mm512_set1_epi32(0xF), three = _mm512_set1_epi32(3), bias = _mm512_set1_epi32(32);
    for (int64_t b = 0; b < n / 256; ++b, s += 210) {
        uint16_t h;
        std::memcpy(&h, s + 208, 2);
        const float d = fp16_to_fp32(h);
        const auto* scales = reinterpret_cast<const int8_t*>(s + 192);
        for (int half = 0; half < 2; ++half, y += 128) {
            const uint8_t* ql = s + 64 * half;
            const uint8_t* qh = s + 128 + 32 * half;
            const int8_t* sc = scales + 8 * half;
            for (int l = 0; l < 32; l += 16) {
                auto load = [](const uint8_t* p) {
                    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
                };
                const __m512i a = load(ql + l), c = load(ql + l + 32), hb = load(qh + l);
                const __m512i q[4] = {
                    _mm512_or_si512(_mm512_and_si512(a, low), _mm512_slli_epi32(_mm512_and_si512(hb, three), 4)),
                    _mm512_or_si512(_mm512_and_si512(c, low), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hb, 2), three), 4)),
                    _mm512_or_si512(_mm512_srli_epi32(a, 4), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hb, 4), three), 4)),
                    _mm512_or_si512(_mm512_srli_epi32(c, 4), _mm512_slli_epi32(_mm512_srli_epi32(hb, 6), 4))};
                for (int k = 0; k < 4; ++k) {
                    const __m512 ds = _mm512_set1_ps(d * static_cast<float>(sc[l / 16 + 2 * k]));
                    _mm512_storeu_ps(y + l + 32 * k, _mm512_mul_ps(ds, _mm512_cvtepi32_ps(_mm512_sub_epi32(q[k], bias))));
                }
            }
        }
    }
}
MOE_DENSE_AVX512_END
#endif

void dequant_row(DType type, const void* src, float* dst, int64_t n, kernels::Isa isa) {
#if MOE_DENSE_HAS_AVX512
    if ((type == DType::F16 || type == DType::BF16) && dense_use_avx512(isa)) {
        const auto* s = static_cast<const uint16_t*>(src);
        const int64_t done = dequant_avx512(type, s, dst, n);
        ref::dequant_row(type, s + done, dst + done, n - done);
        return;
    }
    if (type == DType::Q8_0 && n % 32 == 0 && dense_use_avx512(isa)) {
        dequant_q8_0_avx512(static_cast<const uint8_t*>(src), dst, n);
        return;
    }
    if (type == DType::Q6_K && n % 256 == 0 && dense_use_avx512(isa)) {
        dequant_q6_k_avx512(static_cast<const uint8_t*>(src), dst, n);
        return;
    }
    if (type == DType::Q4_K && n % 256 == 0 && dense_use_avx512(isa)) {
        dequant_q45_k_avx512<false>(static_cast<const uint8_t*>(src), dst, n);
        return;
    }
    if (type == DType::Q5_K && n % 256 == 0 && dense_use_avx512(isa)) {
        dequant_q45_k_avx512<true>(static_cast<const uint8_t*>(src), dst, n);
        return;
    }
#endif
    if (isa != kernels::Isa::Scalar && kernels::isa_supported(kernels::Isa::Avx2) && kernels::cpu_has_f16c()) {  // (Avx2: with FMA)
        const int64_t done = dequant_row_avx2(type, src, dst, n);
        if (done == n) return;
        if (done > 0) {  // F16 / BF16: the tail
            ref::dequant_row(type, static_cast<const uint16_t*>(src) + done, dst + done, n - done);
            return;
        }
    }
    ref::dequant_row(type, src, dst, n);
}

}  // namespace moe::cpu
