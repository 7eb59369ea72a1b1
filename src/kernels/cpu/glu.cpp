#include "kernels/cpu/glu.h"

#include <immintrin.h>

#include <cstdint>

namespace moe::cpu {

namespace {
void glu_scalar(const GluSpec& s, int64_t n, float* h, const float* u, const float* gb, const float* ub) {
    for (int64_t i = 0; i < n; ++i) h[i] = glu1(s, gb ? h[i] + gb[i] : h[i], ub ? u[i] + ub[i] : u[i]);
}
}  // namespace

#if MOE_DENSE_HAS_AVX512
MOE_DENSE_AVX512_BEGIN
namespace {
// ref::exp_f32 on 8 lanes of doubles (NaN lanes are fixed up by the caller): the same clamp,
// rounding, FMAs and scaling as the scalar code. max(lo, x) / min(hi, x) keep x's order of
// std::max(lo, x) / std::min(hi, x) for every non-NaN x.
inline __m512d exp_pd(__m512d x) {
    x = _mm512_min_pd(_mm512_set1_pd(ref::kExpHi), _mm512_max_pd(_mm512_set1_pd(ref::kExpLo), x));
    const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(ref::kExpLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(ref::kExpLn2), x);  // fma(-n, ln2, x)
    __m512d p = _mm512_set1_pd(ref::kExpPoly[0]);
    for (int k = 1; k < 10; ++k) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(ref::kExpPoly[k]));
    return _mm512_scalef_pd(p, n);
}
// exp_f32 of 16 floats.
inline __m512 exp_ps(__m512 x) {
    const __m512d lo = exp_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(x)));
    const __m512d hi = exp_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1))));
    // (AVX512F only: the portable build's dense region has no AVX512DQ, so no insertf32x8)
    const __m512 e = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo))),
                                                         _mm256_castps_pd(_mm512_cvtpd_ps(hi)), 1));
    return _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);  // exp_f32(NaN) = NaN, as is
}

// -x (the sign bit flipped, as the scalar negation)
inline __m512 neg(__m512 x) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN))); }

void glu_avx512(const GluSpec& s, int64_t n, float* h, const float* u, const float* gb, const float* ub) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 L = _mm512_set1_ps(s.limit), nL = _mm512_set1_ps(-s.limit), alpha = _mm512_set1_ps(s.alpha);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - i)) - 1u);
        __m512 g = _mm512_maskz_loadu_ps(k, h + i), v = _mm512_maskz_loadu_ps(k, u + i);
        if (gb) g = _mm512_add_ps(g, _mm512_maskz_loadu_ps(k, gb + i));
        if (ub) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, ub + i));
        __m512 y;
        if (!s.clamped) {
            y = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, exp_ps(neg(g)))), v);
        } else {
            g = _mm512_min_ps(L, g);                     // std::min(g, L): L < g ? L : g
            v = _mm512_min_ps(L, _mm512_max_ps(nL, v));  // std::max(v, -L), then std::min(., L)
            const __m512 e = exp_ps(_mm512_mul_ps(neg(alpha), g));  // (-alpha) * g
            y = _mm512_mul_ps(_mm512_add_ps(v, one), _mm512_div_ps(g, _mm512_add_ps(one, e)));
        }
        _mm512_mask_storeu_ps(h + i, k, y);
    }
}
}  // namespace
MOE_DENSE_AVX512_END
#endif

void glu(const GluSpec& s, int64_t n, float* h, const float* u, const float* gb, const float* ub, kernels::Isa isa) {
#if MOE_DENSE_HAS_AVX512
    if (dense_use_avx512(isa)) return glu_avx512(s, n, h, u, gb, ub);
#endif
    glu_scalar(s, n, h, u, gb, ub);
}

}  // namespace moe::cpu
