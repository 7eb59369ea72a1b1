// f32 matmul kernels for AVX2+FMA and AVX-512F. Compiled with per-function target attributes, so
// the portable build carries them too (selected at run time by CpuKernels).
//
// Determinism: every output y[r][n] owns one vector accumulator that sees the same sequence of
// FMAs (full vectors over K, then one masked tail vector) and the same horizontal reduction,
// whatever the MR x NR block it is computed in. So a dot product's bits depend only on K and on
// the ISA, not on the batch size, the tile shape or the thread (see cpu_kernels.h).
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm*_undefined_* helpers (GCC bug
// 105593, a false positive); silence it for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/cpu_kernels.h"

namespace moe::kernels {
namespace {

inline const float* wrow(const MatmulArgs& a, int64_t n) {
    return reinterpret_cast<const float*>(static_cast<const char*>(a.w) + n * a.w_row_stride);
}

// ---------------------------------------------------------------- AVX-512
#define MOE_T512 __attribute__((target("avx512f,avx2,fma")))

MOE_T512 inline float hsum512(__m512 v) {
    // fixed order: 512 -> 256 -> 128 -> 64 -> 32
    const __m512 hi = _mm512_shuffle_f32x4(v, v, 0xEE);  // lanes 8..15 -> 0..7
    const __m256 a = _mm512_castps512_ps256(_mm512_add_ps(v, hi));
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    const __m128 d = _mm_add_ss(c, _mm_movehdup_ps(c));
    return _mm_cvtss_f32(d);
}

template <int MR, int NR>
MOE_T512 void block512(const MatmulArgs& a, int64_t r0, int64_t n) {
    const float* x[MR];
    const float* w[NR];
    for (int i = 0; i < MR; ++i) x[i] = a.x + (r0 + i) * a.ldx;
    for (int j = 0; j < NR; ++j) w[j] = wrow(a, n + j);
    __m512 acc[MR][NR];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
    const int64_t K = a.K;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 wv[NR];
        for (int j = 0; j < NR; ++j) wv[j] = _mm512_loadu_ps(w[j] + k);
        for (int i = 0; i < MR; ++i) {
            const __m512 xv = _mm512_loadu_ps(x[i] + k);
            for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    if (k < K) {
        const __mmask16 m = static_cast<__mmask16>((1u << (K - k)) - 1u);
        __m512 wv[NR];
        for (int j = 0; j < NR; ++j) wv[j] = _mm512_maskz_loadu_ps(m, w[j] + k);
        for (int i = 0; i < MR; ++i) {
            const __m512 xv = _mm512_maskz_loadu_ps(m, x[i] + k);
            for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) a.y[(r0 + i) * a.ldy + (n + j - a.n0)] = hsum512(acc[i][j]);
}

// ---------------------------------------------------------------- AVX2
#define MOE_T256 __attribute__((target("avx2,fma")))

MOE_T256 inline float hsum256(__m256 v) {
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    const __m128 d = _mm_add_ss(c, _mm_movehdup_ps(c));
    return _mm_cvtss_f32(d);
}

MOE_T256 inline __m256i tail_mask256(int64_t n) {  // lanes [0, n) set, 0 < n < 8
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
}

template <int MR, int NR>
MOE_T256 void block256(const MatmulArgs& a, int64_t r0, int64_t n) {
    const float* x[MR];
    const float* w[NR];
    for (int i = 0; i < MR; ++i) x[i] = a.x + (r0 + i) * a.ldx;
    for (int j = 0; j < NR; ++j) w[j] = wrow(a, n + j);
    __m256 acc[MR][NR];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
    const int64_t K = a.K;
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 wv[NR];
        for (int j = 0; j < NR; ++j) wv[j] = _mm256_loadu_ps(w[j] + k);
        for (int i = 0; i < MR; ++i) {
            const __m256 xv = _mm256_loadu_ps(x[i] + k);
            for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    if (k < K) {
        const __m256i m = tail_mask256(K - k);
        __m256 wv[NR];
        for (int j = 0; j < NR; ++j) wv[j] = _mm256_maskload_ps(w[j] + k, m);
        for (int i = 0; i < MR; ++i) {
            const __m256 xv = _mm256_maskload_ps(x[i] + k, m);
            for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) a.y[(r0 + i) * a.ldy + (n + j - a.n0)] = hsum256(acc[i][j]);
}

// ---------------------------------------------------------------- blocking driver
// Rows in blocks of MR, weight rows in blocks of NR; tails use smaller instantiations (same
// per-output operation sequence, see above). Loop order: weight-row block outer so a block of
// weight rows is reused across every activation row while it is hot in cache.
using BlockFn = void (*)(const MatmulArgs&, int64_t, int64_t);

template <template <int, int> class Tab, int MR, int NR>
void drive(const MatmulArgs& a) {
    for (int64_t n = a.n0; n < a.n1;) {
        const int nr = static_cast<int>(a.n1 - n >= NR ? NR : a.n1 - n);
        for (int64_t r = 0; r < a.m;) {
            const int mr = static_cast<int>(a.m - r >= MR ? MR : a.m - r);
            Tab<MR, NR>::get(mr, nr)(a, r, n);
            r += mr;
        }
        n += nr;
    }
}

template <int MR, int NR>
struct Tab512 {
    static BlockFn get(int mr, int nr) {
        static constexpr BlockFn t[4][4] = {
            {block512<1, 1>, block512<1, 2>, block512<1, 3>, block512<1, 4>},
            {block512<2, 1>, block512<2, 2>, block512<2, 3>, block512<2, 4>},
            {block512<3, 1>, block512<3, 2>, block512<3, 3>, block512<3, 4>},
            {block512<4, 1>, block512<4, 2>, block512<4, 3>, block512<4, 4>},
        };
        return t[mr - 1][nr - 1];
    }
};

template <int MR, int NR>
struct Tab256 {
    static BlockFn get(int mr, int nr) {
        static constexpr BlockFn t[2][4] = {
            {block256<1, 1>, block256<1, 2>, block256<1, 3>, block256<1, 4>},
            {block256<2, 1>, block256<2, 2>, block256<2, 3>, block256<2, 4>},
        };
        return t[mr - 1][nr - 1];
    }
};

}  // namespace

void matmul_f32_avx512(const MatmulArgs& a) { drive<Tab512, 4, 4>(a); }
void matmul_f32_avx2(const MatmulArgs& a) { drive<Tab256, 2, 4>(a); }

}  // namespace moe::kernels
