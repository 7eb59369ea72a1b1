#include "kernels/cpu/dequant_row.h"

#include <immintrin.h>

#include "core/error.h"
#include "kernels/ref/dequant_row.h"

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
#endif
    ref::dequant_row(type, src, dst, n);
}

}  // namespace moe::cpu
