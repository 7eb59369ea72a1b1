// AVX2 block kernels for the grid-based IQ types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
// IQ1_M: the experts of most sub-3-bit MoE files, e.g. DeepSeek-V3 / R1 IQ1_S .. IQ3_XXS), the steps
// of qmatmul_avx2_blocks.h's driver. Without them a CPU without AVX-512 VNNI ran these types on the
// generic path (a scalar decode of every weight row, ~1.5 GMAC/s per thread at m = 1).
//
// Per 32-value block ib of a 256-value super-block, a type's `block` gives the 32 magnitudes as
// unsigned bytes (4 grid entries of 8, or 8 of 4: scalar loads, which beat the gathers on the AMD
// CPUs measured, docs/PERFORMANCE.md session 23) and a byte mask of the negative values; the
// activations take the signs ((x ^ m) - m) and I = vpmaddwd(vpmaddubsw(mag, x'), 1) is the chain's
// exact integer sum: |pair| <= 2 x 62 x 127 < 2^15, the kActQ8_K activations lie in -127..127.
// IQ1_S / IQ1_M values 8 g +- 1 (g in {-1, 0, 1}) go the same way as |v| and v < 0. The f32 scales
// are the scalar decoders' expressions (qmatmul_decode_more.h), the chain per granule (32 values,
// or 16 for IQ2_XS, IQ2_S, IQ1_M) in K order: the scalar path's bits.
#include "core/fp16.h"
#include "kernels/cpu/qmatmul_avx2_blocks.h"
#include "kernels/ref/iq_tables.h"

namespace moe::kernels {

namespace {

using namespace avx2_blocks;

template <class T>
inline T load_as(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// 4 sign bytes (byte l: bit j set = element j of group l negative) -> 32 byte masks.
MOE_AVX2_BLK inline __m256i sign_mask32(uint32_t s) {
    const __m256i rep = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(s)),
                                            _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
    return _mm256_cmpeq_epi8(_mm256_and_si256(rep, bit), bit);
}
// The 4 7-bit fields at bits 7 l of w (IQ2_XXS, IQ3_XXS) as bytes (shifts, not pdep: slow on Zen 1/2).
inline uint32_t fields7x4(uint32_t w) {
    return (w & 0x7Fu) | ((w >> 7) & 0x7Fu) << 8 | ((w >> 14) & 0x7Fu) << 16 | ((w >> 21) & 0x7Fu) << 24;
}
MOE_AVX2_BLK inline __m256i grid4x8(const uint64_t* G, int i0, int i1, int i2, int i3) {
    return _mm256_setr_epi64x(static_cast<int64_t>(G[i0]), static_cast<int64_t>(G[i1]), static_cast<int64_t>(G[i2]),
                              static_cast<int64_t>(G[i3]));
}
MOE_AVX2_BLK inline __m256i grid8x4(const uint32_t* G, const int (&i)[8]) {
    return _mm256_setr_epi32(static_cast<int>(G[i[0]]), static_cast<int>(G[i[1]]), static_cast<int>(G[i[2]]), static_cast<int>(G[i[3]]),
                             static_cast<int>(G[i[4]]), static_cast<int>(G[i[5]]), static_cast<int>(G[i[6]]), static_cast<int>(G[i[7]]));
}
// IQ1 values 8 g + delta from grid bytes g in {-1, 0, 1} and the per-byte delta (+-1).
MOE_AVX2_BLK inline void iq1_values(__m256i g, __m256i delta, __m256i* mag, __m256i* neg) {
    const __m256i x8 = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -8));
    const __m256i v = _mm256_add_epi8(_mm256_shuffle_epi8(x8, _mm256_and_si256(g, _mm256_set1_epi8(0x0F))), delta);
    *mag = _mm256_abs_epi8(v);
    *neg = _mm256_cmpgt_epi8(_mm256_setzero_si256(), v);
}

// Field of type T at byte `off` of the 4 rows' current super-blocks, as 4 int32 lanes.
template <class T>
MOE_AVX2_BLK inline __m128i rows4(const uint8_t* const* blk, size_t off) {
    return _mm_setr_epi32(static_cast<int>(load_as<T>(blk[0] + off)), static_cast<int>(load_as<T>(blk[1] + off)),
                          static_cast<int>(load_as<T>(blk[2] + off)), static_cast<int>(load_as<T>(blk[3] + off)));
}
MOE_AVX2_BLK inline __m128i odd(__m128i s) { return _mm_add_epi32(_mm_slli_epi32(s, 1), _mm_set1_epi32(1)); }
// The scalar decoders' f32 scales, the same operations in the same order: db_iq2 = d (0.5 + s) / 4,
// IQ1 d (2 s + 1) / 8.
MOE_AVX2_BLK inline __m128 db_iq2x4(__m128 d, __m128i s) {
    return _mm_mul_ps(_mm_mul_ps(d, _mm_add_ps(_mm_set1_ps(0.5f), _mm_cvtepi32_ps(s))), _mm_set1_ps(0.25f));
}
MOE_AVX2_BLK inline __m128 eighths(__m128 d, __m128i s) { return _mm_mul_ps(_mm_mul_ps(d, _mm_cvtepi32_ps(odd(s))), _mm_set1_ps(0.125f)); }
// IQ2_XS / IQ2_S: the low nibble scales granule 2 ib, the high one 2 ib + 1.
MOE_AVX2_BLK inline void nibble_scales(__m128i c, __m128 d, __m128* w) {
    w[0] = db_iq2x4(d, _mm_and_si128(c, _mm_set1_epi32(0xF)));
    w[1] = db_iq2x4(d, _mm_srli_epi32(c, 4));
}

// Each type: kBytes, kG (granule), d4 (the 4 rows' super-block d), scales (block ib's f32 scale per
// granule for the 4 rows: w[0], and w[1] for 16-value granules) and block(b, ib, mag, neg).
struct IQ2XXS {
    static constexpr size_t kBytes = sizeof(ref::BlockIQ2_XXS);
    static constexpr int kG = 32;
    MOE_AVX2_BLK static __m128 d4(const uint8_t* const* blk) { return halves4(blk, 0); }
    MOE_AVX2_BLK static void scales(const uint8_t* const* blk, int ib, __m128 d, __m128* w) {
        w[0] = db_iq2x4(d, _mm_srli_epi32(rows4<uint32_t>(blk, 2 + 8 * ib + 4), 28));
    }
    MOE_AVX2_BLK static void block(const uint8_t* b, int ib, __m256i* mag, __m256i* neg) {
        const uint32_t a0 = load_as<uint32_t>(b + 2 + 8 * ib), a1 = load_as<uint32_t>(b + 2 + 8 * ib + 4);
        *mag = grid4x8(ref::kIq2xxsGrid, a0 & 0xFF, (a0 >> 8) & 0xFF, (a0 >> 16) & 0xFF, a0 >> 24);
        *neg = sign_mask32(ref::iq_signs8_bytes<uint32_t>(fields7x4(a1)));
    }
};
struct IQ2XS {
    static constexpr size_t kBytes = sizeof(ref::BlockIQ2_XS);
    static constexpr int kG = 16;
    MOE_AVX2_BLK static __m128 d4(const uint8_t* const* blk) { return halves4(blk, 0); }
    MOE_AVX2_BLK static void scales(const uint8_t* const* blk, int ib, __m128 d, __m128* w) { nibble_scales(rows4<uint8_t>(blk, 66 + ib), d, w); }
    MOE_AVX2_BLK static void block(const uint8_t* b, int ib, __m256i* mag, __m256i* neg) {
        const uint64_t v = load_as<uint64_t>(b + 2 + 8 * ib);  // 4 x u16: 9-bit index | 7 sign bits << 9
        auto e = [&](int l) { return static_cast<int>((v >> (16 * l)) & 511); };
        *mag = grid4x8(ref::kIq2xsGrid, e(0), e(1), e(2), e(3));
        auto f = [&](int l) { return static_cast<uint32_t>((v >> (16 * l + 9)) & 0x7F) << (8 * l); };
        *neg = sign_mask32(ref::iq_signs8_bytes<uint32_t>(f(0) | f(1) | f(2) | f(3)));
    }
};
struct IQ2S {
    static constexpr size_t kBytes = sizeof(ref::BlockIQ2_S);
    static constexpr int kG = 16;
    MOE_AVX2_BLK static __m128 d4(const uint8_t* const* blk) { return halves4(blk, 0); }
    MOE_AVX2_BLK static void scales(const uint8_t* const* blk, int ib, __m128 d, __m128* w) { nibble_scales(rows4<uint8_t>(blk, 74 + ib), d, w); }
    MOE_AVX2_BLK static void block(const uint8_t* b, int ib, __m256i* mag, __m256i* neg) {
        const uint8_t* q = b + 2 + 4 * ib;
        const int h = b[66 + ib];
        *mag = grid4x8(ref::kIq2sGrid, q[0] | (h & 3) << 8, q[1] | ((h >> 2) & 3) << 8, q[2] | ((h >> 4) & 3) << 8, q[3] | ((h >> 6) & 3) << 8);
        *neg = sign_mask32(load_as<uint32_t>(b + 34 + 4 * ib));
    }
};
struct IQ3XXS {
    static constexpr size_t kBytes = sizeof(ref::BlockIQ3_XXS);
    static constexpr int kG = 32;
    MOE_AVX2_BLK static __m128 d4(const uint8_t* const* blk) { return halves4(blk, 0); }
    MOE_AVX2_BLK static void scales(const uint8_t* const* blk, int ib, __m128 d, __m128* w) {  // d (0.5 + s) / 2
        const __m128 s = _mm_cvtepi32_ps(_mm_srli_epi32(rows4<uint32_t>(blk, 66 + 4 * ib), 28));
        w[0] = _mm_mul_ps(_mm_mul_ps(d, _mm_add_ps(_mm_set1_ps(0.5f), s)), _mm_set1_ps(0.5f));
    }
    MOE_AVX2_BLK static void block(const uint8_t* b, int ib, __m256i* mag, __m256i* neg) {
        const uint8_t* q = b + 2 + 8 * ib;
        const int i[8] = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
        *mag = grid8x4(ref::kIq3xxsGrid, i);
        *neg = sign_mask32(ref::iq_signs8_bytes<uint32_t>(fields7x4(load_as<uint32_t>(b + 66 + 4 * ib))));
    }
};
struct IQ3S {
    static constexpr size_t kBytes = sizeof(ref::BlockIQ3_S);
    static constexpr int kG = 32;
    MOE_AVX2_BLK static __m128 d4(const uint8_t* const* blk) { return halves4(blk, 0); }
    MOE_AVX2_BLK static void scales(const uint8_t* const* blk, int ib, __m128 d, __m128* w) {  // d (1 + 2 s)
        const __m128i s = _mm_and_si128(_mm_srli_epi32(rows4<uint8_t>(blk, 106 + ib / 2), 4 * (ib % 2)), _mm_set1_epi32(0xF));
        w[0] = _mm_mul_ps(d, _mm_cvtepi32_ps(odd(s)));
    }
    MOE_AVX2_BLK static void block(const uint8_t* b, int ib, __m256i* mag, __m256i* neg) {
        const uint8_t* q = b + 2 + 8 * ib;
        // index k = q[k] | bit k of qh[ib] << 8, built in a vector and stored (scalar shifts per
        // entry: 0.57x; the same for the 4-entry types was slower, 0.7-0.98x)
        const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b[66 + ib] << 8), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                                            _mm256_set1_epi32(0x100));
        alignas(32) int i[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(i), _mm256_or_si256(lo, hi));
        *mag = grid8x4(ref::kIq3sGrid, i);
        *neg = sign_mask32(load_as<uint32_t>(b + 74 + 4 * ib));
    }
};
struct IQ1S {
    static constexpr size_t kBytes = sizeof(ref::BlockIQ1_S);
    static constexpr int kG = 32;
    MOE_AVX2_BLK static __m128 d4(const uint8_t* const* blk) { return halves4(blk, 0); }
    MOE_AVX2_BLK static void scales(const uint8_t* const* blk, int ib, __m128 d, __m128* w) {  // d (2 s + 1) / 8
        w[0] = eighths(d, _mm_and_si128(_mm_srli_epi32(rows4<uint16_t>(blk, 34 + 2 * ib), 12), _mm_set1_epi32(7)));
    }
    MOE_AVX2_BLK static void block(const uint8_t* b, int ib, __m256i* mag, __m256i* neg) {
        const uint8_t* q = b + 2 + 4 * ib;
        const unsigned h = load_as<uint16_t>(b + 34 + 2 * ib);
        const __m256i g = grid4x8(ref::kIq1sGrid, q[0] | (h & 7) << 8, q[1] | ((h >> 3) & 7) << 8, q[2] | ((h >> 6) & 7) << 8,
                                  q[3] | ((h >> 9) & 7) << 8);
        iq1_values(g, _mm256_set1_epi8((h & 0x8000) ? -1 : 1), mag, neg);
    }
};
struct IQ1M {
    static constexpr size_t kBytes = sizeof(ref::BlockIQ1_M);
    static constexpr int kG = 16;
    MOE_AVX2_BLK static __m128 d4(const uint8_t* const* blk) {
        return _mm_setr_ps(fp16_to_fp32(ref::iq1_m_scale_bits(blk[0] + 48)), fp16_to_fp32(ref::iq1_m_scale_bits(blk[1] + 48)),
                           fp16_to_fp32(ref::iq1_m_scale_bits(blk[2] + 48)), fp16_to_fp32(ref::iq1_m_scale_bits(blk[3] + 48)));
    }
    MOE_AVX2_BLK static void scales(const uint8_t* const* blk, int ib, __m128 d, __m128* w) {  // d (2 s + 1) / 8 per 16 values
        const __m128i v = _mm_srli_epi32(rows4<uint16_t>(blk, 48 + 2 * (ib / 2)), 6 * (ib % 2)), m7 = _mm_set1_epi32(7);
        w[0] = eighths(d, _mm_and_si128(v, m7));
        w[1] = eighths(d, _mm_and_si128(_mm_srli_epi32(v, 3), m7));
    }
    MOE_AVX2_BLK static void block(const uint8_t* b, int ib, __m256i* mag, __m256i* neg) {
        const uint8_t* q = b + 4 * ib;
        const unsigned h = load_as<uint16_t>(b + 32 + 2 * ib);  // nibble l: index bits 8-10, bit 3 = group l's delta sign
        const __m256i g = grid4x8(ref::kIq1sGrid, q[0] | (h & 7) << 8, q[1] | ((h >> 4) & 7) << 8, q[2] | ((h >> 8) & 7) << 8,
                                  q[3] | ((h >> 12) & 7) << 8);
        auto dl = [&](int l) { return static_cast<int64_t>((h >> (4 * l + 3)) & 1 ? 0xFFFFFFFFFFFFFFFFull : 0x0101010101010101ull); };
        iq1_values(g, _mm256_setr_epi64x(dl(0), dl(1), dl(2), dl(3)), mag, neg);
    }
};

template <class D>
struct IqGrid {
    static constexpr ref::ActQuant kAct = ref::kActQ8_K;
    static constexpr int kNsGroup = 0, kValues = 256;
    static constexpr Permute kPermute = Permute::None;
    static constexpr size_t kBytes = D::kBytes;
    template <int RM>
    MOE_AVX2_BLK static void step(const uint8_t* const* row, int64_t b, const XRow* x, __m128* acc) {
        const __m256i ones = _mm256_set1_epi16(1);
        const uint8_t* blks[kRows];
        for (int i = 0; i < kRows; ++i) blks[i] = row[i] + b * static_cast<int64_t>(kBytes);
        const __m128 d = D::d4(blks);
        for (int ib = 0; ib < 8; ++ib) {
            __m256i xv[RM], I[RM][kRows];
            for (int r = 0; r < RM; ++r) xv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].qs + 256 * b + 32 * ib));
            for (int i = 0; i < kRows; ++i) {
                __m256i mag, neg;
                D::block(blks[i], ib, &mag, &neg);
                for (int r = 0; r < RM; ++r)
                    I[r][i] = _mm256_madd_epi16(_mm256_maddubs_epi16(mag, _mm256_sub_epi8(_mm256_xor_si256(xv[r], neg), neg)), ones);
            }
            __m128 w[2];
            D::scales(blks, ib, d, w);
            for (int r = 0; r < RM; ++r) {
                const __m128 dx0 = _mm_set1_ps(x[r].dxv[64 * b + 8 * ib]);  // dxv[4 * i16], i16 = 16 b + 2 ib
                if constexpr (D::kG == 32) {
                    acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(reduce4(I[r][0], I[r][1], I[r][2], I[r][3])), _mm_mul_ps(w[0], dx0), acc[r]);
                } else {  // [granule 2 ib rows 0..3 | granule 2 ib + 1 rows 0..3]
                    const __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(I[r][0], I[r][1]), _mm256_hadd_epi32(I[r][2], I[r][3]));
                    const __m128 dx1 = _mm_set1_ps(x[r].dxv[64 * b + 8 * ib + 4]);
                    acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm256_castsi256_si128(t)), _mm_mul_ps(w[0], dx0), acc[r]);
                    acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm256_extracti128_si256(t, 1)), _mm_mul_ps(w[1], dx1), acc[r]);
                }
            }
        }
    }
};

}  // namespace

MatmulFn qmm_avx2_iq_kernel(DType t) {
    switch (t) {
        case DType::IQ2_XXS: return qmm_blocks<IqGrid<IQ2XXS>>;
        case DType::IQ2_XS: return qmm_blocks<IqGrid<IQ2XS>>;
        case DType::IQ2_S: return qmm_blocks<IqGrid<IQ2S>>;
        case DType::IQ3_XXS: return qmm_blocks<IqGrid<IQ3XXS>>;
        case DType::IQ3_S: return qmm_blocks<IqGrid<IQ3S>>;
        case DType::IQ1_S: return qmm_blocks<IqGrid<IQ1S>>;
        case DType::IQ1_M: return qmm_blocks<IqGrid<IQ1M>>;
        default: return nullptr;
    }
}

}  // namespace moe::kernels
