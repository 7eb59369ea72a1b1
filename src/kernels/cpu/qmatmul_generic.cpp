// Int8 weight kernels: scalar and AVX2 paths, the kernel registry and activation quantization
// dispatch (the AVX-512 VNNI path is qmatmul_avx512.cpp). The math is in qmatmul.h.
//
// Both paths here decode one weight row at a time (qmatmul_decode.h, scalar) into a per-thread
// buffer and reuse it for all m activation rows, and compute the same per-output chain as the
// AVX-512 path (bit-identical results). The AVX2 path is the fallback for CPUs without AVX-512
// VNNI; only its integer sums are vectorised.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_decode.h"
#include "kernels/ref/quantize_act.h"

namespace moe::kernels {

void quantize_act_cols_avx512(ref::ActQuant kind, const float* x, int64_t K, int64_t c0, int64_t c1, void* out);
void quantize_act_cols_avx2(ref::ActQuant kind, const float* x, int64_t K, int64_t c0, int64_t c1, void* out);
bool qmm_avx512_usable();
MatmulFn qmm_avx512_kernel(DType t);

namespace {

// Per-thread growable scratch (grows to the largest call, then the hot path does not allocate).
struct Scratch {
    std::vector<unsigned char> act, wrow;
    std::vector<qdec::SbScales> sbs;  // Q2_K / Q3_K: the integer scales of the decoded row
    static void* get(std::vector<unsigned char>& v, size_t bytes) {
        if (v.size() < bytes + 64) v.resize(bytes + 64);
        const auto p = reinterpret_cast<uintptr_t>(v.data());
        return reinterpret_cast<void*>((p + 63) & ~uintptr_t{63});
    }
};
thread_local Scratch tls;

struct ActRows {
    const unsigned char* base;
    size_t stride;
};

ActRows activations(const MatmulArgs& a, Isa isa, ref::ActQuant kind) {
    if (a.xq) return {static_cast<const unsigned char*>(a.xq), a.xq_stride};
    const size_t stride = ref::act_q8_row_bytes(a.K);
    void* buf = Scratch::get(tls.act, stride * static_cast<size_t>(a.m));
    quantize_act_rows(isa, kind, a.x, a.ldx, a.m, a.K, buf, stride);
    return {static_cast<const unsigned char*>(buf), stride};
}

struct DecodedRow {
    uint8_t* q;
    float* ws;
    float* wm;
};

DecodedRow decoded_row_buffer(int64_t K) {
    const size_t Kp = static_cast<size_t>(ref::act_q8_padded(K));
    auto* p = static_cast<unsigned char*>(Scratch::get(tls.wrow, Kp + Kp / 16 * 4 + Kp / 16 * 4 + 128));
    DecodedRow d;
    d.q = p;
    d.ws = reinterpret_cast<float*>(p + Kp);
    d.wm = reinterpret_cast<float*>(p + Kp + Kp / 16 * 4 + 64);
    return d;
}

inline const void* wrow(const MatmulArgs& a, int64_t n) {
    return static_cast<const char*>(a.w) + n * static_cast<int64_t>(a.w_row_stride);
}

using qdec::granule;

// The K-quants (Traits::sbint): the integer scales of every super-block of one weight row, read
// once per row (not per activation row); nullptr for the other types.
template <DType T>
const qdec::SbScales* row_sb_scales(const void* row, int64_t K) {
    if constexpr (!qdec::traits(T).sbint) {
        return nullptr;
    } else {
        const int64_t nsb = K / 256;
        if (static_cast<int64_t>(tls.sbs.size()) < nsb) tls.sbs.resize(static_cast<size_t>(nsb));
        for (int64_t b = 0; b < nsb; ++b) tls.sbs[b] = qdec::sb_scales(T, static_cast<const uint8_t*>(row), b);
        return tls.sbs.data();
    }
}

// The canonical per-output chain shared by every path (qmatmul.h): for granule g in K order,
// acc = fma(float(I_g), ws_g * dx_g, acc), then for Q4_1/Q5_1 acc = fma(-wm_g, dxs_g, acc).
// I_g (exact integer) comes from `isum`, which the paths compute differently.
// The K-quants Q2_K..Q6_K (Traits::sbint): the super-block integer chain of qmatmul.h instead, per
// 256 values S = sum_j sc_j I_j, M = sum_j m_j nsum_j exactly in int32 (j over the 16 or 8
// granules), then acc = fma(float(S), d * dx, acc) and, for the types with mins (Q2_K per 16
// values, Q4_K / Q5_K per 32), acc = fma(float(M), dmin * dx, acc); sbs: the row's super-block
// scales (sb_scales).
template <DType T, typename ISum>
inline float chain(const DecodedRow& w, const ref::ActQ8Row& x, int64_t K, const qdec::SbScales* sbs, ISum&& isum) {
    constexpr int G = granule(T);
    constexpr qdec::Traits tr = qdec::traits(T);
    const int32_t off = tr.shift >= 0 ? (1 << tr.shift) : 0;
    if constexpr (tr.sbint) {
        static_assert(G == 16 || (G == 32 && !tr.min16), "super-block chain: 16 granules of 16 or 8 of 32");
        float acc = 0.0f;
        for (int64_t b = 0; b < K / 256; ++b) {
            const qdec::SbScales& s = sbs[b];
            int32_t S = 0, M = 0;
            for (int j = 0; j < 256 / G; ++j) {
                const int64_t k0 = 256 * b + G * j, i16 = k0 / 16;
                int32_t ns = x.nsum[4 * i16];
                if (G == 32) ns += x.nsum[4 * i16 + 4];
                S += s.sc[j] * (isum(k0) + off * ns);
                M += s.m[j] * ns;
            }
            const float dx = x.dxv[64 * b];
            acc = std::fma(static_cast<float>(S), s.d * dx, acc);
            if constexpr (tr.min16 || tr.min) acc = std::fma(static_cast<float>(M), s.dmin * dx, acc);
        }
        return acc;
    } else {
        static_assert(!tr.min16, "per-16 min only in the super-block chain");
        float acc = 0.0f;
        for (int64_t g = 0; g < K / G; ++g) {  // every other type: the per-granule chain
            const int64_t k0 = g * G, i16 = k0 / 16;
            int32_t ns = x.nsum[4 * i16];
            if (G == 32) ns += x.nsum[4 * i16 + 4];
            const int32_t I = isum(k0) + off * ns;
            acc = std::fma(static_cast<float>(I), w.ws[i16] * x.dxv[4 * i16], acc);
            if constexpr (tr.min) acc = std::fma(-w.wm[g], x.dxs[g], acc);
        }
        return acc;
    }
}

// ---------------------------------------------------------------- scalar
template <DType T>
void qmm_scalar(const MatmulArgs& a) {
    constexpr int G = granule(T);
    const ActRows act = activations(a, Isa::Scalar, act_quant(T));
    const DecodedRow w = decoded_row_buffer(a.K);
    for (int64_t n = a.n0; n < a.n1; ++n) {
        qdec::decode_row(T, wrow(a, n), a.K, w.q, w.ws, w.wm);
        const qdec::SbScales* sbs = row_sb_scales<T>(wrow(a, n), a.K);
        for (int64_t r = 0; r < a.m; ++r) {
            const ref::ActQ8Row x = ref::act_q8_row(const_cast<unsigned char*>(act.base + r * act.stride), a.K);
            a.y[r * a.ldy + (n - a.n0)] = chain<T>(w, x, a.K, sbs, [&](int64_t k0) {
                int32_t s = 0;
                for (int l = 0; l < G; ++l) s += static_cast<int32_t>(w.q[k0 + l]) * x.qs[k0 + l];
                return s;
            });
        }
    }
}

// ---------------------------------------------------------------- AVX2
// Integer sums with vpmaddwd (levels widened to int16; no vpmaddubsw, whose int16 saturation would
// break exactness for Q8_0's 0..255 levels), then the same chain as the scalar path.
#define MOE_T256 __attribute__((target("avx2,fma")))

MOE_T256 inline int32_t isum16_avx2(const uint8_t* q, const int8_t* x) {
    const __m256i qv = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
    const __m256i xv = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
    const __m256i p = _mm256_madd_epi16(qv, xv);
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

template <DType T>
MOE_T256 void qmm_avx2(const MatmulArgs& a) {
    constexpr int G = granule(T);
    const ActRows act = activations(a, Isa::Avx2, act_quant(T));
    const DecodedRow w = decoded_row_buffer(a.K);
    for (int64_t n = a.n0; n < a.n1; ++n) {
        qdec::decode_row(T, wrow(a, n), a.K, w.q, w.ws, w.wm);
        const qdec::SbScales* sbs = row_sb_scales<T>(wrow(a, n), a.K);
        for (int64_t r = 0; r < a.m; ++r) {
            const ref::ActQ8Row x = ref::act_q8_row(const_cast<unsigned char*>(act.base + r * act.stride), a.K);
            a.y[r * a.ldy + (n - a.n0)] = chain<T>(w, x, a.K, sbs, [&](int64_t k0) {
                int32_t s = isum16_avx2(w.q + k0, x.qs + k0);
                if (G == 32) s += isum16_avx2(w.q + k0 + 16, x.qs + k0 + 16);
                return s;
            });
        }
    }
}

}  // namespace

const unsigned char* qmm_activations(const MatmulArgs& a, Isa isa, ref::ActQuant kind, size_t* stride) {
    const ActRows r = activations(a, isa, kind);
    *stride = r.stride;
    return r.base;
}

void quantize_act_rows(Isa isa, ref::ActQuant kind, const float* x, int64_t ldx, int64_t m, int64_t K, void* out,
                       size_t stride) {
    MOE_ASSERT(stride >= ref::act_q8_row_bytes(K), "ActQ8 stride ", stride, " < ", ref::act_q8_row_bytes(K));
    for (int64_t r = 0; r < m; ++r) quantize_act_cols(isa, kind, x + r * ldx, K, 0, K, static_cast<char*>(out) + r * stride);
}

void quantize_act_cols(Isa isa, ref::ActQuant kind, const float* x, int64_t K, int64_t c0, int64_t c1, void* out) {
    MOE_ASSERT(kind != ref::kActNone, "quantize_act_cols without an activation quantization");
    MOE_ASSERT(ref::act_q8_cols_ok(kind, K, c0, c1), "ActQ8 columns [", c0, ", ", c1, ") of a row of ", K,
               " do not start and end on its blocks");
    if (isa == Isa::Avx512 && qmm_avx512_usable()) return quantize_act_cols_avx512(kind, x, K, c0, c1, out);
    if (isa != Isa::Scalar) return quantize_act_cols_avx2(kind, x, K, c0, c1, out);
    ref::quantize_act_q8_cols(x, K, c0, c1, out, kind);
}

bool qmm_supported(DType t) {
    for (DType k : kQmmTypes)
        if (k == t) return true;
    return false;
}

bool qmm_has_avx512(DType t) { return qmm_avx512_usable() && qmm_avx512_kernel(t) != nullptr; }

MatmulFn qmm_kernel(DType t, Isa isa) {
    if (!qmm_supported(t)) return nullptr;
    // AVX-512 path needs VNNI + BW; on an AVX-512F-only CPU, and for the types without an AVX-512
    // kernel, the AVX2 int path runs instead (same bits: qmatmul.h).
    if (isa == Isa::Avx512 && qmm_has_avx512(t)) return qmm_avx512_kernel(t);
    const bool avx2 = isa != Isa::Scalar;
    if (avx2)
        if (MatmulFn f = qmm_avx2_blocks_kernel(t)) return f;
    switch (t) {
#define MOE_QMM_CASE(T) \
    case DType::T: return avx2 ? qmm_avx2<DType::T> : qmm_scalar<DType::T>;
        MOE_QMM_CASE(Q8_0) MOE_QMM_CASE(Q4_0) MOE_QMM_CASE(Q4_1) MOE_QMM_CASE(Q5_0) MOE_QMM_CASE(Q5_1)
        MOE_QMM_CASE(Q2_K) MOE_QMM_CASE(Q3_K) MOE_QMM_CASE(Q4_K) MOE_QMM_CASE(Q5_K) MOE_QMM_CASE(Q6_K)
        MOE_QMM_CASE(IQ4_NL) MOE_QMM_CASE(IQ4_XS) MOE_QMM_CASE(IQ3_S) MOE_QMM_CASE(IQ3_XXS) MOE_QMM_CASE(IQ2_S)
        MOE_QMM_CASE(IQ2_XS) MOE_QMM_CASE(IQ2_XXS) MOE_QMM_CASE(IQ1_M) MOE_QMM_CASE(IQ1_S) MOE_QMM_CASE(TQ1_0)
        MOE_QMM_CASE(TQ2_0) MOE_QMM_CASE(MXFP4)
#undef MOE_QMM_CASE
        default: return nullptr;
    }
}

}  // namespace moe::kernels
