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

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2,bmi2")
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm*_undefined_* helpers (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/qmatmul_avx512.h"

namespace moe::kernels {

void quantize_act_rows_avx512(const float* x, int64_t ldx, int64_t m, int64_t K, void* out, size_t stride) {
    const int64_t Kp = ref::act_q8_padded(K);
    const size_t bytes = ref::act_q8_row_bytes(K);
    for (int64_t r = 0; r < m; ++r) {
        const float* xr = x + r * ldx;
        void* o = static_cast<char*>(out) + r * stride;
        std::memset(o, 0, bytes);
        const ref::ActQ8Row q = ref::act_q8_row(o, K);
        for (int64_t g = 0; g < Kp / 32; ++g) {
            const int64_t i0 = 32 * g;
            const int64_t n = K - i0 >= 32 ? 32 : (K > i0 ? K - i0 : 0);
            const __mmask16 m0 = n >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1u);
            const __mmask16 m1 = n >= 32 ? 0xFFFF : (n > 16 ? static_cast<__mmask16>((1u << (n - 16)) - 1u) : 0);
            const __m512 v0 = _mm512_maskz_loadu_ps(m0, xr + i0);
            const __m512 v1 = _mm512_maskz_loadu_ps(m1, xr + i0 + 16);
            const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
            const float d = amax >= 1e-30f ? amax / 127.0f : 0.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            const __m512 vid = _mm512_set1_ps(id);
            constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
            const __m512i q0 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v0, vid), kRound));
            const __m512i q1 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v1, vid), kRound));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(q.qs + i0), _mm512_cvtepi32_epi8(q0));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(q.qs + i0 + 16), _mm512_cvtepi32_epi8(q1));
            const int32_t s0 = _mm512_reduce_add_epi32(q0), s1 = _mm512_reduce_add_epi32(q1);
            const int64_t u = g / 2, h = g % 2;
            _mm256_storeu_ps(q.dxv + 16 * u + 8 * h, _mm256_set1_ps(d));
            q.nsum[16 * u + 8 * h + 0] = -s0;
            q.nsum[16 * u + 8 * h + 4] = -s1;
            q.dxs[g] = d * static_cast<float>(s0 + s1);
        }
    }
}

MatmulFn qmm_avx512_kernel(DType t) {
    if (MatmulFn f = qmm512_q8k_kernel(t)) return f;
    if (MatmulFn f = qmm512_legacy_k_kernel(t)) return f;
    return qmm512_iq_kernel(t);
}

}  // namespace moe::kernels

#pragma GCC diagnostic pop
#pragma GCC pop_options
