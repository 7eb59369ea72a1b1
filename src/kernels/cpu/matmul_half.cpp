// F16 and BF16 weight kernels (f32 activations). Each weight value is converted exactly to f32
// (vcvtph2ps / a 16-bit shift) and the dot product is the f32 one of matmul_f32.cpp: per output one
// vector accumulator, full vectors over K then one masked tail vector, fixed horizontal sum. So the
// result is bit-identical to matmul_f32_{avx512,avx2} run on the converted weights, and the scalar
// path to matmul_f32_ref on them (plain sequential f32 sum). Half the weight bytes of f32.
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm*_undefined_* helpers (GCC bug
// 105593, a false positive); silenced for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernels/cpu/qmatmul.h"

namespace moe::kernels {
namespace {

inline const uint16_t* hrow(const MatmulArgs& a, int64_t n) {
    return reinterpret_cast<const uint16_t*>(static_cast<const char*>(a.w) + n * static_cast<int64_t>(a.w_row_stride));
}

template <DType T>
inline float h2f_scalar(uint16_t h) {
    if constexpr (T == DType::F16) return fp16_to_fp32(h);
    else return bf16_to_fp32(h);
}

// ---------------------------------------------------------------- scalar
// Converts each weight row into a per-thread f32 buffer and runs matmul_f32_ref on it, so the
// scalar path is matmul_f32_ref on the converted weights by construction (whatever FMA
// contraction the compiler chose there).
template <DType T>
void half_scalar(const MatmulArgs& a) {
    thread_local std::vector<float> buf;
    if (buf.size() < static_cast<size_t>(a.K)) buf.resize(static_cast<size_t>(a.K));
    for (int64_t n = a.n0; n < a.n1; ++n) {
        const uint16_t* w = hrow(a, n);
        for (int64_t i = 0; i < a.K; ++i) buf[static_cast<size_t>(i)] = h2f_scalar<T>(w[i]);
        MatmulArgs b = a;
        b.w = buf.data();
        b.w_row_stride = 0;
        b.n0 = n;
        b.n1 = n + 1;
        b.y = a.y + (n - a.n0);
        matmul_f32_ref(b);
    }
}

// ---------------------------------------------------------------- AVX-512
#define MOE_H512 __attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c,avx2")))

MOE_H512 inline float hsum512(__m512 v) {
    const __m512 hi = _mm512_shuffle_f32x4(v, v, 0xEE);
    const __m256 a = _mm512_castps512_ps256(_mm512_add_ps(v, hi));
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    const __m128 d = _mm_add_ss(c, _mm_movehdup_ps(c));
    return _mm_cvtss_f32(d);
}

template <DType T>
MOE_H512 inline __m512 cvt16(__m256i h) {
    if constexpr (T == DType::F16) return _mm512_cvtph_ps(h);
    else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

template <DType T, int MR, int NR>
MOE_H512 void hblock512(const MatmulArgs& a, int64_t r0, int64_t n) {
    const float* x[MR];
    const uint16_t* w[NR];
    for (int i = 0; i < MR; ++i) x[i] = a.x + (r0 + i) * a.ldx;
    for (int j = 0; j < NR; ++j) w[j] = hrow(a, n + j);
    __m512 acc[MR][NR];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
    const int64_t K = a.K;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 wv[NR];
        for (int j = 0; j < NR; ++j) wv[j] = cvt16<T>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[j] + k)));
        for (int i = 0; i < MR; ++i) {
            const __m512 xv = _mm512_loadu_ps(x[i] + k);
            for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    if (k < K) {
        const __mmask16 m = static_cast<__mmask16>((1u << (K - k)) - 1u);
        __m512 wv[NR];
        for (int j = 0; j < NR; ++j) wv[j] = cvt16<T>(_mm256_maskz_loadu_epi16(m, w[j] + k));
        for (int i = 0; i < MR; ++i) {
            const __m512 xv = _mm512_maskz_loadu_ps(m, x[i] + k);
            for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) a.y[(r0 + i) * a.ldy + (n + j - a.n0)] = hsum512(acc[i][j]);
}

// ---------------------------------------------------------------- AVX2
#define MOE_H256 __attribute__((target("avx2,fma,f16c")))

MOE_H256 inline float hsum256(__m256 v) {
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    const __m128 d = _mm_add_ss(c, _mm_movehdup_ps(c));
    return _mm_cvtss_f32(d);
}

template <DType T>
MOE_H256 inline __m256 cvt8(__m128i h) {
    if constexpr (T == DType::F16) return _mm256_cvtph_ps(h);
    else return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

MOE_H256 inline __m256i tail_mask256(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <DType T, int MR, int NR>
MOE_H256 void hblock256(const MatmulArgs& a, int64_t r0, int64_t n) {
    const float* x[MR];
    const uint16_t* w[NR];
    for (int i = 0; i < MR; ++i) x[i] = a.x + (r0 + i) * a.ldx;
    for (int j = 0; j < NR; ++j) w[j] = hrow(a, n + j);
    __m256 acc[MR][NR];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
    const int64_t K = a.K;
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 wv[NR];
        for (int j = 0; j < NR; ++j) wv[j] = cvt8<T>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[j] + k)));
        for (int i = 0; i < MR; ++i) {
            const __m256 xv = _mm256_loadu_ps(x[i] + k);
            for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    if (k < K) {
        const __m256i m = tail_mask256(K - k);
        __m256 wv[NR];
        for (int j = 0; j < NR; ++j) {
            uint16_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            std::memcpy(t, w[j] + k, static_cast<size_t>(K - k) * 2);
            wv[j] = cvt8<T>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
        }
        for (int i = 0; i < MR; ++i) {
            const __m256 xv = _mm256_maskload_ps(x[i] + k, m);
            for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) a.y[(r0 + i) * a.ldy + (n + j - a.n0)] = hsum256(acc[i][j]);
}

// ---------------------------------------------------------------- drivers
using BlockFn = void (*)(const MatmulArgs&, int64_t, int64_t);

template <int MR, int NR>
void drive(const MatmulArgs& a, const BlockFn (&tab)[MR][NR]) {
    for (int64_t n = a.n0; n < a.n1;) {
        const int nr = static_cast<int>(a.n1 - n >= NR ? NR : a.n1 - n);
        for (int64_t r = 0; r < a.m;) {
            const int mr = static_cast<int>(a.m - r >= MR ? MR : a.m - r);
            tab[mr - 1][nr - 1](a, r, n);
            r += mr;
        }
        n += nr;
    }
}

template <DType T>
void half_avx512(const MatmulArgs& a) {
    static constexpr BlockFn tab[4][4] = {
        {hblock512<T, 1, 1>, hblock512<T, 1, 2>, hblock512<T, 1, 3>, hblock512<T, 1, 4>},
        {hblock512<T, 2, 1>, hblock512<T, 2, 2>, hblock512<T, 2, 3>, hblock512<T, 2, 4>},
        {hblock512<T, 3, 1>, hblock512<T, 3, 2>, hblock512<T, 3, 3>, hblock512<T, 3, 4>},
        {hblock512<T, 4, 1>, hblock512<T, 4, 2>, hblock512<T, 4, 3>, hblock512<T, 4, 4>},
    };
    drive(a, tab);
}

template <DType T>
void half_avx2(const MatmulArgs& a) {
    static constexpr BlockFn tab[2][4] = {
        {hblock256<T, 1, 1>, hblock256<T, 1, 2>, hblock256<T, 1, 3>, hblock256<T, 1, 4>},
        {hblock256<T, 2, 1>, hblock256<T, 2, 2>, hblock256<T, 2, 3>, hblock256<T, 2, 4>},
    };
    drive(a, tab);
}

bool avx512_half_usable() {
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c");
    return ok;
}

}  // namespace

MatmulFn half_kernel(DType t, Isa isa) {
    if (t != DType::F16 && t != DType::BF16) return nullptr;
    const bool f16 = t == DType::F16;
    if (isa == Isa::Avx512 && avx512_half_usable()) return f16 ? half_avx512<DType::F16> : half_avx512<DType::BF16>;
    if (isa != Isa::Scalar && __builtin_cpu_supports("f16c")) return f16 ? half_avx2<DType::F16> : half_avx2<DType::BF16>;
    return f16 ? half_scalar<DType::F16> : half_scalar<DType::BF16>;
}

}  // namespace moe::kernels
