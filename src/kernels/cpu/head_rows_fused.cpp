#include "kernels/cpu/head_rows_fused.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kernels/cpu/dense_isa.h"

namespace moe::cpu::head_fused {

bool supported(DType type, int64_t K, kernels::Isa isa) {
    if (!MOE_DENSE_HAS_AVX512 || !dense_use_avx512(isa) || K <= 0) return false;
    switch (type) {
        case DType::Q8_0: return K % 32 == 0;  // whole 32-value blocks: the kernels step one block at a time
        case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: return K % 256 == 0;
        default: return false;
    }
}

#if MOE_DENSE_HAS_AVX512
MOE_DENSE_AVX512_BEGIN
namespace {

// The rows come from memory (kv_b is read once per layer and token) in short per-head runs the
// hardware prefetchers barely start on: each kernel asks for the rows kAhead rows ahead.
constexpr int64_t kAhead = 8;
inline void prefetch_row(const uint8_t* p, size_t bytes) {
    for (size_t i = 0; i < bytes; i += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p + bytes - 1), _MM_HINT_T0);
}

// Lane j of v in all lanes.
inline __m512 lane(__m512 v, int j) { return _mm512_permutexvar_ps(_mm512_set1_epi32(j), v); }

// A decoder (Q80, Q4K, Q5K, Q6K) reads one block of kValues values (kBytes bytes) and gives, as
// group(g) for g < kValues / 16, values [16 g, 16 g + 16) with exactly cpu::dequant_row's (and
// ref::dequant_row's) bits; each struct names why its arithmetic rounds as the reference does.

inline __m512i load_u8(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// Q8_0 block (f16 d, 32 int8): d * q, one product, exact in f32 (11 + 8 significant bits).
struct Q80 {
    static constexpr size_t kBytes = 34;
    static constexpr int kValues = 32;
    const uint8_t* qs = nullptr;
    __m512 d;
    Q80() = default;
    explicit Q80(const uint8_t* p) : qs(p + 2) {
        uint16_t h;
        std::memcpy(&h, p, 2);
        d = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(h)));
    }
    __m512 group(int g) const {
        const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * g)));
        return _mm512_mul_ps(d, _mm512_cvtepi32_ps(q));
    }
};

// Q4_K / Q5_K block header (f16 d, f16 dmin, 12 bytes of 6-bit scales/mins) as one vector,
// dm = [d * sc[0..8), dmin * m[0..8)] (get_scale_min_k4's values). The scales are unpacked with
// 32-bit masks (sub-blocks 0-3: low 6 bits of bytes 0-3 / 4-7; 4-7: nibbles of bytes 8-11 plus the
// top 2 bits of bytes 0-3 / 4-7). d * sc (11 + 6 bits) is exact.
inline __m512 k4_scales(const uint8_t* s) {
    uint32_t w[4];
    std::memcpy(w, s, 16);  // w[0]: d, dmin; w[1..3]: the 12 scale bytes
    const uint32_t lo6 = 0x3F3F3F3Fu, lo4 = 0x0F0F0F0Fu, lo2 = 0x03030303u;
    const uint64_t sc = (w[1] & lo6) | static_cast<uint64_t>((w[3] & lo4) | (((w[1] >> 6) & lo2) << 4)) << 32;
    const uint64_t m = (w[2] & lo6) | static_cast<uint64_t>(((w[3] >> 4) & lo4) | (((w[2] >> 6) & lo2) << 4)) << 32;
    const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_set_epi64x(static_cast<int64_t>(m), static_cast<int64_t>(sc))));
    const __m512 dd = _mm512_cvtph_ps(_mm256_set1_epi32(static_cast<int>(w[0])));  // d, dmin, d, dmin, ..
    return _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), dd), v);
}

// Q4_K block (the header, 128 bytes of nibbles): group(g) is (d * sc) * q - dmin * m in one fmsub
// (d * sc and its product with q, 4 bits, are exact, so the reference's bits).
struct Q4K {
    static constexpr size_t kBytes = 144;
    static constexpr int kValues = 256;
    const uint8_t* qs = nullptr;
    __m512 dm;
    Q4K() = default;
    explicit Q4K(const uint8_t* s) : qs(s + 16), dm(k4_scales(s)) {}
    __m512 group(int g) const {  // sub-block j = g / 2: nibble half j & 1 of bytes 32 (j / 2) + 16 (g & 1) ..
        const int j = g / 2;
        const __m512i q = load_u8(qs + 32 * (j / 2) + 16 * (g & 1));
        const __m512i v = (j & 1) ? _mm512_srli_epi32(q, 4) : _mm512_and_si512(q, _mm512_set1_epi32(0xF));
        return _mm512_fmsub_ps(lane(dm, j), _mm512_cvtepi32_ps(v), lane(dm, 8 + j));
    }
};

// Q5_K block (the header, qh[32], qs[128]): Q4_K's nibble plus 16 times bit j of qh[l] for value l
// of sub-block j (ref: chunk c, half h, bit 2 c + h = j). (d * sc) * q with q < 32 (5 bits) is
// exact, so the one fmsub rounds as the reference's d1 * q - m1.
struct Q5K {
    static constexpr size_t kBytes = 176;
    static constexpr int kValues = 256;
    const uint8_t* s = nullptr;
    __m512 dm;
    Q5K() = default;
    explicit Q5K(const uint8_t* p) : s(p), dm(k4_scales(p)) {}
    __m512 group(int g) const {
        const int j = g / 2, l = 16 * (g & 1);
        const __m512i q = load_u8(s + 48 + 32 * (j / 2) + l);
        const __m512i lo = (j & 1) ? _mm512_srli_epi32(q, 4) : _mm512_and_si512(q, _mm512_set1_epi32(0xF));
        const __m512i hi = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(load_u8(s + 16 + l), j), _mm512_set1_epi32(1)), 4);
        return _mm512_fmsub_ps(lane(dm, j), _mm512_cvtepi32_ps(_mm512_or_si512(lo, hi)), lane(dm, 8 + j));
    }
};

// Q6_K block (ql[128], qh[64], int8 scales[16], f16 d): value 128 h + 32 k + l + i (l = 0, 16) is
// d * sc[8 h + 2 k + l / 16] * (q - 32), so group g uses scale g; (d * sc) * q is exact (ref's bits).
struct Q6K {
    static constexpr size_t kBytes = 210;
    static constexpr int kValues = 256;
    const uint8_t* s = nullptr;
    __m512 ds;
    Q6K() = default;
    explicit Q6K(const uint8_t* p) : s(p) {
        uint16_t h;
        std::memcpy(&h, p + 208, 2);
        const __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(h)));
        ds = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)))));
    }
    __m512 group(int g) const {
        const int half = g / 8, k = (g % 8) / 2, l = 16 * (g & 1);
        const uint8_t* ql = s + 64 * half + l + 32 * (k & 1);
        const __m512i hb = _mm512_srli_epi32(load_u8(s + 128 + 32 * half + l), 2 * k);
        const __m512i a = load_u8(ql);
        const __m512i lo = (k < 2) ? _mm512_and_si512(a, _mm512_set1_epi32(0xF)) : _mm512_srli_epi32(a, 4);
        const __m512i q = _mm512_or_si512(lo, _mm512_slli_epi32(_mm512_and_si512(hb, _mm512_set1_epi32(3)), 4));
        return _mm512_mul_ps(lane(ds, g), _mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(32))));
    }
};

// The fixed horizontal sum of the rows form (both rows kernels use it).
inline float hsum(__m512 a) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
    return _mm_cvtss_f32(q);
}

// Four rows at a time (four independent fma chains), x's group loaded once for them.
template <class Dec, int R>
void rows_group(const uint8_t* row0, size_t row_bytes, int64_t K, const float* x, float* y) {
    constexpr int kGroups = Dec::kValues / 16;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / Dec::kValues; ++b) {
        const float* xb = x + Dec::kValues * b;
        const uint8_t* blk = row0 + static_cast<size_t>(b) * Dec::kBytes;
        Dec dec[R];
        for (int r = 0; r < R; ++r) dec[r] = Dec(blk + static_cast<size_t>(r) * row_bytes);
#pragma GCC unroll 16
        for (int g = 0; g < kGroups; ++g) {
            const __m512 xv = _mm512_loadu_ps(xb + 16 * g);
            for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(dec[r].group(g), xv, acc[r]);
        }
    }
    for (int r = 0; r < R; ++r) y[r] = hsum(acc[r]);
}

template <class Dec>
void rows_one_t(const uint8_t* row0, size_t row_bytes, int64_t n_rows, int64_t K, const float* x, float* y) {
    const size_t used = static_cast<size_t>(K / Dec::kValues) * Dec::kBytes;
    for (int64_t o = 0; o < std::min(kAhead, n_rows); ++o) prefetch_row(row0 + static_cast<size_t>(o) * row_bytes, used);
    int64_t o = 0;
    for (; o + 4 <= n_rows; o += 4) {
        for (int64_t p = o + kAhead; p < std::min(o + kAhead + 4, n_rows); ++p) prefetch_row(row0 + static_cast<size_t>(p) * row_bytes, used);
        rows_group<Dec, 4>(row0 + static_cast<size_t>(o) * row_bytes, row_bytes, K, x, y + o);
    }
    for (; o < n_rows; ++o) rows_group<Dec, 1>(row0 + static_cast<size_t>(o) * row_bytes, row_bytes, K, x, y + o);
}

// The columns of NB blocks (from block b0 of every row, at most 256 columns) stay in accumulators
// while o runs over the rows. used > 0: the pass that prefetches whole rows (the later passes then
// find them in cache).
template <class Dec, int NB>
void columns_pass(const uint8_t* row0, size_t row_bytes, int64_t n_rows, int64_t b0, const float* x, float* y, size_t used) {
    constexpr int kGroups = Dec::kValues / 16;
    __m512 acc[NB * kGroups];
    for (auto& a : acc) a = _mm512_setzero_ps();
    if (used > 0)
        for (int64_t o = 0; o < std::min(kAhead, n_rows); ++o) prefetch_row(row0 + static_cast<size_t>(o) * row_bytes, used);
    for (int64_t o = 0; o < n_rows; ++o) {
        if (used > 0 && o + kAhead < n_rows) prefetch_row(row0 + static_cast<size_t>(o + kAhead) * row_bytes, used);
        const __m512 s = _mm512_set1_ps(x[o]);
        const uint8_t* blk = row0 + static_cast<size_t>(o) * row_bytes + static_cast<size_t>(b0) * Dec::kBytes;
#pragma GCC unroll 8
        for (int b = 0; b < NB; ++b) {
            const Dec dec(blk + static_cast<size_t>(b) * Dec::kBytes);
#pragma GCC unroll 16
            for (int g = 0; g < kGroups; ++g) acc[b * kGroups + g] = _mm512_fmadd_ps(s, dec.group(g), acc[b * kGroups + g]);
        }
    }
    for (int i = 0; i < NB * kGroups; ++i) _mm512_storeu_ps(y + Dec::kValues * b0 + 16 * i, acc[i]);
}

// 256 columns per pass (Q8_0: eight blocks; a K % 256 tail one block per pass).
template <class Dec>
void columns_one_t(const uint8_t* row0, size_t row_bytes, int64_t n_rows, int64_t K, const float* x, float* y) {
    constexpr int kPerPass = 256 / Dec::kValues;
    const int64_t blocks = K / Dec::kValues;
    const size_t used = static_cast<size_t>(blocks) * Dec::kBytes;
    int64_t b = 0;
    for (; b + kPerPass <= blocks; b += kPerPass) columns_pass<Dec, kPerPass>(row0, row_bytes, n_rows, b, x, y, b == 0 ? used : 0);
    for (; b < blocks; ++b) columns_pass<Dec, 1>(row0, row_bytes, n_rows, b, x, y, b == 0 ? used : 0);
}

// R rows x T activation rows of the rows form on f32 rows: the per-output sequence of rows_one_t.
template <int R, int T>
void rows_tile(const float* buf, int64_t K, const float* x, int64_t ldx, float* y, int64_t ldy) {
    __m512 acc[T][R];
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 16) {
        __m512 w[R];
        for (int r = 0; r < R; ++r) w[r] = _mm512_loadu_ps(buf + r * K + k);
        for (int t = 0; t < T; ++t) {
            const __m512 xv = _mm512_loadu_ps(x + t * ldx + k);
            for (int r = 0; r < R; ++r) acc[t][r] = _mm512_fmadd_ps(w[r], xv, acc[t][r]);
        }
    }
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) y[t * ldy + r] = hsum(acc[t][r]);
}

}  // namespace

void rows_one(DType type, const uint8_t* row0, size_t row_bytes, int64_t n_rows, int64_t K, const float* x, float* y) {
    switch (type) {
        case DType::Q8_0: return rows_one_t<Q80>(row0, row_bytes, n_rows, K, x, y);
        case DType::Q4_K: return rows_one_t<Q4K>(row0, row_bytes, n_rows, K, x, y);
        case DType::Q5_K: return rows_one_t<Q5K>(row0, row_bytes, n_rows, K, x, y);
        case DType::Q6_K: return rows_one_t<Q6K>(row0, row_bytes, n_rows, K, x, y);
        default: throw_error("kernels", "head_fused::rows_one of ", dtype_name(type));
    }
}

void columns_one(DType type, const uint8_t* row0, size_t row_bytes, int64_t n_rows, int64_t K, const float* x, float* y) {
    switch (type) {
        case DType::Q8_0: return columns_one_t<Q80>(row0, row_bytes, n_rows, K, x, y);
        case DType::Q4_K: return columns_one_t<Q4K>(row0, row_bytes, n_rows, K, x, y);
        case DType::Q5_K: return columns_one_t<Q5K>(row0, row_bytes, n_rows, K, x, y);
        case DType::Q6_K: return columns_one_t<Q6K>(row0, row_bytes, n_rows, K, x, y);
        default: throw_error("kernels", "head_fused::columns_one of ", dtype_name(type));
    }
}

void rows_buf(const float* buf, int64_t n_rows, int64_t K, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t m) {
    int64_t t = 0;
    for (; t + 4 <= m; t += 4) {
        int64_t o = 0;
        for (; o + 4 <= n_rows; o += 4) rows_tile<4, 4>(buf + o * K, K, x + t * ldx, ldx, y + t * ldy + o, ldy);
        for (; o < n_rows; ++o) rows_tile<1, 4>(buf + o * K, K, x + t * ldx, ldx, y + t * ldy + o, ldy);
    }
    for (; t < m; ++t) {
        int64_t o = 0;
        for (; o + 4 <= n_rows; o += 4) rows_tile<4, 1>(buf + o * K, K, x + t * ldx, ldx, y + t * ldy + o, ldy);
        for (; o < n_rows; ++o) rows_tile<1, 1>(buf + o * K, K, x + t * ldx, ldx, y + t * ldy + o, ldy);
    }
}
MOE_DENSE_AVX512_END
#else
void rows_one(DType, const uint8_t*, size_t, int64_t, int64_t, const float*, float*) {
    throw_error("kernels", "head_fused::rows_one without AVX-512");
}
void rows_buf(const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, int64_t) {
    throw_error("kernels", "head_fused::rows_buf without AVX-512");
}
void columns_one(DType, const uint8_t*, size_t, int64_t, int64_t, const float*, float*) {
    throw_error("kernels", "head_fused::columns_one without AVX-512");
}
#endif

}  // namespace moe::cpu::head_fused
