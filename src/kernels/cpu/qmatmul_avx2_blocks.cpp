// AVX2 block kernels for the 32-value block types Q8_0, Q4_0, Q5_0, MXFP4, IQ4_NL and for IQ4_XS
// (the steps of qmatmul_avx2_blocks.h's driver), and the AVX2 block-kernel table of every type.
#include "kernels/cpu/qmatmul_avx2_blocks.h"

#include "kernels/ref/iq_tables.h"

namespace moe::kernels {

namespace {

using namespace avx2_blocks;

// ---------------------------------------------------------------- Q8_0, Q4_0, Q5_0, MXFP4, IQ4_NL
// 32-value blocks, the chain's I = sum (q - 2^shift) x formed on the signed values v: Q8_0's int8,
// Q4_0 nibble - 8, Q5_0 5 bits - 16, MXFP4 kMxfp4Values[nibble], IQ4_NL kIq4nlValues[nibble]. Nibbles: value l < 16 is the low
// nibble of qs[l], value 16 + l the high one (Q5_0: plus bit l of the 32-bit qh as bit 4). Scale:
// f16 d; MXFP4: e8m0_half(e). I by vpmaddubsw on |v| (0..128 as unsigned) and x with v's sign
// (vpsignb), |pair| <= 2 * 128 * 127 < 2^15. Exact because these types' activations (kActQ8_0)
// lie in -127..127 (scaled by 127 / amax; MatmulArgs::xq comes from the same quantizer): a -128
// would wrap under the sign flip.
template <DType T>
struct Signed32 {
    static constexpr ref::ActQuant kAct = ref::kActQ8_0;
    static constexpr int kNsGroup = 0, kValues = 32;
    // Two blocks per step (step2) for the nibble types whose |v| <= 16: two vpmaddubsw results then
    // add in int16 (|.| <= 2 * 2 * 16 * 127 < 2^15) and one 3-hadd tree reduces both blocks.
    static constexpr bool kPairs = T == DType::Q4_0 || T == DType::Q5_0 || T == DType::MXFP4;
    static constexpr Permute kPermute = kPairs ? Permute::Pairs : Permute::None;
    static constexpr size_t kBytes = T == DType::Q8_0     ? sizeof(ref::BlockQ8_0)
                                     : T == DType::Q4_0   ? sizeof(ref::BlockQ4_0)
                                     : T == DType::Q5_0   ? sizeof(ref::BlockQ5_0)
                                     : T == DType::IQ4_NL ? sizeof(ref::BlockIQ4_NL)
                                                          : sizeof(ref::BlockMxfp4);
    static constexpr size_t kQs = T == DType::Q8_0 || T == DType::Q4_0 || T == DType::IQ4_NL ? 2 : T == DType::Q5_0 ? 6 : 1;

    MOE_AVX2_BLK static __m256i values(const uint8_t* blk) {
        if constexpr (T == DType::Q8_0) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQs));
        const __m256i v = nibbles32(blk + kQs);
        if constexpr (T == DType::MXFP4) {
            return _mm256_shuffle_epi8(table16(ref::kMxfp4Values), v);
        } else if constexpr (T == DType::IQ4_NL) {
            return _mm256_shuffle_epi8(table16(ref::kIq4nlValues), v);
        } else if constexpr (T == DType::Q5_0) {
            uint32_t qh;
            std::memcpy(&qh, blk + 2, 4);
            // byte l <- byte l / 8 of qh, then its bit l % 8 -> 0x10
            const __m256i rep = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)),
                                                    _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                                                       0x0303030303030303LL));
            const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
            const __m256i hb = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(rep, bit), bit), _mm256_set1_epi8(0x10));
            return _mm256_sub_epi8(_mm256_or_si256(v, hb), _mm256_set1_epi8(16));
        } else {
            return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
        }
    }
    MOE_AVX2_BLK static __m128 scales(const uint8_t* const* blk) {
        if constexpr (T == DType::MXFP4)
            return _mm_setr_ps(ref::e8m0_half(blk[0][0]), ref::e8m0_half(blk[1][0]), ref::e8m0_half(blk[2][0]),
                               ref::e8m0_half(blk[3][0]));
        else
            return halves4(blk, 0);
    }
    // Blocks g, g + 1 of one row as lo = [g values 0..15 | g + 1 values 0..15], hi = [.. 16..31 | ..].
    MOE_AVX2_BLK static void values2(const uint8_t* b0, const uint8_t* b1, __m256i* lo, __m256i* hi) {
        const __m256i q = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + kQs)),
                                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + kQs)));
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        __m256i l = _mm256_and_si256(q, m4), h = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if constexpr (T == DType::MXFP4) {
            const __m256i tab = table16(ref::kMxfp4Values);
            *lo = _mm256_shuffle_epi8(tab, l), *hi = _mm256_shuffle_epi8(tab, h);
        } else if constexpr (T == DType::Q5_0) {
            uint32_t qh0, qh1;
            std::memcpy(&qh0, b0 + 2, 4);
            std::memcpy(&qh1, b1 + 2, 4);
            // byte l of a lane <- byte l / 8 (lo) or 2 + l / 8 (hi) of that block's qh, its bit l % 8 -> 0x10
            const __m256i qh = _mm256_set_m128i(_mm_cvtsi32_si128(static_cast<int>(qh1)), _mm_cvtsi32_si128(static_cast<int>(qh0)));
            const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
            auto hb = [&](int64_t b0i, int64_t b1i) MOE_AVX2_BLK {
                const __m256i rep = _mm256_shuffle_epi8(qh, _mm256_setr_epi64x(b0i, b1i, b0i, b1i));
                return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(rep, bit), bit), _mm256_set1_epi8(0x10));
            };
            const __m256i s16 = _mm256_set1_epi8(16);
            *lo = _mm256_sub_epi8(_mm256_or_si256(l, hb(0, 0x0101010101010101LL)), s16);
            *hi = _mm256_sub_epi8(_mm256_or_si256(h, hb(0x0202020202020202LL, 0x0303030303030303LL)), s16);
        } else {
            *lo = _mm256_sub_epi8(l, _mm256_set1_epi8(8)), *hi = _mm256_sub_epi8(h, _mm256_set1_epi8(8));
        }
    }
    // Blocks g and g + 1 against the Pairs-permuted activations; the chain's two FMAs in block order.
    template <int RM>
    MOE_AVX2_BLK static void step2(const uint8_t* const* row, int64_t g, const XRow* x, __m128* acc) {
        const __m256i ones = _mm256_set1_epi16(1);
        __m256i xl[RM], xh[RM], I[RM][kRows];
        const uint8_t *b0[kRows], *b1[kRows];
        for (int i = 0; i < kRows; ++i) b0[i] = row[i] + g * static_cast<int64_t>(kBytes), b1[i] = b0[i] + kBytes;
        const __m128 d0 = scales(b0), d1 = scales(b1);
        for (int r = 0; r < RM; ++r) {
            xl[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].qs + 32 * g));
            xh[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].qs + 32 * g + 32));
        }
#pragma GCC unroll 4
        for (int i = 0; i < kRows; ++i) {
            __m256i l, h;
            values2(b0[i], b1[i], &l, &h);
            const __m256i al = _mm256_abs_epi8(l), ah = _mm256_abs_epi8(h);
            for (int r = 0; r < RM; ++r) {
                const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(al, _mm256_sign_epi8(xl[r], l)),
                                                   _mm256_maddubs_epi16(ah, _mm256_sign_epi8(xh[r], h)));
                I[r][i] = _mm256_madd_epi16(p, ones);
            }
        }
        for (int r = 0; r < RM; ++r) {
            // [block g rows 0..3 | block g + 1 rows 0..3]
            const __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(I[r][0], I[r][1]), _mm256_hadd_epi32(I[r][2], I[r][3]));
            const __m128 dx0 = _mm_set1_ps(x[r].dxv[8 * g]), dx1 = _mm_set1_ps(x[r].dxv[8 * g + 8]);
            acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm256_castsi256_si128(t)), _mm_mul_ps(d0, dx0), acc[r]);
            acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm256_extracti128_si256(t, 1)), _mm_mul_ps(d1, dx1), acc[r]);
        }
    }
    template <int RM>
    MOE_AVX2_BLK static void step(const uint8_t* const* row, int64_t g, const XRow* x, __m128* acc) {
        const __m256i ones = _mm256_set1_epi16(1);
        __m256i xv[RM], I[RM][kRows];
        const uint8_t* blks[kRows];
        for (int i = 0; i < kRows; ++i) blks[i] = row[i] + g * static_cast<int64_t>(kBytes);
        const __m128 d = scales(blks);
        for (int r = 0; r < RM; ++r) xv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].qs + 32 * g));
        for (int i = 0; i < kRows; ++i) {
            const __m256i v = values(blks[i]);
            const __m256i av = _mm256_abs_epi8(v);
            for (int r = 0; r < RM; ++r)
                I[r][i] = _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(xv[r], v)), ones);
        }
        for (int r = 0; r < RM; ++r) {
            const __m128 dx = _mm_set1_ps(x[r].dxv[8 * g]);  // the block's scale (dxv[4 * i16], i16 = 2 g)
            acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(reduce4(I[r][0], I[r][1], I[r][2], I[r][3])), _mm_mul_ps(d, dx), acc[r]);
        }
    }
};

// ---------------------------------------------------------------- IQ4_XS
// Super-block (136 bytes): d, scales_h (2 high bits per 32 values), scales_l[4] (4 low bits per 32
// values), qs[128]: block ib's value l < 16 / 16 + l is kIq4nlValues of the low / high nibble of
// qs[16 ib + l]. Not a super-block-chain type: per 32-value granule (qmatmul.h) acc = fma(float(I),
// ws * dx, acc) with ws = d * (ls - 32), exact (11 + 6 bits). I by Signed32's sign trick, exact as
// kActQ8_K activations lie in -127..127 (scaled by -127 / the signed max).
struct IQ4XS {
    static constexpr ref::ActQuant kAct = ref::kActQ8_K;
    static constexpr int kNsGroup = 0, kValues = 256;
    static constexpr Permute kPermute = Permute::None;
    static constexpr size_t kBytes = sizeof(ref::BlockIQ4_XS);
    template <int RM>
    MOE_AVX2_BLK static void step(const uint8_t* const* row, int64_t b, const XRow* x, __m128* acc) {
        const __m256i ones = _mm256_set1_epi16(1), tab = table16(ref::kIq4nlValues);
        const uint8_t* blks[kRows];
        uint32_t sl[kRows];
        uint16_t sh[kRows];
        for (int i = 0; i < kRows; ++i) {
            blks[i] = row[i] + b * static_cast<int64_t>(kBytes);
            std::memcpy(&sh[i], blks[i] + 2, 2);
            std::memcpy(&sl[i], blks[i] + 4, 4);
        }
        const __m128 d = halves4(blks, 0);
        // lane = weight row: ls_ib = (bits 4 ib.. of scales_l & 15) | (bits 2 ib.. of scales_h & 3) << 4
        const __m128i L = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sl));
        const __m128i H = _mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sh)));
        for (int ib = 0; ib < 8; ++ib) {
            const __m128i ls = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(L, 4 * ib), _mm_set1_epi32(15)),
                                            _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(H, 2 * ib), _mm_set1_epi32(3)), 4));
            const __m128 ws = _mm_mul_ps(d, _mm_cvtepi32_ps(_mm_sub_epi32(ls, _mm_set1_epi32(32))));
            __m256i xv[RM], I[RM][kRows];
            for (int r = 0; r < RM; ++r) xv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].qs + 256 * b + 32 * ib));
            for (int i = 0; i < kRows; ++i) {
                const __m256i v = _mm256_shuffle_epi8(tab, nibbles32(blks[i] + 8 + 16 * ib));
                const __m256i av = _mm256_abs_epi8(v);
                for (int r = 0; r < RM; ++r) I[r][i] = _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(xv[r], v)), ones);
            }
            for (int r = 0; r < RM; ++r) {
                const __m128 dx = _mm_set1_ps(x[r].dxv[64 * b + 8 * ib]);  // dxv[4 * i16], i16 = 16 b + 2 ib
                acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(reduce4(I[r][0], I[r][1], I[r][2], I[r][3])), _mm_mul_ps(ws, dx), acc[r]);
            }
        }
    }
};

}  // namespace

// The K-quants' steps (qmatmul_avx2_kquants.cpp), the grid IQ types' (qmatmul_avx2_iq.cpp).
MatmulFn qmm_avx2_kquant_kernel(DType t);
MatmulFn qmm_avx2_iq_kernel(DType t);

MatmulFn qmm_avx2_blocks_kernel(DType t) {
    if (!cpu_has_f16c()) return nullptr;  // every AVX2 CPU so far has it; else the generic path
    if (MatmulFn f = qmm_avx2_kquant_kernel(t)) return f;
    if (MatmulFn f = qmm_avx2_iq_kernel(t)) return f;
    switch (t) {
        case DType::Q8_0: return qmm_blocks<Signed32<DType::Q8_0>>;
        case DType::Q4_0: return qmm_blocks<Signed32<DType::Q4_0>>;
        case DType::Q5_0: return qmm_blocks<Signed32<DType::Q5_0>>;
        case DType::MXFP4: return qmm_blocks<Signed32<DType::MXFP4>>;
        case DType::IQ4_NL: return qmm_blocks<Signed32<DType::IQ4_NL>>;
        case DType::IQ4_XS: return qmm_blocks<IQ4XS>;
        default: return nullptr;
    }
}

}  // namespace moe::kernels
