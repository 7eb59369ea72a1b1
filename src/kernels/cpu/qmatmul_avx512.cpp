// AVX-512 + VNNI int8 weight kernels: the CPU check, the AVX-512 activation quantizer and the one
// kernel table keyed by weight type, which hands each type to its family's file (the engine and
// the list of families: qmatmul_avx512.h). Compiled with a target pragma so the portable build
// carries it; used only when the CPU has AVX512F/BW/VL/DQ + VNNI (qmm_avx512_usable()).
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

namespace moe::kernels {

bool qmm_avx512_usable() {
#if defined(__x86_64__) && defined(__GNUC__)
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") &&
                           cpu_has_f16c() && __builtin_cpu_supports("bmi2");
    return ok;
#else
    return false;
#endif
}

}  // namespace moe::kernels

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2,bmi2")
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm*_undefined_* helpers (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/qmatmul_avx512.h"

namespace moe::kernels {

// Same bytes as ref::quantize_act_q8 (kernels/ref/quantize_act.h): per block (32 values, or 256 for
// kActQ8_K) the multiplier and scale, then per 32-value group the vector multiply + round.
// Columns [c0, c1) of one row (x: their values; ref::quantize_act_q8_cols' contract).
void quantize_act_cols_avx512(ref::ActQuant kind, const float* x, int64_t K, int64_t c0, int64_t c1, void* out) {
    const int64_t B = kind == ref::kActQ8_K ? 256 : 32;
    const auto mask_of = [](int64_t n) {  // first n of 16 lanes
        return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n > 0 ? static_cast<__mmask16>((1u << n) - 1u) : static_cast<__mmask16>(0);
    };
    ref::act_q8_zero_cols(out, K, c0, c1);
    const ref::ActQ8Row q = ref::act_q8_row(out, K);
    for (int64_t b0 = c0; b0 < c1; b0 += B) {
        const int64_t n = std::min(B, K - b0);
        __m512 vmax = _mm512_setzero_ps();
        for (int64_t l = 0; l < n; l += 16)
            vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_maskz_loadu_ps(mask_of(n - l), x + (b0 - c0) + l)));
        const float amax = _mm512_reduce_max_ps(vmax);
        float mul = 0.0f, d = 0.0f, df32 = 0.0f;
        if (amax >= 1e-30f) {
            if (kind == ref::kActQ8_K) {
                float sv = 0.0f;  // the first value of largest |x|
                for (int64_t l = 0; l < n; l += 16) {
                    const __m512 v = _mm512_maskz_loadu_ps(mask_of(n - l), x + (b0 - c0) + l);
                    const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(amax), _CMP_EQ_OQ);
                    if (hit) {
                        sv = x[b0 - c0 + l + __builtin_ctz(hit)];
                        break;
                    }
                }
                mul = -127.0f / sv;
                d = 1.0f / mul;
            } else {
                mul = 127.0f / amax;
                df32 = amax / 127.0f;
                d = _cvtsh_ss(_cvtss_sh(df32, _MM_FROUND_TO_NEAREST_INT));
            }
        }
        const __m512 vmul = _mm512_set1_ps(mul);
        constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        const __m512i c127 = _mm512_set1_epi32(127);
        for (int64_t g = b0 / 32; g < (b0 + n + 31) / 32; ++g) {
            const int64_t i0 = 32 * g, ng = std::min<int64_t>(32, K - i0);
            const __m512 v0 = _mm512_maskz_loadu_ps(mask_of(ng), x + (i0 - c0));
            const __m512 v1 = _mm512_maskz_loadu_ps(mask_of(ng - 16), x + (i0 - c0) + 16);
            const __m512i q0 = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v0, vmul), kRound)), c127);
            const __m512i q1 = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v1, vmul), kRound)), c127);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(q.qs + i0), _mm512_cvtepi32_epi8(q0));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(q.qs + i0 + 16), _mm512_cvtepi32_epi8(q1));
            const int32_t s0 = _mm512_reduce_add_epi32(q0), s1 = _mm512_reduce_add_epi32(q1);
            const int64_t u = g / 2, h = g % 2;
            _mm256_storeu_ps(q.dxv + 16 * u + 8 * h, _mm256_set1_ps(d));
            q.nsum[16 * u + 8 * h + 0] = -s0;
            q.nsum[16 * u + 8 * h + 4] = -s1;
            const float s = static_cast<float>(s0 + s1);
            q.dxs[g] = kind == ref::kActQ8_1 ? _cvtsh_ss(_cvtss_sh(df32 * s, _MM_FROUND_TO_NEAREST_INT)) : d * s;
        }
    }
}

void quantize_act_rows_avx512(ref::ActQuant kind, const float* x, int64_t ldx, int64_t m, int64_t K, void* out,
                              size_t stride) {
    for (int64_t r = 0; r < m; ++r) quantize_act_cols_avx512(kind, x + r * ldx, K, 0, K, static_cast<char*>(out) + r * stride);
}

MatmulFn qmm_avx512_kernel(DType t) {
    if (MatmulFn f = qmm512_q8k_kernel(t)) return f;
    if (MatmulFn f = qmm512_legacy_k_kernel(t)) return f;
    return qmm512_iq_kernel(t);
}

MatmulFn qmm_avx512_baseline_kernel(DType t) {
    if (!qmm_has_avx512(t)) return nullptr;
    if (MatmulFn f = qmm512_legacy_k_baseline(t)) return f;
    return qmm512_iq_baseline(t);
}

}  // namespace moe::kernels

#pragma GCC diagnostic pop
MOE_TARGET_POP
