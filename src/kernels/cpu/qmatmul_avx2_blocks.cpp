// AVX2 int8 kernels that read the weight blocks in place: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_0, Q4_0,
// Q5_0, MXFP4, IQ4_NL, IQ4_XS (the types of Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K, Q8_0, Q4_0, IQ4_NL,
// IQ4_XS and gpt-oss MXFP4 files). The generic AVX2 path (qmatmul_generic.cpp) decodes each
// weight row to bytes with scalar code first, ~0.2 GB/s; CPUs without AVX-512 VNNI (Zen 2/3,
// Haswell..Alder Lake; F16C is required, as on all of them) run these instead. Hand-written because no library computes the engine's
// canonical chain (qmatmul.h), which every path must reproduce bit for bit.
//
// Shape of the work: 4 weight rows at a time against one ActQ8 activation row. Per 256-value
// super-block (K-quants) or 32-value block (Q8_0) each row's exact int32 sum is formed in a ymm
// (vpmaddubsw on unsigned levels x int8 activations: |pair| <= 2 * 31 * 128 for Q5_K, 2 * 63 *
// 128 for Q6_K, no int16 saturation; then vpmaddwd by the granule's integer scale), the four are
// reduced together, and the chain's FMAs run on the 4 outputs as one xmm, lane r doing exactly
// the scalar path's std::fma sequence for its row. The min / offset terms use the activations'
// per-16 sums (nsum), gathered once per call as int16.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/ref/quant_formats.h"

namespace moe::kernels {

namespace {

#define MOE_AVX2 __attribute__((target("avx2,fma,f16c")))

constexpr int kRows = 4;       // weight rows per step (one 4-way reduction)
constexpr int64_t kActBlock = 16;  // activation rows per pass over the weight rows (prefill: they stay in L2)
constexpr int64_t kPrefetchRows = 2 * kRows;  // software prefetch distance (run_rows)

// Per-call int16 sums of the activations (-sum of each 16 or 32 int8 values), K/16 or K/32 per row.
thread_local std::vector<int16_t> tls_ns;
// Per-call copy of the int8 activations in a kernel's order (Permute), K per row (64-byte aligned).
thread_local std::vector<int8_t> tls_qs;

struct Ctx {
    const unsigned char* act;
    size_t act_stride;
    const int16_t* ns;  // [m][ns_per_row]
    int64_t ns_per_row;
    const int8_t* qs;  // permuted int8 activations [m][K], or null (the ActQ8Row's own)
};

// The activations in sb_sum45's vector order: per 64 values, the same unpacks as the weights'
// (unpacklo_epi64 / unpackhi_epi64 of the two 32-value halves: values 0..7, 32..39, 16..23, 48..55,
// then 8..15, 40..47, 24..31, 56..63).
MOE_AVX2 void permute_q8k(const int8_t* x, int64_t K, int8_t* out) {
    for (int64_t i = 0; i < K; i += 64) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 32));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_unpacklo_epi64(a, b));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 32), _mm256_unpackhi_epi64(a, b));
    }
}

// The activations in Signed32::step2's order: per pair of 32-value blocks (64 values) the 16-value
// quarters 0, 2, 1, 3 ([block g values 0..15 | g + 1 0..15], then 16..31 of each); an odd last block
// stays as it is.
MOE_AVX2 void permute_pairs(const int8_t* x, int64_t K, int8_t* out) {
    int64_t i = 0;
    for (; i + 64 <= K; i += 64) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 32));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permute2x128_si256(a, b, 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 32), _mm256_permute2x128_si256(a, b, 0x31));
    }
    if (i < K) std::memcpy(out + i, x + i, static_cast<size_t>(K - i));
}

enum class Permute { None, Q45K, Pairs };

// The call's activation rows and, for group 16 or 32 (0: none), nsum (ActQ8Row, one int32 per 16
// values at index 4 * i16) as int16 sums per group. |sum| <= 32 * 128: fits int16.
MOE_AVX2 Ctx make_ctx(const MatmulArgs& a, ref::ActQuant kind, int group, Permute permute) {
    size_t stride = 0;
    const unsigned char* act = qmm_activations(a, Isa::Avx2, kind, &stride);
    const int8_t* qs = nullptr;
    if (permute != Permute::None) {  // K: whole super-blocks (Q45K), whole 32-value blocks (Pairs)
        if (static_cast<int64_t>(tls_qs.size()) < a.m * a.K + 64) tls_qs.resize(static_cast<size_t>(a.m * a.K + 64));
        int8_t* base = tls_qs.data() + (64 - reinterpret_cast<uintptr_t>(tls_qs.data()) % 64) % 64;  // whole-line loads
        for (int64_t r = 0; r < a.m; ++r) {
            const int8_t* x = ref::act_q8_row(const_cast<unsigned char*>(act + r * stride), a.K).qs;
            if (permute == Permute::Q45K) permute_q8k(x, a.K, base + r * a.K);
            else permute_pairs(x, a.K, base + r * a.K);
        }
        qs = base;
    }
    if (group == 0) return {act, stride, nullptr, 0, qs};
    const int64_t per = a.K / group;
    if (static_cast<int64_t>(tls_ns.size()) < a.m * per) tls_ns.resize(static_cast<size_t>(a.m * per));
    for (int64_t r = 0; r < a.m; ++r) {
        const ref::ActQ8Row x = ref::act_q8_row(const_cast<unsigned char*>(act + r * stride), a.K);
        int16_t* o = tls_ns.data() + r * per;
        for (int64_t g = 0; g < per; ++g)
            o[g] = static_cast<int16_t>(group == 16 ? x.nsum[4 * g] : x.nsum[8 * g] + x.nsum[8 * g + 4]);
    }
    return {act, stride, tls_ns.data(), per, qs};
}

MOE_AVX2 inline __m128i reduce4(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}
MOE_AVX2 inline __m128i reduce4(__m128i a, __m128i b, __m128i c, __m128i d) {
    return _mm_hadd_epi32(_mm_hadd_epi32(a, b), _mm_hadd_epi32(c, d));
}

// Q4_K / Q5_K scales of one super-block (get_scale_min_k4, vectorised): bytes sc[0..7], m[0..7]
// in both 128-bit halves. s12 points at the 12 scale bytes; the 4 bytes read after them (the
// block's next field) are masked away. With the 6-bit fields of the 12 bytes B:
//   sc[j] = B[j] & 63, m[j] = B[j + 4] & 63 (j < 4);
//   sc[j] = (B[j + 4] & 15) | (B[j - 4] >> 6) << 4, m[j] = (B[j + 4] >> 4) | (B[j] >> 6) << 4 (j >= 4).
MOE_AVX2 inline __m256i scales45(const uint8_t* s12) {
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

inline void store_lanes(float* y, __m128 v, int count) {
    alignas(16) float t[4];
    _mm_store_ps(t, v);
    for (int i = 0; i < count; ++i) y[i] = t[i];
}

// The f16 at byte `off` of the 4 rows' current blocks as 4 floats (F16C: exact, as fp16_to_fp32).
MOE_AVX2 inline __m128 halves4(const uint8_t* const* blk, size_t off) {
    uint16_t h[4];
    for (int i = 0; i < 4; ++i) std::memcpy(&h[i], blk[i] + off, 2);
    return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(h)));
}

// One activation row as the block steps read it.
struct XRow {
    const int8_t* qs;
    const float* dxv;
    const int16_t* ns;  // Ctx::ns row (K-quants)
};

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
MOE_AVX2 inline void sb_sum45(const uint8_t* blk, const int8_t* const* xq, __m256i sc, __m256i* acc) {
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
    static constexpr bool kPairs = false;
    static constexpr size_t kBytes = Five ? sizeof(ref::BlockQ5_K) : sizeof(ref::BlockQ4_K);
    template <int RM>
    MOE_AVX2 static void step(const uint8_t* const* row, int64_t b, const XRow* x, __m128* acc) {
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

// ---------------------------------------------------------------- Q6_K
// Super-block: ql[128], qh[64], scales[16] (int8, one per 16 values), d. Half h (128 values):
// value 128 h + 32 c + l = (low / high nibble of ql[64 h + 32 (c & 1) + l]) | (2 bits of
// qh[32 h + l] at 2 c) << 4; level - 32 is the weight. S = sum_j sc_j (isum_j - 32 * sum x) with
// the offset as 32 * sum_j sc_j nsum_j (vpmaddwd on the int16 nsums).
template <int RM>
MOE_AVX2 inline void sb_sum_q6k(const uint8_t* blk, const int8_t* const* xq, const int16_t* const* ns16, __m256i* acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    // int16 scales, even ones in the low lane, odd ones in the high lane: [s_2p x 8 | s_2p+1 x 8] is one vpshufb
    const __m256i sc_eo = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
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
            const __m256i s = _mm256_shuffle_epi8(sc_eo, _mm256_set1_epi16(static_cast<int16_t>((2 * p) | ((2 * p + 1) << 8))));
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
    static constexpr bool kPairs = false;
    static constexpr size_t kBytes = sizeof(ref::BlockQ6_K);
    template <int RM>
    MOE_AVX2 static void step(const uint8_t* const* row, int64_t b, const XRow* x, __m128* acc) {
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
MOE_AVX2 inline __m128i q23k_scales(const uint8_t* blk) {  // 16 signed bytes sc_g (Q2_K: sc | m << 4)
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
MOE_AVX2 inline void sb_sum_q23k(const uint8_t* blk, const int8_t* const* xq, const int16_t* const* ns16, __m256i* acc,
                                 __m256i* mins) {
    const __m256i m3 = _mm256_set1_epi8(0x03), b2 = _mm256_set1_epi8(0x04);
    const __m128i sc8raw = q23k_scales<Three>(blk);
    const __m128i sc8 = Three ? sc8raw : _mm_and_si128(sc8raw, _mm_set1_epi8(0x0F));
    const __m256i sc_eo = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
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
            const __m256i s = _mm256_shuffle_epi8(sc_eo, _mm256_set1_epi16(static_cast<int16_t>((2 * p) | ((2 * p + 1) << 8))));
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
    static constexpr bool kPairs = false;
    static constexpr size_t kBytes = Three ? sizeof(ref::BlockQ3_K) : sizeof(ref::BlockQ2_K);
    template <int RM>
    MOE_AVX2 static void step(const uint8_t* const* row, int64_t b, const XRow* x, __m128* acc) {
        __m256i S[RM][kRows], M[RM][kRows];
        const uint8_t* blks[kRows];
        for (int i = 0; i < kRows; ++i) blks[i] = row[i] + b * static_cast<int64_t>(kBytes);
        const __m128 d = halves4(blks, Three ? 108 : 80);
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
            for (int r = 0; r < RM; ++r) S[r][i] = t[r], M[r][i] = Three ? t[r] : u[r];
        }
        for (int r = 0; r < RM; ++r) {
            const __m128 dx = _mm_set1_ps(x[r].dxv[64 * b]);
            acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(reduce4(S[r][0], S[r][1], S[r][2], S[r][3])), _mm_mul_ps(d, dx), acc[r]);
            if constexpr (!Three) {
                const __m128 dmin = halves4(blks, 82);
                acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(reduce4(M[r][0], M[r][1], M[r][2], M[r][3])), _mm_mul_ps(dmin, dx), acc[r]);
            }
        }
    }
};

// 16 bytes of nibbles at p as 32 levels [low nibbles | high nibbles], optionally through a 16-entry
// int8 table (MXFP4, IQ4_NL, IQ4_XS values).
MOE_AVX2 inline __m256i nibbles32(const uint8_t* p) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}
MOE_AVX2 inline __m256i table16(const int8_t* t) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
}

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

    MOE_AVX2 static __m256i values(const uint8_t* blk) {
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
    MOE_AVX2 static __m128 scales(const uint8_t* const* blk) {
        if constexpr (T == DType::MXFP4)
            return _mm_setr_ps(ref::e8m0_half(blk[0][0]), ref::e8m0_half(blk[1][0]), ref::e8m0_half(blk[2][0]),
                               ref::e8m0_half(blk[3][0]));
        else
            return halves4(blk, 0);
    }
    // Blocks g, g + 1 of one row as lo = [g values 0..15 | g + 1 values 0..15], hi = [.. 16..31 | ..].
    MOE_AVX2 static void values2(const uint8_t* b0, const uint8_t* b1, __m256i* lo, __m256i* hi) {
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
            auto hb = [&](int64_t b0i, int64_t b1i) MOE_AVX2 {
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
    MOE_AVX2 static void step2(const uint8_t* const* row, int64_t g, const XRow* x, __m128* acc) {
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
    MOE_AVX2 static void step(const uint8_t* const* row, int64_t g, const XRow* x, __m128* acc) {
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
    static constexpr bool kPairs = false;
    static constexpr size_t kBytes = sizeof(ref::BlockIQ4_XS);
    template <int RM>
    MOE_AVX2 static void step(const uint8_t* const* row, int64_t b, const XRow* x, __m128* acc) {
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

// ---------------------------------------------------------------- driver
// Activation rows in blocks of kActBlock (they stay in L2 while every 4-row weight group of the
// call passes over them), four at a time (the weight levels are split once for the four).
template <class Ty, int RM>
MOE_AVX2 inline void run_rows(const MatmulArgs& a, const Ctx& c, const uint8_t* const* row, int64_t r, int64_t n, int count) {
    XRow x[RM];
    __m128 acc[RM];
    for (int k = 0; k < RM; ++k) {
        const ref::ActQ8Row q = ref::act_q8_row(const_cast<unsigned char*>(c.act + (r + k) * c.act_stride), a.K);
        x[k] = {c.qs ? c.qs + (r + k) * a.K : q.qs, q.dxv, c.ns ? c.ns + (r + k) * c.ns_per_row : nullptr};
        acc[k] = _mm_setzero_ps();
    }
    const int64_t nb = a.K / Ty::kValues;
    // Decode streams the rows from DRAM; the 4 interleaved row streams defeat this CPU's
    // prefetchers (Zen 3: 4.1 GB/s on one thread without, 11.3 with, `moe bench --membw` 13.6):
    // fetch, spread over the group's steps, the group two ahead (rows are w_row_stride apart).
    // (Addresses past the matrix are only prefetched, never read: integer arithmetic, no pointer.)
    auto prefetch = [&](int64_t b, int64_t blocks) MOE_AVX2 {
        const uintptr_t p = reinterpret_cast<uintptr_t>(row[0]) + kPrefetchRows * a.w_row_stride + b * kRows * Ty::kBytes;
        for (size_t o = 0; o < blocks * kRows * Ty::kBytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
    };
    int64_t b = 0;
    if constexpr (Ty::kPairs)
        for (; b + 2 <= nb; b += 2) prefetch(b, 2), Ty::template step2<RM>(row, b, x, acc);
    for (; b < nb; ++b) prefetch(b, 1), Ty::template step<RM>(row, b, x, acc);
    for (int k = 0; k < RM; ++k) store_lanes(a.y + (r + k) * a.ldy + (n - a.n0), acc[k], count);
}

template <class Ty>
MOE_AVX2 void qmm_blocks(const MatmulArgs& a) {
    const Ctx c = make_ctx(a, Ty::kAct, Ty::kNsGroup, Ty::kPermute);
    for (int64_t r0 = 0; r0 < a.m; r0 += kActBlock) {
        const int64_t r1 = std::min(a.m, r0 + kActBlock);
        for (int64_t n = a.n0; n < a.n1; n += kRows) {
            const int count = static_cast<int>(std::min<int64_t>(kRows, a.n1 - n));
            const uint8_t* row[kRows];  // a short last group repeats its last row
            for (int i = 0; i < kRows; ++i)
                row[i] = static_cast<const uint8_t*>(a.w) + (n + std::min(i, count - 1)) * static_cast<int64_t>(a.w_row_stride);
            int64_t r = r0;
            for (; r + 4 <= r1; r += 4) run_rows<Ty, 4>(a, c, row, r, n, count);
            if (r + 2 <= r1) run_rows<Ty, 2>(a, c, row, r, n, count), r += 2;
            if (r < r1) run_rows<Ty, 1>(a, c, row, r, n, count);
        }
    }
}

}  // namespace

MatmulFn qmm_avx2_blocks_kernel(DType t) {
    if (!cpu_has_f16c()) return nullptr;  // every AVX2 CPU so far has it; else the generic path
    switch (t) {
        case DType::Q4_K: return qmm_blocks<Q45K<false>>;
        case DType::Q5_K: return qmm_blocks<Q45K<true>>;
        case DType::Q6_K: return qmm_blocks<Q6K>;
        case DType::Q2_K: return qmm_blocks<Q23K<false>>;
        case DType::Q3_K: return qmm_blocks<Q23K<true>>;
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
