#include "kernels/cpu/kv_q8_quant.h"

#include <immintrin.h>

#include <cstring>

#include "core/fp16.h"
#include "kernels/ref/kv_q8.h"

namespace moe::cpu {

#if MOE_DENSE_HAS_AVX512
MOE_DENSE_AVX512_BEGIN
namespace {

// One vector of d elements (last block zero-padded) -> kv_q8_vec_bytes(d) bytes.
void quantize_vec_avx512(const float* x, int64_t d, uint8_t* out) {
    // (integer and/or: the float forms are AVX512DQ, not in the portable build's target)
    const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(0x80000000u)), one = _mm512_castps_si512(_mm512_set1_ps(1.0f));
    const __m512 half = _mm512_set1_ps(0.5f);
    for (int64_t i0 = 0; i0 < d; i0 += kKvQ8Block) {
        const int64_t e = d - i0;
        const __mmask16 m0 = static_cast<__mmask16>(e >= 16 ? 0xFFFFu : (1u << e) - 1u);
        const __mmask16 m1 = static_cast<__mmask16>(e >= 32 ? 0xFFFFu : e > 16 ? (1u << (e - 16)) - 1u : 0u);
        const __m512 a = _mm512_maskz_loadu_ps(m0, x + i0), b = _mm512_maskz_loadu_ps(m1, x + i0 + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
        const float dd = amax / 127.0f;
        const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        uint8_t* blk = out + (i0 / kKvQ8Block) * kKvQ8BlockBytes;
        const uint16_t h = fp32_to_fp16(dd);
        std::memcpy(blk, &h, sizeof h);
        for (int part = 0; part < 2; ++part) {
            const __m512 v = _mm512_mul_ps(part ? b : a, vid);
            // std::round: half away from zero. t = trunc(v); v - t is exact (|v| <= 127.x); add sign(v) when |v - t| >= 0.5.
            const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), half, _CMP_GE_OQ);
            const __m512 sgn1 = _mm512_castsi512_ps(_mm512_or_si512(one, _mm512_and_si512(sign_bit, _mm512_castps_si512(v))));
            const __m512 r = _mm512_mask_add_ps(t, up, t, sgn1);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(blk + 2 + 16 * part), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(r)));
        }
    }
}

}  // namespace
MOE_DENSE_AVX512_END
#endif

void kv_q8_quantize_rows(const float* x, int64_t n, int64_t d, uint8_t* out, int64_t out_stride, kernels::Isa isa) {
#if MOE_DENSE_HAS_AVX512
    if (dense_use_avx512(isa)) {
        for (int64_t i = 0; i < n; ++i) quantize_vec_avx512(x + i * d, d, out + i * out_stride);
        return;
    }
#endif
    (void)isa;
    for (int64_t i = 0; i < n; ++i) kv_q8_quantize(x + i * d, d, out + i * out_stride);
}

}  // namespace moe::cpu
