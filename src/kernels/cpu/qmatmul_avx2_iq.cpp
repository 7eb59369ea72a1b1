// AVX2 block kernels for the grid-based IQ types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
// IQ1_M: the experts of most sub-3-bit MoE files, e.g. DeepSeek-V3 / R1 IQ1_S .. IQ3_XXS), the steps
// of qmatmul_avx2_blocks.h's driver. Without them a CPU without AVX-512 VNNI ran these types on the
// generic path (a scalar decode of every weight row, ~1.5 GMAC/s per thread at m = 1).
//
// Per 32-value block ib of a 256-value super-block, a type's `block` gives the 32 magnitudes as
// unsigned bytes (4 grid entries of 8, or 8 of 4: scalar loads, which beat the gathers on the AMD
// CPUs measured, docs/PERFORMANCE.md session 23) and a vpsignb operand (-1 / +1 per value); the
// activations take the signs (vpsignb) and I = vpmaddwd(vpmaddubsw(mag, x'), 1) is the chain's
// exact integer sum: |pair| <= 2 x 62 x 127 < 2^15, the kActQ8_K activations lie in -127..127.
// IQ1_S / IQ1_M values v = 8 g +- 1 (g in {-1, 0, 1}, never 0) go as |v| with v the sign operand. The f32 scales
// are the scalar decoders' expressions (qmatmul_decode_more.h), the chain per granule (32 values,
// or 16 for IQ2_XS, IQ2_S, IQ1_M) in K order: the scalar path's bits.
#include <vector>

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

// 4 sign bytes (byte l: bit j set = element j of group l negative) -> the vpsignb operand of the 32
// values: -1 where negative, +1 elsewhere.
MOE_AVX2_BLK inline __m256i sign_operand32(uint32_t s) {
    const __m256i rep = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(s)),
                                            _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
    return _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(rep, bit), bit), _mm256_set1_epi8(1));
}
MOE_AVX2_BLK inline __m256i grid4x8(const uint64_t* G, int i0, int i1, int i2, int i3) {
    return _mm256_setr_epi64x(static_cast<int64_t>(G[i0]), static_cast<int64_t>(G[i1]), static_cast<int64_t>(G[i2]),
                              static_cast<int64_t>(G[i3]));
}
MOE_AVX2_BLK inline __m256i grid8x4(const uint32_t* G, const int (&i)[8]) {
    return _mm256_setr_epi32(static_cast<int>(G[i[0]]), static_cast<int>(G[i[1]]), static_cast<int>(G[i[2]]), static_cast<int>(G[i[3]]),
                             static_cast<int>(G[i[4]]), static_cast<int>(G[i[5]]), static_cast<int>(G[i[6]]), static_cast<int>(G[i[7]]));
}
// ref::kIq1sGrid with every value times 8 (bytes -8, 0, 8), built once: an IQ1 value 8 g + delta is
// then one byte add (instead of a look-up of each byte).
const uint64_t* iq1_grid8() {
    static const std::vector<uint64_t> t = [] {
        std::vector<uint64_t> v(2048);
        for (int e = 0; e < 2048; ++e) {
            uint64_t x = 0;
            for (int j = 0; j < 8; ++j)
                x |= static_cast<uint64_t>(static_cast<uint8_t>(8 * static_cast<int8_t>(ref::grid_byte(ref::kIq1sGrid[e], j)))) << (8 * j);
            v[static_cast<size_t>(e)] = x;
        }
        return v;
    }();
    return t.data();
}
// IQ1 values v = 8 g + delta (never 0): magnitude |v|, sign operand v.
MOE_AVX2_BLK inline void iq1_values(__m256i g8, __m256i delta, __m256i* mag, __m256i* sgn) {
    const __m256i v = _mm256_add_epi8(g8, delta);
    *mag = _mm256_abs_epi8(v);
    *sgn = v;
}

// Per-super-block preparation (D::prep, once per row and super-block, before the 8 blocks): the
// index and sign work done for 32 entries at once in vectors instead of per entry with scalar
// shifts, stored in a small per-row array that the blocks then read with scalar loads (each load
// inside one earlier vector store, so it is forwarded).
// ref::iq_signs8_bytes on 32 bytes (the same shift / xor chain in 32-bit lanes): byte g of f = a
// 7-bit field, of the result = the field with its parity bit 7.
MOE_AVX2_BLK inline __m256i signs8_bytes32(__m256i f) {
    __m256i t = _mm256_xor_si256(f, _mm256_srli_epi32(f, 4));
    t = _mm256_xor_si256(t, _mm256_srli_epi32(t, 2));
    t = _mm256_xor_si256(t, _mm256_srli_epi32(t, 1));
    return _mm256_or_si256(f, _mm256_slli_epi32(_mm256_and_si256(t, _mm256_set1_epi8(1)), 7));
}
// 8 dwords of 4 7-bit sign fields each (IQ2_XXS, IQ3_XXS) -> 32 sign bytes with the parity bit 7.
MOE_AVX2_BLK inline void signs_from_fields(__m256i w, uint8_t* out) {
    const __m256i m7 = _mm256_set1_epi32(0x7F);
    __m256i f = _mm256_and_si256(w, m7);
    f = _mm256_or_si256(f, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w, 7), m7), 8));
    f = _mm256_or_si256(f, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w, 14), m7), 16));
    f = _mm256_or_si256(f, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w, 21), m7), 24));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out), signs8_bytes32(f));
}
// The 32 grid indices qs[e] | ((F[e / 4] >> sh[e % 4]) & mask) << 8 of a super-block (IQ2_S, IQ1_S,
// IQ1_M: the index's high bits packed per block in a field; F: the 8 blocks' fields as dwords).
MOE_AVX2_BLK inline void indices32(const uint8_t* qs, __m256i F, __m256i sh, int mask, uint32_t* idx) {
    for (int t = 0; t < 4; ++t) {  // entries 8 t .. 8 t + 7 = blocks 2 t, 2 t + 1
        const __m256i Fr = _mm256_permutevar8x32_epi32(F, _mm256_setr_epi32(2 * t, 2 * t, 2 * t, 2 * t, 2 * t + 1, 2 * t + 1, 2 * t + 1, 2 * t + 1));
        const __m256i h = _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(Fr, sh), _mm256_set1_epi32(mask)), 8);
        const __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8 * t)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 8 * t), _mm256_or_si256(q, h));
    }
}
struct SignPrep {
    alignas(32) uint8_t sg[32];  // sign byte of entry e (group of 8 values)
};
struct IndexPrep {
    alignas(32) uint32_t idx[32];
};
struct Iq1Prep : IndexPrep {
    const uint64_t* g8;  // iq1_grid8(), fetched once per super-block rather than per block
};

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
// granule for the 4 rows: w[0], and w[1] for 16-value granules), prep(b, p) (a row's super-block
// work shared by its 8 blocks, into Prep p) and block(b, p, ib, mag, sgn).
struct IQ2XXS {
    static constexpr size_t kBytes = sizeof(ref::BlockIQ2_XXS);
    static constexpr int kG = 32;
    using Prep = SignPrep;
    MOE_AVX2_BLK static __m128 d4(const uint8_t* const* blk) { return halves4(blk, 0); }
    MOE_AVX2_BLK static void scales(const uint8_t* const* blk, int ib, __m128 d, __m128* w) {
        w[0] = db_iq2x4(d, _mm_srli_epi32(rows4<uint32_t>(blk, 2 + 8 * ib + 4), 28));
    }
    // the sign words a1 are the odd dwords of the 8 (a0, a1) pairs: blocks (0, 1, 4, 5 | 2, 3, 6, 7) -> in order
    MOE_AVX2_BLK static void prep(const uint8_t* b, Prep& p) {
        const __m256 A = _mm256_loadu_ps(reinterpret_cast<const float*>(b + 2)), B = _mm256_loadu_ps(reinterpret_cast<const float*>(b + 34));
        signs_from_fields(_mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(A, B, 0xDD)), 0xD8), p.sg);
    }
    MOE_AVX2_BLK static void block(const uint8_t* b, const Prep& p, int ib, __m256i* mag, __m256i* sgn) {
        const uint8_t* q = b + 2 + 8 * ib;
        *mag = grid4x8(ref::kIq2xxsGrid, q[0], q[1], q[2], q[3]);
        *sgn = sign_operand32(load_as<uint32_t>(p.sg + 4 * ib));
    }
};
struct IQ2XS {
    static constexpr size_t kBytes = sizeof(ref::BlockIQ2_XS);
    static constexpr int kG = 16;
    struct Prep {
        alignas(32) uint16_t idx[32];
        alignas(32) uint8_t sg[32];
    };
    MOE_AVX2_BLK static __m128 d4(const uint8_t* const* blk) { return halves4(blk, 0); }
    MOE_AVX2_BLK static void scales(const uint8_t* const* blk, int ib, __m128 d, __m128* w) { nibble_scales(rows4<uint8_t>(blk, 66 + ib), d, w); }
    // 32 u16 = 9-bit index | 7 sign bits << 9
    MOE_AVX2_BLK static void prep(const uint8_t* b, Prep& p) {
        const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)), q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 34));
        const __m256i m9 = _mm256_set1_epi16(511);
        _mm256_store_si256(reinterpret_cast<__m256i*>(p.idx), _mm256_and_si256(q0, m9));
        _mm256_store_si256(reinterpret_cast<__m256i*>(p.idx + 16), _mm256_and_si256(q1, m9));
        const __m256i f = _mm256_permute4x64_epi64(_mm256_packus_epi16(_mm256_srli_epi16(q0, 9), _mm256_srli_epi16(q1, 9)), 0xD8);
        _mm256_store_si256(reinterpret_cast<__m256i*>(p.sg), signs8_bytes32(f));
    }
    MOE_AVX2_BLK static void block(const uint8_t*, const Prep& p, int ib, __m256i* mag, __m256i* sgn) {
        const uint16_t* e = p.idx + 4 * ib;
        *mag = grid4x8(ref::kIq2xsGrid, e[0], e[1], e[2], e[3]);
        *sgn = sign_operand32(load_as<uint32_t>(p.sg + 4 * ib));
    }
};
struct IQ2S {
    static constexpr size_t kBytes = sizeof(ref::BlockIQ2_S);
    static constexpr int kG = 16;
    using Prep = IndexPrep;
    MOE_AVX2_BLK static __m128 d4(const uint8_t* const* blk) { return halves4(blk, 0); }
    MOE_AVX2_BLK static void scales(const uint8_t* const* blk, int ib, __m128 d, __m128* w) { nibble_scales(rows4<uint8_t>(blk, 74 + ib), d, w); }
    MOE_AVX2_BLK static void prep(const uint8_t* b, Prep& p) {  // entry 4 ib + k: bits 2 k, 2 k + 1 of qh[ib]
        indices32(b + 2, _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 66))), _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6), 3, p.idx);
    }
    MOE_AVX2_BLK static void block(const uint8_t* b, const Prep& p, int ib, __m256i* mag, __m256i* sgn) {
        const uint32_t* e = p.idx + 4 * ib;
        *mag = grid4x8(ref::kIq2sGrid, static_cast<int>(e[0]), static_cast<int>(e[1]), static_cast<int>(e[2]), static_cast<int>(e[3]));
        *sgn = sign_operand32(load_as<uint32_t>(b + 34 + 4 * ib));
    }
};
struct IQ3XXS {
    static constexpr size_t kBytes = sizeof(ref::BlockIQ3_XXS);
    static constexpr int kG = 32;
    using Prep = SignPrep;
    MOE_AVX2_BLK static __m128 d4(const uint8_t* const* blk) { return halves4(blk, 0); }
    MOE_AVX2_BLK static void scales(const uint8_t* const* blk, int ib, __m128 d, __m128* w) {  // d (0.5 + s) / 2
        const __m128 s = _mm_cvtepi32_ps(_mm_srli_epi32(rows4<uint32_t>(blk, 66 + 4 * ib), 28));
        w[0] = _mm_mul_ps(_mm_mul_ps(d, _mm_add_ps(_mm_set1_ps(0.5f), s)), _mm_set1_ps(0.5f));
    }
    MOE_AVX2_BLK static void prep(const uint8_t* b, Prep& p) { signs_from_fields(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 66)), p.sg); }
    MOE_AVX2_BLK static void block(const uint8_t* b, const Prep& p, int ib, __m256i* mag, __m256i* sgn) {
        const uint8_t* q = b + 2 + 8 * ib;
        const int i[8] = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
        *mag = grid8x4(ref::kIq3xxsGrid, i);
        *sgn = sign_operand32(load_as<uint32_t>(p.sg + 4 * ib));
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
    struct Prep {};
    MOE_AVX2_BLK static void prep(const uint8_t*, Prep&) {}
    MOE_AVX2_BLK static void block(const uint8_t* b, const Prep&, int ib, __m256i* mag, __m256i* sgn) {
        const uint8_t* q = b + 2 + 8 * ib;
        // index k = q[k] | bit k of qh[ib] << 8, built in a vector and stored (scalar shifts per
        // entry: 0.57x; the same for the 4-entry types was slower, 0.7-0.98x)
        const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b[66 + ib] << 8), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                                            _mm256_set1_epi32(0x100));
        alignas(32) int i[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(i), _mm256_or_si256(lo, hi));
        *mag = grid8x4(ref::kIq3sGrid, i);
        *sgn = sign_operand32(load_as<uint32_t>(b + 74 + 4 * ib));
    }
};
struct IQ1S {
    static constexpr size_t kBytes = sizeof(ref::BlockIQ1_S);
    static constexpr int kG = 32;
    using Prep = Iq1Prep;
    MOE_AVX2_BLK static __m128 d4(const uint8_t* const* blk) { return halves4(blk, 0); }
    MOE_AVX2_BLK static void scales(const uint8_t* const* blk, int ib, __m128 d, __m128* w) {  // d (2 s + 1) / 8
        w[0] = eighths(d, _mm_and_si128(_mm_srli_epi32(rows4<uint16_t>(blk, 34 + 2 * ib), 12), _mm_set1_epi32(7)));
    }
    MOE_AVX2_BLK static void prep(const uint8_t* b, Prep& p) {  // entry 4 ib + k: bits 3 k.. of qh[ib]
        p.g8 = iq1_grid8();
        indices32(b + 2, _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 34))), _mm256_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9), 7, p.idx);
    }
    MOE_AVX2_BLK static void block(const uint8_t* b, const Prep& p, int ib, __m256i* mag, __m256i* sgn) {
        const uint32_t* e = p.idx + 4 * ib;
        const __m256i g = grid4x8(p.g8, static_cast<int>(e[0]), static_cast<int>(e[1]), static_cast<int>(e[2]), static_cast<int>(e[3]));
        iq1_values(g, _mm256_set1_epi8((load_as<uint16_t>(b + 34 + 2 * ib) & 0x8000) ? -1 : 1), mag, sgn);
    }
};
struct IQ1M {
    static constexpr size_t kBytes = sizeof(ref::BlockIQ1_M);
    static constexpr int kG = 16;
    using Prep = Iq1Prep;
    MOE_AVX2_BLK static __m128 d4(const uint8_t* const* blk) {
        return _mm_setr_ps(fp16_to_fp32(ref::iq1_m_scale_bits(blk[0] + 48)), fp16_to_fp32(ref::iq1_m_scale_bits(blk[1] + 48)),
                           fp16_to_fp32(ref::iq1_m_scale_bits(blk[2] + 48)), fp16_to_fp32(ref::iq1_m_scale_bits(blk[3] + 48)));
    }
    MOE_AVX2_BLK static void scales(const uint8_t* const* blk, int ib, __m128 d, __m128* w) {  // d (2 s + 1) / 8 per 16 values
        const __m128i v = _mm_srli_epi32(rows4<uint16_t>(blk, 48 + 2 * (ib / 2)), 6 * (ib % 2)), m7 = _mm_set1_epi32(7);
        w[0] = eighths(d, _mm_and_si128(v, m7));
        w[1] = eighths(d, _mm_and_si128(_mm_srli_epi32(v, 3), m7));
    }
    // entry 4 ib + k: nibble k of the u16 qh word ib (bits 0-2: index bits 8-10, bit 3: the entry's
    // delta sign), kept whole: idx bit 11 = the delta sign
    MOE_AVX2_BLK static void prep(const uint8_t* b, Prep& p) {
        p.g8 = iq1_grid8();
        indices32(b, _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 32))), _mm256_setr_epi32(0, 4, 8, 12, 0, 4, 8, 12), 15, p.idx);
    }
    MOE_AVX2_BLK static void block(const uint8_t*, const Prep& p, int ib, __m256i* mag, __m256i* sgn) {
        const uint32_t* e = p.idx + 4 * ib;
        const __m256i g = grid4x8(p.g8, static_cast<int>(e[0] & 0x7FF), static_cast<int>(e[1] & 0x7FF), static_cast<int>(e[2] & 0x7FF),
                                  static_cast<int>(e[3] & 0x7FF));
        // delta per entry: bytes 0xFF (bit 11 set: -1) or 0x01, 8 per entry
        const __m128i s = _mm_cmpeq_epi32(_mm_and_si128(_mm_load_si128(reinterpret_cast<const __m128i*>(e)), _mm_set1_epi32(0x800)), _mm_set1_epi32(0x800));
        iq1_values(g, _mm256_or_si256(_mm256_cvtepi32_epi64(s), _mm256_set1_epi8(1)), mag, sgn);
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
        typename D::Prep pp[kRows];
        for (int i = 0; i < kRows; ++i) D::prep(blks[i], pp[i]);
        for (int ib = 0; ib < 8; ++ib) {
            __m256i xv[RM], I[RM][kRows];
            for (int r = 0; r < RM; ++r) xv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].qs + 256 * b + 32 * ib));
            for (int i = 0; i < kRows; ++i) {
                __m256i mag, sgn;
                D::block(blks[i], pp[i], ib, &mag, &sgn);
                for (int r = 0; r < RM; ++r)
                    I[r][i] = _mm256_madd_epi16(_mm256_maddubs_epi16(mag, _mm256_sign_epi8(xv[r], sgn)), ones);
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
