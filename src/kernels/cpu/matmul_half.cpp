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
#include "kernels/cpu/fma_tile.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/isa_target.h"

namespace moe::kernels {
namespace {

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
        const uint16_t* w = fma_tile::wrow<uint16_t>(a, n);
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

// ---------------------------------------------------------------- AVX-512 / AVX2
// The shared FMA tile (fma_tile.h) with weights converted exactly to f32 as they are loaded.
MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,fma,f16c,avx2")
template <DType D>
inline __m512 cvt16(__m256i h) {
    if constexpr (D == DType::F16) return _mm512_cvtph_ps(h);
    else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
template <DType D>
struct LoadHalfx16 {
    using T = uint16_t;
    static __m512 full(const uint16_t* p) { return cvt16<D>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
    static __m512 tail(__mmask16 m, const uint16_t* p) { return cvt16<D>(_mm256_maskz_loadu_epi16(m, p)); }
};
#include "kernels/cpu/fma_tile_avx512.inc"
MOE_TARGET_POP

MOE_TARGET_PUSH("avx2,fma,f16c")
template <DType D>
inline __m256 cvt8(__m128i h) {
    if constexpr (D == DType::F16) return _mm256_cvtph_ps(h);
    else return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
template <DType D>
struct LoadHalfx8 {
    using T = uint16_t;
    static __m256 full(const uint16_t* p) { return cvt8<D>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
    static __m256 tail(__m256i, const uint16_t* p, int64_t count) {  // AVX2 has no 16-bit masked load
        uint16_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        std::memcpy(t, p, static_cast<size_t>(count) * 2);
        return cvt8<D>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
    }
};
#include "kernels/cpu/fma_tile_avx2.inc"
MOE_TARGET_POP

template <DType T>
void half_avx512(const MatmulArgs& a) { drive512<LoadHalfx16<T>>(a); }
template <DType T>
void half_avx2(const MatmulArgs& a) { drive256<LoadHalfx8<T>>(a); }

bool avx512_half_usable() {
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && cpu_has_f16c();
    return ok;
}

}  // namespace

MatmulFn half_kernel(DType t, Isa isa) {
    if (t != DType::F16 && t != DType::BF16) return nullptr;
    const bool f16 = t == DType::F16;
    if (isa == Isa::Avx512 && avx512_half_usable()) return f16 ? half_avx512<DType::F16> : half_avx512<DType::BF16>;
    if (isa != Isa::Scalar && cpu_has_f16c()) return f16 ? half_avx2<DType::F16> : half_avx2<DType::BF16>;
    return f16 ? half_scalar<DType::F16> : half_scalar<DType::BF16>;
}

}  // namespace moe::kernels
