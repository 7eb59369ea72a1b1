#include "kernels/cpu/rmsnorm.h"

#include <immintrin.h>

#include <cmath>

#include "core/error.h"

namespace moe::cpu {

#if MOE_DENSE_HAS_AVX512
MOE_DENSE_AVX512_BEGIN
static void rmsnorm_avx512(const RmsNormSpec& spec, const float* x, const float* w, float* y) {
    const int64_t n = spec.row_len;
    const int64_t nv = n & ~int64_t{15};
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - nv)) - 1u);
    for (int64_t r = 0; r < spec.n_rows; ++r) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i = 0; i < nv; i += 16) {
            const __m512 v = _mm512_loadu_ps(xr + i);
            acc = _mm512_fmadd_ps(v, v, acc);
        }
        if (tail) {
            const __m512 v = _mm512_maskz_loadu_ps(tail, xr + nv);
            acc = _mm512_fmadd_ps(v, v, acc);
        }
        const float ss = _mm512_reduce_add_ps(acc);
        const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + spec.eps);
        const __m512 vinv = _mm512_set1_ps(inv);
        for (int64_t i = 0; i < nv; i += 16) {
            __m512 v = _mm512_mul_ps(_mm512_loadu_ps(xr + i), vinv);
            if (w) v = _mm512_mul_ps(v, _mm512_loadu_ps(w + i));
            _mm512_storeu_ps(yr + i, v);
        }
        if (tail) {
            __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, xr + nv), vinv);
            if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(tail, w + nv));
            _mm512_mask_storeu_ps(yr + nv, tail, v);
        }
    }
}
MOE_DENSE_AVX512_END
#endif

void rmsnorm(const RmsNormSpec& spec, const float* x, const float* w, float* y, kernels::Isa isa) {
    MOE_ASSERT(spec.n_rows >= 0 && spec.row_len > 0, "rmsnorm shape ", spec.n_rows, " x ", spec.row_len);
#if MOE_DENSE_HAS_AVX512
    if (dense_use_avx512(isa)) {
        rmsnorm_avx512(spec, x, w, y);
        return;
    }
#endif
    ref::rmsnorm(spec, x, w, y);
}

}  // namespace moe::cpu
