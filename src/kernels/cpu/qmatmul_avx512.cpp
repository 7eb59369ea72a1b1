// Int8 weight kernels, AVX-512 + VNNI path (vpdpbusd: unsigned weight levels x signed int8
// activations, 64 products per instruction), and the AVX-512 activation quantizer. The math and
// the determinism argument are in qmatmul.h. Compiled with a target pragma so the portable build
// carries it; used only when the CPU has AVX512F/BW/VL/DQ + VNNI (qmm_avx512_usable()).
//
// Kernel structure: the output block is MR activation rows x NR weight rows (4 x 2, smaller at the
// edges). Per 64-value unit, each weight row's unit is decoded once into a zmm of levels and a zmm
// of per-lane scales and used for all MR rows; per (row, weight row) pair the unit costs one
// vpdpbusd (seeded with -2^shift * sums, the integer offset), one int->f32 convert, one scale
// multiply and one FMA into that output's own 16-lane accumulator. Q4_K/Q5_K add one 8-lane FMA per
// super-block for the min term. The per-output sequence is the same in every block shape.
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm*_undefined_* helpers (GCC bug
// 105593, a false positive); silenced for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quantize_act.h"

namespace moe::kernels {

bool qmm_avx512_usable() {
#if defined(__x86_64__) && defined(__GNUC__)
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") &&
                           __builtin_cpu_supports("f16c");
    return ok;
#else
    return false;
#endif
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2")
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm*_undefined_* helpers (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

inline float h2f(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

inline float hsum512(__m512 v) {
    const __m512 hi = _mm512_shuffle_f32x4(v, v, 0xEE);
    const __m256 a = _mm512_castps512_ps256(_mm512_add_ps(v, hi));
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    const __m128 d = _mm_add_ss(c, _mm_movehdup_ps(c));
    return _mm_cvtss_f32(d);
}

inline float hsum256(__m256 v) {
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    const __m128 d = _mm_add_ss(c, _mm_movehdup_ps(c));
    return _mm_cvtss_f32(d);
}

inline __m512 two_scales(float a, float b) {  // lanes 0..7 = a, 8..15 = b
    return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}

inline __m512i cat256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// ---------------------------------------------------------------- per-type decoders
// begin(): per super-block state (K-quants: 256 values; Q8_0/Q4_0: one 64-value unit = 2 blocks).
// unit(): levels (u8 x 64) and per-lane f32 scales of unit u of the super-block.
struct DQ8_0 {
    static constexpr int kShift = 7, kUnits = 1, kSbElems = 64;
    static constexpr bool kMin = false;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static void unit(const State&, const uint8_t* row, int64_t sb, int, int64_t nblocks, __m512i& q, __m512& ws) {
        const uint8_t* b0 = row + 2 * sb * 34;
        const bool two = 2 * sb + 1 < nblocks;
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 2));
        const __m256i hi = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 36)) : _mm256_setzero_si256();
        q = _mm512_xor_si512(cat256(lo, hi), _mm512_set1_epi8(static_cast<char>(0x80)));
        ws = two_scales(h2f(b0), two ? h2f(b0 + 34) : 0.0f);
    }
};

struct DQ4_0 {
    static constexpr int kShift = 3, kUnits = 1, kSbElems = 64;
    static constexpr bool kMin = false;
    struct State {};
    static void begin(State&, const uint8_t*, int64_t, int64_t) {}
    static void unit(const State&, const uint8_t* row, int64_t sb, int, int64_t nblocks, __m512i& q, __m512& ws) {
        const uint8_t* b0 = row + 2 * sb * 18;
        const bool two = 2 * sb + 1 < nblocks;
        const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + 2));
        const __m128i v1 = two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + 20)) : _mm_setzero_si128();
        const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(v0), v1, 1);
        const __m256i m = _mm256_set1_epi8(0x0F);
        const __m512i x = cat256(_mm256_and_si256(v, m), _mm256_and_si256(_mm256_srli_epi16(v, 4), m));
        q = _mm512_shuffle_i64x2(x, x, 0xD8);  // [b0 lo, b1 lo, b0 hi, b1 hi] -> [b0 lo, b0 hi, b1 lo, b1 hi]
        ws = two_scales(h2f(b0), two ? h2f(b0 + 18) : 0.0f);
    }
};

template <bool Five>
struct DQ45_K {
    static constexpr int kShift = -1, kUnits = 4, kSbElems = 256;
    static constexpr bool kMin = true;
    static constexpr int kBytes = Five ? 176 : 144;
    static constexpr int kQs = Five ? 48 : 16;  // offset of qs in the block
    struct State {
        __m512 ws8;  // lanes 0..7: d * sc_j
        __m256 wm8;  // dmin * m_j
        __m256i qh;
    };
    static void begin(State& s, const uint8_t* row, int64_t sb, int64_t) {
        const uint8_t* b = row + sb * kBytes;
        const float d = h2f(b), dmin = h2f(b + 2);
        alignas(32) float ws[8], wm[8];
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            ref::get_scale_min_k4(j, b + 4, &sc, &m);
            ws[j] = d * static_cast<float>(sc);
            wm[j] = dmin * static_cast<float>(m);
        }
        s.ws8 = _mm512_castps256_ps512(_mm256_load_ps(ws));
        s.wm8 = _mm256_load_ps(wm);
        if constexpr (Five) s.qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
    }
    static void unit(const State& s, const uint8_t* row, int64_t sb, int c, int64_t, __m512i& q, __m512& ws) {
        const uint8_t* b = row + sb * kBytes;
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kQs + 32 * c));
        const __m256i m = _mm256_set1_epi8(0x0F);
        __m256i lo = _mm256_and_si256(v, m), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
        if constexpr (Five) {
            const __m256i sixteen = _mm256_set1_epi8(16);
            lo = _mm256_mask_add_epi8(lo, _mm256_test_epi8_mask(s.qh, _mm256_set1_epi8(static_cast<char>(1 << (2 * c)))),
                                      lo, sixteen);
            hi = _mm256_mask_add_epi8(
                hi, _mm256_test_epi8_mask(s.qh, _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1)))), hi, sixteen);
        }
        q = cat256(lo, hi);
        const __m512i idx = _mm512_set_epi32(2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1,
                                             2 * c + 1, 2 * c + 1, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c);
        ws = _mm512_permutexvar_ps(idx, s.ws8);
    }
};

struct DQ6_K {
    static constexpr int kShift = 5, kUnits = 4, kSbElems = 256;
    static constexpr bool kMin = false;
    struct State {
        float d;
    };
    static void begin(State& s, const uint8_t* row, int64_t sb, int64_t) { s.d = h2f(row + sb * 210 + 208); }
    static void unit(const State& s, const uint8_t* row, int64_t sb, int c, int64_t, __m512i& q, __m512& ws) {
        const uint8_t* b = row + sb * 210;
        const int half = c / 2, pos = c % 2;
        const __m512i ql = _mm512_loadu_si512(b + 64 * half);
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * half));
        const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
        __m512i lv, hb;
        if (pos == 0) {
            lv = _mm512_and_si512(ql, m4);
            hb = cat256(qh, _mm256_srli_epi16(qh, 2));
        } else {
            lv = _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4);
            hb = cat256(_mm256_srli_epi16(qh, 4), _mm256_srli_epi16(qh, 6));
        }
        q = _mm512_or_si512(lv, _mm512_slli_epi16(_mm512_and_si512(hb, m2), 4));
        int32_t s4;
        std::memcpy(&s4, b + 192 + 4 * c, 4);
        const __m128 sc = _mm_mul_ps(_mm_cvtepi32_ps(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(s4))), _mm_set1_ps(s.d));
        const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
        ws = _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(sc));
    }
};

// ---------------------------------------------------------------- engine
struct Ctx {
    const MatmulArgs* a;
    const unsigned char* act;
    size_t act_stride;
    int64_t nblocks;  // weight blocks per row (Q8_0/Q4_0: of 32; K-quants: of 256)
    int64_t nsb;      // super-blocks per row
};

template <class D, int MR, int NR>
void block(const Ctx& c, int64_t r0, int64_t n) {
    const MatmulArgs& a = *c.a;
    const uint8_t* w[NR];
    ref::ActQ8Row x[MR];
    for (int j = 0; j < NR; ++j) w[j] = static_cast<const uint8_t*>(a.w) + (n + j) * static_cast<int64_t>(a.w_row_stride);
    for (int i = 0; i < MR; ++i)
        x[i] = ref::act_q8_row(const_cast<unsigned char*>(c.act + (r0 + i) * c.act_stride), a.K);
    __m512 acc[MR][NR];
    __m256 macc[MR][NR];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) {
            acc[i][j] = _mm512_setzero_ps();
            macc[i][j] = _mm256_setzero_ps();
        }
    for (int64_t sb = 0; sb < c.nsb; ++sb) {
        typename D::State st[NR];
        for (int j = 0; j < NR; ++j) D::begin(st[j], w[j], sb, c.nblocks);
        if constexpr (D::kMin) {
            for (int i = 0; i < MR; ++i) {
                const __m256 dxs = _mm256_loadu_ps(x[i].dxs + 8 * sb);
                for (int j = 0; j < NR; ++j) macc[i][j] = _mm256_fmadd_ps(st[j].wm8, dxs, macc[i][j]);
            }
        }
        for (int u = 0; u < D::kUnits; ++u) {
            const int64_t U = sb * D::kUnits + u;
            __m512i q[NR];
            __m512 ws[NR];
            for (int j = 0; j < NR; ++j) D::unit(st[j], w[j], sb, u, c.nblocks, q[j], ws[j]);
            for (int i = 0; i < MR; ++i) {
                const __m512i xq = _mm512_loadu_si512(x[i].qs + 64 * U);
                const __m512 dx = _mm512_loadu_ps(x[i].dxv + 16 * U);
                __m512i init = _mm512_setzero_si512();
                if constexpr (D::kShift >= 0) init = _mm512_slli_epi32(_mm512_loadu_si512(x[i].nsum + 16 * U), D::kShift);
                for (int j = 0; j < NR; ++j) {
                    const __m512i dp = _mm512_dpbusd_epi32(init, q[j], xq);
                    acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), _mm512_mul_ps(ws[j], dx), acc[i][j]);
                }
            }
        }
    }
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) {
            float s = hsum512(acc[i][j]);
            if constexpr (D::kMin) s -= hsum256(macc[i][j]);
            a.y[(r0 + i) * a.ldy + (n + j - a.n0)] = s;
        }
}

using BlockFn = void (*)(const Ctx&, int64_t, int64_t);
constexpr int kMR = 4, kNR = 2;

template <class D>
void qmm512(const MatmulArgs& a) {
    static constexpr BlockFn tab[kMR][kNR] = {
        {block<D, 1, 1>, block<D, 1, 2>},
        {block<D, 2, 1>, block<D, 2, 2>},
        {block<D, 3, 1>, block<D, 3, 2>},
        {block<D, 4, 1>, block<D, 4, 2>},
    };
    Ctx c;
    c.a = &a;
    c.act = qmm_activations(a, Isa::Avx512, &c.act_stride);
    c.nblocks = D::kSbElems == 256 ? a.K / 256 : a.K / 32;
    c.nsb = D::kSbElems == 256 ? a.K / 256 : (a.K / 32 + 1) / 2;
    for (int64_t n = a.n0; n < a.n1;) {
        const int nr = static_cast<int>(a.n1 - n >= kNR ? kNR : a.n1 - n);
        for (int64_t r = 0; r < a.m;) {
            const int mr = static_cast<int>(a.m - r >= kMR ? kMR : a.m - r);
            tab[mr - 1][nr - 1](c, r, n);
            r += mr;
        }
        n += nr;
    }
}

}  // namespace

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
    switch (t) {
        case DType::Q8_0: return qmm512<DQ8_0>;
        case DType::Q4_0: return qmm512<DQ4_0>;
        case DType::Q4_K: return qmm512<DQ45_K<false>>;
        case DType::Q5_K: return qmm512<DQ45_K<true>>;
        case DType::Q6_K: return qmm512<DQ6_K>;
        default: return nullptr;
    }
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

}  // namespace moe::kernels
