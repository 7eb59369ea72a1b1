// f32 matmul kernels for AVX2+FMA and AVX-512F: the shared FMA tile (fma_tile.h) with plain f32
// weight loads. Compiled in target regions, so the portable build carries them too (selected at
// run time by CpuKernels).
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
#include "kernels/cpu/fma_tile.h"
#include "kernels/cpu/isa_target.h"

namespace moe::kernels {
namespace {

MOE_TARGET_PUSH("avx512f,avx2,fma")
struct LoadF32x16 {
    using T = float;
    static __m512 full(const float* p) { return _mm512_loadu_ps(p); }
    static __m512 tail(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
};
#include "kernels/cpu/fma_tile_avx512.inc"
MOE_TARGET_POP

MOE_TARGET_PUSH("avx2,fma")
struct LoadF32x8 {
    using T = float;
    static __m256 full(const float* p) { return _mm256_loadu_ps(p); }
    static __m256 tail(__m256i m, const float* p, int64_t) { return _mm256_maskload_ps(p, m); }
};
#include "kernels/cpu/fma_tile_avx2.inc"
MOE_TARGET_POP

}  // namespace

void matmul_f32_avx512(const MatmulArgs& a) { drive512<LoadF32x16>(a); }
void matmul_f32_avx2(const MatmulArgs& a) { drive256<LoadF32x8>(a); }

}  // namespace moe::kernels
