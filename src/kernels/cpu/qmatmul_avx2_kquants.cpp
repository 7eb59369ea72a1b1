// AVX2 block kernels for the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (Q2_K, Q3_K_M, Q4_K_M, Q5_K_M,
// Q6_K files): the per-super-block steps of qmatmul_avx2_blocks.h's driver, each the scalar path's
// bits (the super-block integer chain of qmatmul.h).
#include "kernels/cpu/qmatmul_avx2_blocks.h"

namespace moe::kernels {

namespace {

using namespace avx2_blocks;

// Q4_K / Q5_K scales of one super-block (get_scale_min_k4, vectorised): bytes sc[0..7], m[0..7]
// in both 128-bit halves. s12 points at the 12 scale bytes; the 4 bytes read after them (the
// block's next field) are masked away. With the 6-bit fields of the 12 bytes B:
//   sc[j] = B[j] & 63, m[j] = B[j + 4] & 63 (j < 4);
//   sc[j] = (B[j + 4] & 15) | (B[j - 4] >> 6) << 4, m[j] = (B[j + 4] >> 4) | (B[j] >> 6) << 4 (j >= 4).
MOE_AVX2_BLK inline __m256i scales45(const uint8_t* s12) {
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s12)));
    const __m256i a = _mm256_shuffle_epi8(b, _mm256_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3,
                                                              8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m256i c = _mm256_shuffle_epi8(b, _mm256_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7, -1,
                                                              -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m256i t1 = _mm256_and_si256(a, _mm256_setr_epi64x(0x0f0f0f0f3f3f3f3fLL, 0x000000003f3f3f3fLL,
                                                              0x0f0f0f0f3f3f3f3fLL, 0x000000003f3f3f3fLL));
    const __m256i t2 = _mm256_and_si256(_mm256_srli_epi16(a, 4), _mm256_setr_epi64x(0, 0x0f0f0f0f00000000LL, 0,
                                                                                     0x0f0f0f0f00000000LL));
    const __m256i t3 = _mm256_and_si256(_mm256_srli_epi16(c, 2), _mm256_set1_epi64x(0x3030303000000000LL));
    return _mm256_or_si256(_mm256_or_si256(t1, t2), t3);
}

// ---------------------------------------------------------------- Q4_K / Q5_K
// Super-block: d, dmin, scales[12], (Q5_K: qh[32]), qs[128]; value 32 j + l is the low (j even)
// or high (j odd) nibble of qs[32 (j / 2) + l], plus (Q5_K) bit j of qh[l] as bit 4. Per 64
// values (granules 2c, 2c + 1: lo and hi, the levels of qs[32 c ..]) the vectors v1 =
// unpacklo_epi64(lo, hi) and v2 = unpackhi_epi64(lo, hi) hold, in each 128-bit lane, 8 values of
// granule 2c then 8 of 2c + 1, so both take the one scale vector [s_2c x 4, s_2c+1 x 4] per lane:
// their vpmaddubsw results add in int16 (|.| <= 2 * 2 * 31 * 128 < 2^15) before one vpmaddwd
// (the old order needed two vpmaddwd and two scale broadcasts). The activations are permuted to
// match once per call (permute_q8k). The levels are split once and used for RM activation rows.
template <bool Five, int RM>
MOE_AVX2_BLK inline void sb_sum45(const uint8_t* blk, const int8_t* const* xq, __m256i sc, __m256i* acc) {
    const uint8_t* qs = blk + (Five ? 48 : 16);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i hbits = _mm256_setzero_si256();
    if constexpr (Five) hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16));
    for (int r = 0; r < RM; ++r) acc[r] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
        __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if constexpr (Five) {
            const __m256i b = _mm256_set1_epi8(0x10);
            // bit 2c of qh -> bit 4 of lo, bit 2c + 1 -> bit 4 of hi (shifts stay inside each byte)
            const __m256i h = _mm256_srli_epi16(hbits, 2 * c);
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), b));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), b));
        }
        const __m256i v1 = _mm256_unpacklo_epi64(lo, hi), v2 = _mm256_unpackhi_epi64(lo, hi);
        // int16 [s_2c x 4, s_2c+1 x 4] in each lane from the scale bytes (index byte 0x80: zero high byte)
        const int64_t e = static_cast<int64_t>(0x8000800080008000ULL | 0x0001000100010001ULL * (2 * c));
        const __m256i s = _mm256_shuffle_epi8(sc, _mm256_set_epi64x(e + 0x0001000100010001LL, e, e + 0x0001000100010001LL, e));
        for (int r = 0; r < RM; ++r) {
            const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[r] + 64 * c));
            const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[r] + 64 * c + 32));
            const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(v1, x0), _mm256_maddubs_epi16(v2, x1));
            acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(p, s));
        }
    }
}

template <bool Five>
struct Q45K {
    static constexpr ref::ActQuant kAct = ref::kActQ8_K;
    static constexpr int kNsGroup = 32, kValues = 256;
    static constexpr Permute kPermute = Permute::Q45K;
    static constexpr size_t kBytes = Five ? sizeof(ref::BlockQ5_K) : sizeof(ref::BlockQ4_K);
    template <int RM>
    MOE_AVX2_BLK static void step(const uint8_t* const* row, int64_t b, const XRow* x, __m128* acc) {
        __m256i S[RM][kRows];
        __m128i M[RM][kRows];
        const uint8_t* blks[kRows];
        for (int i = 0; i < kRows; ++i) blks[i] = row[i] + b * static_cast<int64_t>(kBytes);
        const __m128 d = halves4(blks, 0), dmin = halves4(blks, 2);
        const int8_t* xq[RM];
        __m128i ns8[RM];
        for (int r = 0; r < RM; ++r) {
            xq[r] = x[r].qs + 256 * b;
            ns8[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r].ns + 8 * b));
        }
#pragma GCC unroll 4
        for (int i = 0; i < kRows; ++i) {
            const __m256i sc = scales45(blks[i] + 4);
            // m[0..7] as int16
            const __m128i m16 = _mm_cvtepu8_epi16(_mm_srli_si128(_mm256_castsi256_si128(sc), 8));
            __m256i t[RM];
            sb_sum45<Five, RM>(blks[i], xq, sc, t);
            for (int r = 0; r < RM; ++r) {
                S[r][i] = t[r];
                M[r][i] = _mm_madd_epi16(m16, ns8[r]);
            }
        }
        for (int r = 0; r < RM; ++r) {
            const __m128 dx = _mm_set1_ps(x[r].dxv[64 * b]);
            const __m128i s4 = reduce4(S[r][0], S[r][1], S[r][2], S[r][3]);
            const __m128i m4 = reduce4(M[r][0], M[r][1], M[r][2], M[r][3]);
            acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(s4), _mm_mul_ps(d, dx), acc[r]);
            acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(m4), _mm_mul_ps(dmin, dx), acc[r]);
        }
    }
};

// ---------------------------------------------------------------- 16-value granules (Q6_K, Q2_K, Q3_K)
// A super-block's 16 int8 granule scales as int16, even ones in the low lane and odd ones in the
// high lane, so that [s_2p x 8 | s_2p+1 x 8] (the scales of values 32 p .. 32 p + 31) is one vpshufb.
MOE_AVX2_BLK inline __m256i even_odd16(__m128i sc8) {
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
}
MOE_AVX2_BLK inline __m256i pair_scales(__m256i sc_eo, int p) {
    return _mm256_shuffle_epi8(sc_eo, _mm256_set1_epi16(static_cast<int16_t>((2 * p) | ((2 * p + 1) << 8))));
}

// ---------------------------------------------------------------- Q6_K
// Super-block: ql[128], qh[64], scales[16] (int8, one per 16 values), d. Half h (128 values):
// value 128 h + 32 c + l = (low / high nibble of ql[64 h + 32 (c & 1) + l]) | (2 bits of
// qh[32 h + l] at 2 c) << 4; level - 32 is the weight. S = sum_j sc_j (isum_j - 32 * sum x) with
// the offset as 32 * sum_j sc_j nsum_j (vpmaddwd on the int16 nsums).
template <int RM>
MOE_AVX2_BLK inline void sb_sum_q6k(const uint8_t* blk, const int8_t* const* xq, const int16_t* const* ns16, __m256i* acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    const __m256i sc_eo = even_odd16(sc8);
    // offset term: 32 * sum_j sc_j * nsum_j (|.| <= 32 * 16 * 128 * 2048 < 2^28)
    for (int r = 0; r < RM; ++r)
        acc[r] = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ns16[r]))), 5);
    for (int h = 0; h < 2; ++h) {
        const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h));
        const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
        const __m256i v[4] = {
            _mm256_or_si256(_mm256_and_si256(qa, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
            _mm256_or_si256(_mm256_and_si256(qb, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), m4), _mm256_and_si256(qh, m30)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
        };
        for (int c = 0; c < 4; ++c) {
            const int p = 4 * h + c;  // values 32 p .. 32 p + 31: scales 2 p (low lane), 2 p + 1 (high lane)
            const __m256i s = pair_scales(sc_eo, p);
            for (int r = 0; r < RM; ++r) {
                const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[r] + 32 * p));
                acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(_mm256_maddubs_epi16(v[c], x), s));
            }
        }
    }
}

struct Q6K {
    static constexpr ref::ActQuant kAct = ref::kActQ8_K;
    static constexpr int kNsGroup = 16, kValues = 256;
    static constexpr Permute kPermute = Permute::None;
    static constexpr size_t kBytes = sizeof(ref::BlockQ6_K);
    template <int RM>
    MOE_AVX2_BLK static void step(const uint8_t* const* row, int64_t b, const XRow* x, __m128* acc) {
        __m256i S[RM][kRows];
        const uint8_t* blks[kRows];
        for (int i = 0; i < kRows; ++i) blks[i] = row[i] + b * static_cast<int64_t>(kBytes);
        const __m128 d = halves4(blks, 208);
        const int8_t* xq[RM];
        const int16_t* ns[RM];
        for (int r = 0; r < RM; ++r) {
            xq[r] = x[r].qs + 256 * b;
            ns[r] = x[r].ns + 16 * b;
        }
#pragma GCC unroll 4
        for (int i = 0; i < kRows; ++i) {
            __m256i t[RM];
            sb_sum_q6k<RM>(blks[i], xq, ns, t);
            for (int r = 0; r < RM; ++r) S[r][i] = t[r];
        }
        for (int r = 0; r < RM; ++r) {
            const __m128 dx = _mm_set1_ps(x[r].dxv[64 * b]);
            acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(reduce4(S[r][0], S[r][1], S[r][2], S[r][3])), _mm_mul_ps(d, dx), acc[r]);
        }
    }
};

// ---------------------------------------------------------------- Q2_K / Q3_K
// Q2_K (84 bytes): scales[16] (low nibble sc, high nibble m, per 16 values), qs[64], d, dmin.
// Q3_K (110 bytes): hmask[32], qs[64], scales[12] (16 6-bit fields, minus 32), d. Both: value
// 128 h + 32 j + l (granule 8 h + 2 j + l / 16) has the 2 bits (qs[32 h + l] >> 2 j) & 3; Q3_K adds
// bit 4 h + j of hmask[l] as bit 2 and its weight is that level - 4. So, as in Q6_K, the vector
// for (h, j) is [16 values of granule 2 p | 16 of 2 p + 1] (p = 4 h + j). Q3_K's offset enters as
// 4 * sum_g sc_g nsum_g, Q2_K's mins as M = sum_g m_g nsum_g.
template <bool Three>
MOE_AVX2_BLK inline __m128i q23k_scales(const uint8_t* blk) {  // 16 signed bytes sc_g (Q2_K: sc | m << 4)
    if constexpr (!Three) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));
    // the 12 scale bytes at 96 (a 16-byte load from 94 stays inside the block), lo4 / hi2 fields:
    // lo4_j = s[j] & 15 (j < 8), s[j - 8] >> 4; hi2_j = (s[8 + j % 4] >> 2 (j / 4)) & 3
    const __m128i b = _mm_srli_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 94)), 2);
    const __m128i lo = _mm_and_si128(_mm_unpacklo_epi64(b, _mm_srli_epi16(b, 4)), _mm_set1_epi8(0x0F));
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi8(b, _mm_set1_epi32(0x0b0a0908)), _mm_setr_epi32(0, 2, 4, 6)),
                                     _mm_set1_epi8(0x03));
    return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}

template <bool Three, int RM>
MOE_AVX2_BLK inline void sb_sum_q23k(const uint8_t* blk, const int8_t* const* xq, const int16_t* const* ns16, __m256i* acc,
                                 __m256i* mins) {
    const __m256i m3 = _mm256_set1_epi8(0x03), b2 = _mm256_set1_epi8(0x04);
    const __m128i sc8raw = q23k_scales<Three>(blk);
    const __m128i sc8 = Three ? sc8raw : _mm_and_si128(sc8raw, _mm_set1_epi8(0x0F));
    const __m256i sc_eo = even_odd16(sc8);
    const uint8_t* qs = blk + (Three ? 32 : 16);
    if constexpr (Three) {  // offset: 4 * sum_g sc_g * nsum_g (|.| <= 4 * 16 * 32 * 2048 < 2^23)
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        for (int r = 0; r < RM; ++r)
            acc[r] = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ns16[r]))), 2);
    } else {
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8raw, 4), _mm_set1_epi8(0x0F)));
        for (int r = 0; r < RM; ++r) {
            acc[r] = _mm256_setzero_si256();
            mins[r] = _mm256_madd_epi16(m16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ns16[r])));
        }
    }
    __m256i hm = _mm256_setzero_si256();
    if constexpr (Three) hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk));
    for (int h = 0; h < 2; ++h) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * h));
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            const int p = 4 * h + j;
            __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
            if constexpr (Three) {  // bit p of hmask -> bit 2 (16-bit shifts: bit 2 stays the byte's own)
                const __m256i hb = p >= 2 ? _mm256_srli_epi16(hm, p - 2) : _mm256_slli_epi16(hm, 2 - p);
                v = _mm256_or_si256(v, _mm256_and_si256(hb, b2));
            }
            const __m256i s = pair_scales(sc_eo, p);
            for (int r = 0; r < RM; ++r) {
                const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[r] + 32 * p));
                acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(_mm256_maddubs_epi16(v, x), s));
            }
        }
    }
}

template <bool Three>
struct Q23K {
    static constexpr ref::ActQuant kAct = ref::kActQ8_K;
    static constexpr int kNsGroup = 16, kValues = 256;
    static constexpr Permute kPermute = Permute::None;
    static constexpr size_t kBytes = Three ? sizeof(ref::BlockQ3_K) : sizeof(ref::BlockQ2_K);
    template <int RM>
    MOE_AVX2_BLK static void step(const uint8_t* const* row, int64_t b, const XRow* x, __m128* acc) {
        __m256i S[RM][kRows], M[RM][kRows];
        const uint8_t* blks[kRows];
        for (int i = 0; i < kRows; ++i) blks[i] = row[i] + b * static_cast<int64_t>(kBytes);
        const __m128 d = halves4(blks, Three ? 108 : 80), dmin = Three ? d : halves4(blks, 82);
        const int8_t* xq[RM];
        const int16_t* ns[RM];
        for (int r = 0; r < RM; ++r) {
            xq[r] = x[r].qs + 256 * b;
            ns[r] = x[r].ns + 16 * b;
        }
#pragma GCC unroll 4
        for (int i = 0; i < kRows; ++i) {
            __m256i t[RM], u[RM];
            sb_sum_q23k<Three, RM>(blks[i], xq, ns, t, u);
            for (int r = 0; r < RM; ++r) {
                S[r][i] = t[r];
                if constexpr (!Three) M[r][i] = u[r];
            }
        }
        for (int r = 0; r < RM; ++r) {
            const __m128 dx = _mm_set1_ps(x[r].dxv[64 * b]);
            acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(reduce4(S[r][0], S[r][1], S[r][2], S[r][3])), _mm_mul_ps(d, dx), acc[r]);
            if constexpr (!Three)
                acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(reduce4(M[r][0], M[r][1], M[r][2], M[r][3])), _mm_mul_ps(dmin, dx), acc[r]);
        }
    }
};

}  // namespace

MatmulFn qmm_avx2_kquant_kernel(DType t) {
    switch (t) {
        case DType::Q2_K: return qmm_blocks<Q23K<false>>;
        case DType::Q3_K: return qmm_blocks<Q23K<true>>;
        case DType::Q4_K: return qmm_blocks<Q45K<false>>;
        case DType::Q5_K: return qmm_blocks<Q45K<true>>;
        case DType::Q6_K: return qmm_blocks<Q6K>;
        default: return nullptr;
    }
}

}  // namespace moe::kernels
