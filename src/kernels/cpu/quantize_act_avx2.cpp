// AVX2 activation quantizer: the same bytes as ref::quantize_act_q8 (kernels/ref/quantize_act.h),
// for CPUs without the AVX-512 one (qmatmul_avx512.cpp). The scalar reference rounds with libm's
// nearbyint per value, ~10 us per 2048-value row: as long as a decode GEMV of a 1024 x 2048 Q4_K
// matrix takes from DRAM.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "kernels/ref/quantize_act.h"

namespace moe::kernels {

namespace {
#define MOE_AVX2 __attribute__((target("avx2,fma")))

MOE_AVX2 inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
MOE_AVX2 inline int32_t hsum8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}
}  // namespace

// Columns [c0, c1) of one row (x: their values; ref::quantize_act_q8_cols' contract).
MOE_AVX2 void quantize_act_cols_avx2(ref::ActQuant kind, const float* x, int64_t K, int64_t c0, int64_t c1, void* out) {
    const int64_t B = kind == ref::kActQ8_K ? 256 : 32;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256i c127 = _mm256_set1_epi32(127);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the two packs' lane interleave
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    alignas(32) float pad[32];
    ref::act_q8_zero_cols(out, K, c0, c1);
    const ref::ActQ8Row q = ref::act_q8_row(out, K);
    // 32 values from column i0 (zero-filled past K: zeros change neither the max nor the sums)
    const auto group = [&](int64_t i0) -> const float* {
        if (i0 + 32 <= K) return x + (i0 - c0);
        std::memset(pad, 0, sizeof pad);
        std::memcpy(pad, x + (i0 - c0), sizeof(float) * static_cast<size_t>(K - i0));
        return pad;
    };
    for (int64_t b0 = c0; b0 < c1; b0 += B) {
        const int64_t n = std::min(B, K - b0);
        __m256 vmax = _mm256_setzero_ps();
        for (int64_t l = 0; l < n; l += 32) {
            const float* g = group(b0 + l);
            for (int k = 0; k < 4; ++k) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(g + 8 * k), absmask));
        }
        const float amax = hmax8(vmax);
        float mul = 0.0f, d = 0.0f, df32 = 0.0f;
        if (amax >= 1e-30f) {
            if (kind == ref::kActQ8_K) {
                float sv = amax;  // the first value of largest |x| (its sign sets mul's)
                for (int64_t l = 0; l < n; ++l)
                    if (std::fabs(x[b0 - c0 + l]) == amax) {
                        sv = x[b0 - c0 + l];
                        break;
                    }
                mul = -127.0f / sv;
                d = 1.0f / mul;
            } else {
                mul = 127.0f / amax;
                df32 = amax / 127.0f;
                d = fp16_to_fp32(fp32_to_fp16(df32));
            }
        }
        const __m256 vmul = _mm256_set1_ps(mul);
        for (int64_t gi = b0 / 32; gi < (b0 + n + 31) / 32; ++gi) {
            const int64_t i0 = 32 * gi;
            const float* g = group(i0);
            __m256i qv[4];
            for (int k = 0; k < 4; ++k)
                qv[k] = _mm256_min_epi32(
                    _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(g + 8 * k), vmul), kRound)), c127);
            const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(qv[0], qv[1]), _mm256_packs_epi32(qv[2], qv[3]));
            const __m256i bytes32 = _mm256_permutevar8x32_epi32(p, order);
            if (i0 + 32 <= K) {
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(q.qs + i0), bytes32);
            } else {
                alignas(32) int8_t t[32];
                _mm256_store_si256(reinterpret_cast<__m256i*>(t), bytes32);
                std::memcpy(q.qs + i0, t, static_cast<size_t>(K - i0));
            }
            const int32_t s0 = hsum8(_mm256_add_epi32(qv[0], qv[1])), s1 = hsum8(_mm256_add_epi32(qv[2], qv[3]));
            const int64_t u = gi / 2, h = gi % 2;
            _mm256_storeu_ps(q.dxv + 16 * u + 8 * h, _mm256_set1_ps(d));
            q.nsum[16 * u + 8 * h + 0] = -s0;
            q.nsum[16 * u + 8 * h + 4] = -s1;
            const float s = static_cast<float>(s0 + s1);
            q.dxs[gi] = kind == ref::kActQ8_1 ? fp16_to_fp32(fp32_to_fp16(df32 * s)) : d * s;
        }
    }
}

}  // namespace moe::kernels
