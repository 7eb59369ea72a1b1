// AVX-512 activation quantizer: the same bytes as ref::quantize_act_q8 (kernels/ref/quantize_act.h).
// Per block (32 values, or 256 for kActQ8_K) the multiplier and scale from the block's largest |x|;
// then each whole 64-value unit in one pass: four vectors multiplied and rounded (embedded
// round-to-nearest-even), packed to 64 int8 in order, the four 16-value sums from one psadbw, and
// the unit's qs / dxv / nsum written as whole lines (no reduction per 32 values: this runs once per
// activation value of every layer, ~2 % of a prefill). A row's last, partial unit goes value group
// by value group as the reference does.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/isa_target.h"
#include "kernels/ref/quantize_act.h"

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx2")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace moe::kernels {

namespace {
constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

inline __mmask16 first_lanes(int64_t n) {  // first n of 16 lanes
    return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n > 0 ? static_cast<__mmask16>((1u << n) - 1u) : static_cast<__mmask16>(0);
}

// A block's (or group's) multiplier and scales: q = nearbyint(x * mul), value = d * q; df: Q8_1's
// f32 scale (its group sums are rounded from it).
struct BlockScale {
    float mul = 0.0f, d = 0.0f, df = 0.0f;
};

// The n values at x (n <= 256): ref::quantize_act_q8's per-block scale.
inline BlockScale block_scale(ref::ActQuant kind, const float* x, int64_t n) {
    __m512 vmax = _mm512_setzero_ps();
    for (int64_t l = 0; l < n; l += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_maskz_loadu_ps(first_lanes(n - l), x + l)));
    const float amax = _mm512_reduce_max_ps(vmax);
    BlockScale s;
    if (amax < 1e-30f) return s;
    if (kind == ref::kActQ8_K) {
        float sv = 0.0f;  // the first value of largest |x|
        for (int64_t l = 0; l < n; l += 16) {
            const __m512 v = _mm512_maskz_loadu_ps(first_lanes(n - l), x + l);
            const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (hit) {
                sv = x[l + __builtin_ctz(hit)];
                break;
            }
        }
        s.mul = -127.0f / sv;
        s.d = 1.0f / s.mul;
    } else {
        s.mul = 127.0f / amax;
        s.df = amax / 127.0f;
        s.d = _cvtsh_ss(_cvtss_sh(s.df, _MM_FROUND_TO_NEAREST_INT));
    }
    return s;
}

inline float group_dxs(ref::ActQuant kind, const BlockScale& s, int32_t sum) {
    const float f = static_cast<float>(sum);
    return kind == ref::kActQ8_1 ? _cvtsh_ss(_cvtss_sh(s.df * f, _MM_FROUND_TO_NEAREST_INT)) : s.d * f;
}

// Group g (32 values from column 32 g, x at its first value, K the row's length) value by value
// group: the reference's order, for a row's partial last unit.
inline void group_slow(ref::ActQuant kind, const float* x, int64_t g, int64_t K, const BlockScale& s, const ref::ActQ8Row& q) {
    const int64_t i0 = 32 * g, ng = std::min<int64_t>(32, K - i0);
    const __m512 vmul = _mm512_set1_ps(s.mul);
    const __m512i c127 = _mm512_set1_epi32(127);
    const __m512i q0 = _mm512_min_epi32(_mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(first_lanes(ng), x), vmul), kRound), c127);
    const __m512i q1 =
        _mm512_min_epi32(_mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(first_lanes(ng - 16), x + 16), vmul), kRound), c127);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q.qs + i0), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q.qs + i0 + 16), _mm512_cvtepi32_epi8(q1));
    const int32_t s0 = _mm512_reduce_add_epi32(q0), s1 = _mm512_reduce_add_epi32(q1);
    const int64_t u = g / 2, h = g % 2;
    _mm256_storeu_ps(q.dxv + 16 * u + 8 * h, _mm256_set1_ps(s.d));
    q.nsum[16 * u + 8 * h + 0] = -s0;
    q.nsum[16 * u + 8 * h + 4] = -s1;
    q.dxs[g] = group_dxs(kind, s, s0 + s1);
}

// The whole unit from column i0 (x at its first value): groups 2u and 2u + 1 with scales lo, hi.
inline void unit_fast(ref::ActQuant kind, const float* x, int64_t i0, const BlockScale& lo, const BlockScale& hi,
                      const ref::ActQ8Row& q) {
    const __m512i c127 = _mm512_set1_epi32(127);
    const __m512 mlo = _mm512_set1_ps(lo.mul), mhi = _mm512_set1_ps(hi.mul);
    __m512i v[4];
    for (int k = 0; k < 4; ++k)
        v[k] = _mm512_min_epi32(_mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * k), k < 2 ? mlo : mhi), kRound), c127);
    // |q| <= 127, so the saturating packs are exact; they leave 4-value pieces interleaved per
    // 128-bit lane (lane L: v0[4L..], v1[4L..], v2[4L..], v3[4L..]), which the dword permute undoes
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i b = _mm512_permutexvar_epi32(
        order, _mm512_packs_epi16(_mm512_packs_epi32(v[0], v[1]), _mm512_packs_epi32(v[2], v[3])));
    _mm512_storeu_si512(q.qs + i0, b);
    // per 8 bytes the sum of q + 128 (psadbw), adjacent pairs added: 16-value sums + 2048 in lanes 4i
    const __m512i sad = _mm512_sad_epu8(_mm512_xor_si512(b, _mm512_set1_epi8(static_cast<char>(0x80))), _mm512_setzero_si512());
    const __m512i s16 = _mm512_add_epi64(sad, _mm512_shuffle_epi32(sad, _MM_PERM_BADC));
    const int64_t u = i0 / 64;
    _mm512_storeu_si512(q.nsum + 16 * u, _mm512_maskz_sub_epi32(0x1111, _mm512_set1_epi32(16 * 128), s16));
    _mm512_storeu_ps(q.dxv + 16 * u, _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(lo.d)), _mm256_set1_ps(hi.d), 1));
    // 32-value sums: 128-bit lanes 0 + 1 (group 2u) and 2 + 3 (group 2u + 1), + 4096 each
    const __m512i s32 = _mm512_add_epi64(s16, _mm512_shuffle_i64x2(s16, s16, _MM_SHUFFLE(2, 3, 0, 1)));
    const int32_t sa = _mm_cvtsi128_si32(_mm512_castsi512_si128(s32)) - 4096;
    const int32_t sb = _mm_cvtsi128_si32(_mm512_extracti32x4_epi32(s32, 2)) - 4096;
    q.dxs[2 * u] = group_dxs(kind, lo, sa);
    q.dxs[2 * u + 1] = group_dxs(kind, hi, sb);
}
}  // namespace

// Columns [c0, c1) of one row (x: their values; ref::quantize_act_q8_cols' contract).
void quantize_act_cols_avx512(ref::ActQuant kind, const float* x, int64_t K, int64_t c0, int64_t c1, void* out) {
    const int64_t full = std::max(c0, c1 < K ? c1 : K / 64 * 64);  // whole units end here
    if (c1 >= K) ref::act_q8_zero_cols(out, K, full, K);  // the partial unit and the row's padding
    const ref::ActQ8Row q = ref::act_q8_row(out, K);
    const auto rest = [&](int64_t i0, const BlockScale& lo, const BlockScale& hi) {  // a partial unit
        for (int64_t g = i0 / 32; g < (K + 31) / 32 && g < i0 / 32 + 2; ++g) group_slow(kind, x + (32 * g - c0), g, K, g % 2 ? hi : lo, q);
    };
    if (kind == ref::kActQ8_K) {
        for (int64_t b0 = c0; b0 < c1; b0 += 256) {
            const BlockScale s = block_scale(kind, x + (b0 - c0), std::min<int64_t>(256, K - b0));
            for (int64_t i0 = b0; i0 < std::min(c1, b0 + 256); i0 += 64) {
                if (i0 < full) unit_fast(kind, x + (i0 - c0), i0, s, s, q);
                else rest(i0, s, s);
            }
        }
        return;
    }
    for (int64_t i0 = c0; i0 < c1; i0 += 64) {
        const BlockScale lo = block_scale(kind, x + (i0 - c0), std::min<int64_t>(32, K - i0));
        const BlockScale hi = i0 + 32 < K ? block_scale(kind, x + (i0 + 32 - c0), std::min<int64_t>(32, K - i0 - 32)) : BlockScale{};
        if (i0 < full) unit_fast(kind, x + (i0 - c0), i0, lo, hi, q);
        else rest(i0, lo, hi);
    }
}

}  // namespace moe::kernels

#pragma GCC diagnostic pop
MOE_TARGET_POP
