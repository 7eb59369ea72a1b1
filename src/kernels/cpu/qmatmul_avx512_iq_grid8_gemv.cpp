// AVX-512 VBMI decode GEMVs (m <= 2 calls) of the IQ types whose grid entries hold 8 values and
// whose index has more than 8 bits: IQ2_XS (9 bits), IQ2_S (10), IQ1_S and IQ1_M (11). The grid is
// looked up in registers, as for IQ2_XXS / IQ3 (qmatmul_avx512_iq_gemv.cpp), instead of by 8 scalar
// loads and inserts per 64 values (direct_row's decoders in qmatmul_avx512_iq.cpp, which stay the
// prefill path and the path of CPUs without AVX512_VBMI / BITALG / GFNI): each entry's 8 values are
// 2-bit codes (IQ2: magnitude 8, 25, 43; IQ1: value -1, 0, +1), a 16-bit code word split into a
// low-byte and a high-byte table of 256 entries per value of the index's high bits (2, 4 or 8
// sub-tables, vpermi2b from L1, merged by the high bits as masks).
//
// Layout, per pair of rows (64 entries = the two rows' super-blocks, byte p: row p / 32, entry p % 32):
//   - W0 / W1 = the code bytes unpacked into words: lane L word i = entry 16 (L % 2) + 8 W + i of
//     row L / 2, so each qword holds 4 entries;
//   - per element pair jp (elements 2 jp, 2 jp + 1) one vpmultishiftqb puts, per qword, the codes
//     [e0.2jp, e0.2jp+1, e1.2jp, e1.2jp+1, e2.., e3..] in bytes, one vgf2p8affineqb maps them to
//     unsigned weights; a vpdpbusd dword then sums 2 entries x 2 elements, inside one 16-value group;
//   - the activations are regrouped once per super-block to match (8 vectors, shared by the rows);
//   - IQ2 signs negate the activations (vpshufbitqmb masks from the sign bits placed in each word's
//     high byte, IQ2_XS's parity bit by vgf2p8affineqb); IQ1's delta (+-1/8 per entry) is bit 1 of
//     the unsigned weight 8 c + 1 + delta, the weight w = 8 (c - 1) + delta = u - 9, so the exact
//     integer sum is the vpdpbusd sum + 9 x nsum (nsum = -sum x of the group). IQ1_S, whose delta
//     is one per 32-value granule, takes every weight as 8 c + 2 and adds 2 x nsum to the granules
//     with delta -1/8 instead (1.09x its per-weight form, kernel alone).
// Per super-block the two rows' 16-group sums are put row-major and the 16 rows transposed
// (transpose16) to one vector per group, lane c = row c; then the f32 chain of qmatmul.h per
// granule (16 values; IQ1_S 32) in K order, the scalar decoders' f32 scale steps: the same bits as
// the scalar path (tests/kernels/test_matmul_quant.cpp DecodeGemvEqualsBatchedAndScalar).
#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/fp16.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_decode.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quantize_act.h"
#include "kernels/cpu/isa_target.h"

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2,bmi2,avx512vbmi,avx512bitalg,gfni")
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm*_undefined_* helpers (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/qmatmul_avx512.h"

namespace moe::kernels::avx512 {

namespace {

// Code tables of a 64-bit grid (byte j of an entry = element j): code(b) maps an element byte to
// its 2-bit code; lo[e] = codes of elements 0-3, hi[e] = elements 4-7 (element j at bits 2 (j % 4)).
template <int N>
struct Grid8Codes {
    alignas(64) uint8_t lo[N], hi[N];
    template <class F>
    Grid8Codes(const uint64_t* grid, F code) {
        for (int e = 0; e < N; ++e) {
            unsigned c = 0;
            for (int j = 0; j < 8; ++j) c |= code(ref::grid_byte(grid[e], j)) << (2 * j);
            lo[e] = static_cast<uint8_t>(c);
            hi[e] = static_cast<uint8_t>(c >> 8);
        }
    }
};
inline unsigned iq2_code(uint8_t m) { return m == 8 ? 0u : m == 25 ? 1u : 2u; }
inline unsigned iq1_code(uint8_t v) { return static_cast<unsigned>(static_cast<int8_t>(v) + 1); }

// 64 entries' code bytes from NS sub-tables of 256 (tab: NS x 256 bytes): sub-table s = the index's
// high bits, hb[b] bit p = bit b of entry p's s; idx = the low 8 bits.
template <int NS>
inline __m512i lookup_codes(const uint8_t* tab, __m512i idx, const __mmask64* hb) {
    const __mmask64 b7 = _mm512_movepi8_mask(idx);
    __m512i L[NS];
    for (int s = 0; s < NS; ++s) {
        const uint8_t* t = tab + 256 * s;
        const __m512i a = _mm512_permutex2var_epi8(_mm512_load_si512(t), idx, _mm512_load_si512(t + 64));
        const __m512i b = _mm512_permutex2var_epi8(_mm512_load_si512(t + 128), idx, _mm512_load_si512(t + 192));
        L[s] = _mm512_mask_blend_epi8(b7, a, b);
    }
    for (int lvl = 0, n = NS; n > 1; ++lvl, n /= 2)
        for (int t = 0; t < n / 2; ++t) L[t] = _mm512_mask_blend_epi8(hb[lvl], L[2 * t], L[2 * t + 1]);
    return L[0];
}

// Constant control vectors of the layout (see the header comment).
struct Grid8Consts {
    __m512i wctrl[4];   // vpmultishiftqb: per qword byte k = bit 16 (k / 2) + 4 jp + 2 (k % 2)
    __m512i actrl[8];   // [4 W + jp] vpermi2b into 128 activations: 64 W + 32 q + 8 (k / 2) + 2 jp + k % 2
    __m512i ssel[4];    // sign of byte k: bit 16 (k / 2) + 8 + 2 jp + k % 2 (the word's high byte)
    __m512i dsel;       // IQ1 delta of byte k: bit 16 (k / 2) + 3 (bit 3 of the word's low byte)
    __m512i hctrl[2];   // entry byte vector -> W arrangement: byte 16 L + 2 i + {0, 1} <- 32 (L / 2) + 16 (L % 2) + 8 W + i
    Grid8Consts() {
        alignas(64) uint8_t b[64];
        for (int jp = 0; jp < 4; ++jp) {
            for (int i = 0; i < 64; ++i) b[i] = static_cast<uint8_t>(16 * ((i % 8) / 2) + 4 * jp + 2 * (i % 2));
            wctrl[jp] = _mm512_load_si512(b);
            for (int i = 0; i < 64; ++i) b[i] = static_cast<uint8_t>(16 * ((i % 8) / 2) + 8 + 2 * jp + i % 2);
            ssel[jp] = _mm512_load_si512(b);
            for (int W = 0; W < 2; ++W) {
                for (int i = 0; i < 64; ++i) {
                    const int q = (i / 8) % 2, k = i % 8;
                    b[i] = static_cast<uint8_t>(64 * W + 32 * q + 8 * (k / 2) + 2 * jp + k % 2);
                }
                actrl[4 * W + jp] = _mm512_load_si512(b);
            }
        }
        for (int i = 0; i < 64; ++i) b[i] = static_cast<uint8_t>(16 * ((i % 8) / 2) + 3);
        dsel = _mm512_load_si512(b);
        for (int W = 0; W < 2; ++W) {
            for (int i = 0; i < 64; ++i) {
                const int L = i / 16, w = (i % 16) / 2;
                b[i] = static_cast<uint8_t>(32 * (L / 2) + 16 * (L % 2) + 8 * W + w);
            }
            hctrl[W] = _mm512_load_si512(b);
        }
    }
};
const Grid8Consts& grid8_consts() {
    static const Grid8Consts t;
    return t;
}

// What a type gives the driver for a pair of rows (a, b) at super-block byte offset off:
//   idx: the 64 low index bytes; hb[0..2]: the index's high bits as masks;
//   mod: IQ2: sign bytes in the W arrangement's word high bytes, per W; IQ1_M: delta bytes (bit 3 =
//   negative) in the word low bytes, per W; IQ1_S: unused (its delta is applied per granule).
struct PairIn {
    __m512i idx;
    __mmask64 hb[3] = {0, 0, 0};
    __m512i mod[2];
};

// IQ2_XS (74 bytes: d, qs[32] u16 = 9-bit index | 7 sign bits << 9, scales[8] nibbles per 16).
struct G8IQ2XS {
    static constexpr int kSub = 2, kBytes = 74, kScaleOff = 66;
    static constexpr bool kIq1 = false, kDeltaPerGranule = false;
    static const Grid8Codes<512>& codes() {
        static const Grid8Codes<512> t(ref::kIq2xsGrid, iq2_code);
        return t;
    }
    static PairIn pair(const uint8_t* a, const uint8_t* b, const Grid8Consts&) {
        const __m512i Qa = _mm512_loadu_si512(a + 2), Qb = _mm512_loadu_si512(b + 2);
        PairIn in;
        // low bytes of the 64 words: vpermi2b index 2 p
        in.idx = _mm512_permutex2var_epi8(Qa, _mm512_set_epi64(0x7E7C7A7876747270ll, 0x6E6C6A6866646260ll, 0x5E5C5A5856545250ll, 0x4E4C4A4846444240ll,
                                                                0x3E3C3A3836343230ll, 0x2E2C2A2826242220ll, 0x1E1C1A1816141210ll, 0x0E0C0A0806040200ll),
                                          Qb);
        const __m512i b8 = _mm512_set1_epi16(0x100);
        in.hb[0] = _mm512_kunpackd(_mm512_test_epi16_mask(Qb, b8), _mm512_test_epi16_mask(Qa, b8));
        // the words in the W arrangement (lanes: a 0-7 / 16-23, b 0-7 / 16-23 for W = 0), then the
        // high byte = the 7 sign bits and their parity bit 7 (bit matrix)
        const __m512i sgn = _mm512_set1_epi64(0x02040810204080FEll);
        in.mod[0] = _mm512_gf2p8affine_epi64_epi8(_mm512_shuffle_i64x2(Qa, Qb, 0x88), sgn, 0);
        in.mod[1] = _mm512_gf2p8affine_epi64_epi8(_mm512_shuffle_i64x2(Qa, Qb, 0xDD), sgn, 0);
        return in;
    }
};

// IQ2_S (82 bytes: d, qs[32] low index bytes, signs[32], qh[8] (2 high bits per entry), scales[8]).
struct G8IQ2S {
    static constexpr int kSub = 4, kBytes = 82, kScaleOff = 74;
    static constexpr bool kIq1 = false, kDeltaPerGranule = false;
    static const Grid8Codes<1024>& codes() {
        static const Grid8Codes<1024> t(ref::kIq2sGrid, iq2_code);
        return t;
    }
    static PairIn pair(const uint8_t* a, const uint8_t* b, const Grid8Consts& cc) {
        PairIn in;
        in.idx = cat256(load256(a + 2), load256(b + 2));
        uint64_t qa, qb;
        std::memcpy(&qa, a + 66, 8);
        std::memcpy(&qb, b + 66, 8);
        in.hb[0] = _pext_u64(qa, 0x5555555555555555ull) | (_pext_u64(qb, 0x5555555555555555ull) << 32);
        in.hb[1] = _pext_u64(qa, 0xAAAAAAAAAAAAAAAAull) | (_pext_u64(qb, 0xAAAAAAAAAAAAAAAAull) << 32);
        const __m512i S = cat256(load256(a + 34), load256(b + 34));  // sign byte per entry
        in.mod[0] = _mm512_permutexvar_epi8(cc.hctrl[0], S);
        in.mod[1] = _mm512_permutexvar_epi8(cc.hctrl[1], S);
        return in;
    }
};

// IQ1_M (56 bytes: qs[32] low index bytes, qh[16] (nibble per entry: bits 0-2 high index bits, bit
// 3 delta negative), scales[8] (3-bit scales per 16, the f16 d in the words' top nibbles)).
struct G8IQ1M {
    static constexpr int kSub = 8, kBytes = 56;
    static constexpr bool kIq1 = true, kDeltaPerGranule = false;
    static const Grid8Codes<2048>& codes() {
        static const Grid8Codes<2048> t(ref::kIq1sGrid, iq1_code);
        return t;
    }
    static PairIn pair(const uint8_t* a, const uint8_t* b, const Grid8Consts& cc) {
        PairIn in;
        in.idx = cat256(load256(a), load256(b));
        // nibbles -> bytes in entry order: word e' = byte e' -> (lo nibble, hi nibble)
        const auto nib = [](const uint8_t* p) {
            const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
            return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi16(0x0F)), _mm256_and_si256(_mm256_slli_epi16(v, 4), _mm256_set1_epi16(0x0F00)));
        };
        const __m512i H = cat256(nib(a + 32), nib(b + 32));
        for (int t = 0; t < 3; ++t) in.hb[t] = _mm512_test_epi8_mask(H, _mm512_set1_epi8(static_cast<char>(1 << t)));
        in.mod[0] = _mm512_permutexvar_epi8(cc.hctrl[0], H);
        in.mod[1] = _mm512_permutexvar_epi8(cc.hctrl[1], H);
        return in;
    }
};

// IQ1_S (50 bytes: d, qs[32] low index bytes, qh[8] u16: bits 3 k.. the high index bits of entry
// 4 ib + k, bits 12-14 the scale, bit 15 delta negative, per 32 values).
struct G8IQ1S {
    static constexpr int kSub = 8, kBytes = 50;
    static constexpr bool kIq1 = true, kDeltaPerGranule = true;
    static const Grid8Codes<2048>& codes() { return G8IQ1M::codes(); }
    static PairIn pair(const uint8_t* a, const uint8_t* b, const Grid8Consts&) {
        PairIn in;
        in.idx = cat256(load256(a + 2), load256(b + 2));
        // qword t of V: the u16 pair of granules 2 (t % 4), 2 (t % 4) + 1 of row t / 4; per entry byte
        // k of qword t (entry 8 (t % 4) + k) the high bits at 16 (k / 4) + 3 (k % 4). The delta, one
        // per 32-value granule, is applied to the granule sums (grid8_sb), not per weight.
        const __m512i Q = _mm512_castsi256_si512(cat128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 34)),
                                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 34))));
        const __m512i V = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), Q);
        const __m512i Hh = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x1916131009060300ll), V);
        for (int t = 0; t < 3; ++t) in.hb[t] = _mm512_test_epi8_mask(Hh, _mm512_set1_epi8(static_cast<char>(1 << t)));
        return in;
    }
    static __m256i cat128(__m128i lo, __m128i hi) { return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1); }
};

// The 16 rows' f32 scale vectors of a super-block: ws[g] lane c = row c's scale of granule g (16
// values; IQ1_S: 32) with the scalar decoders' f32 steps.
// IQ1_S also gives dneg[ib] (lane c: row c's granule ib has delta -1/8).
template <class Tr>
inline void scales16(const uint8_t* const* w, __m512i rows, int64_t off, __m512 ws[16], __mmask16 dneg[8]) {
    if constexpr (std::is_same_v<Tr, G8IQ1S>) {
        const __m512 d = f16_lo(_mm512_i32gather_epi32(rows, w[0] + off, 1));
        __m512i T[4];
        dwords16(w, off + 34, 0xFFFF, T);  // T[k] lane c: qh[2 k] | qh[2 k + 1] << 16 of row c
        for (int ib = 0; ib < 8; ++ib) {
            dneg[ib] = _mm512_test_epi32_mask(T[ib / 2], _mm512_set1_epi32(ib % 2 ? static_cast<int>(0x80000000u) : 0x8000));
            const __m512i s = _mm512_and_si512(_mm512_srli_epi32(T[ib / 2], 12 + 16 * (ib % 2)), _mm512_set1_epi32(7));
            const __m512 odd = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(s, 1), _mm512_set1_epi32(1)));
            ws[ib] = _mm512_mul_ps(_mm512_mul_ps(d, odd), _mm512_set1_ps(0.125f));
        }
    } else if constexpr (std::is_same_v<Tr, G8IQ1M>) {
        __m512i T[4];
        dwords16(w, off + 48, 0xFF, T);  // T[0]: words 0, 1; T[1]: words 2, 3
        // d's f16 bits: the top nibble of word i at bits 4 i
        const __m512i top = _mm512_set1_epi32(0xF000);
        const __m512i db = _mm512_or_si512(
            _mm512_or_si512(_mm512_srli_epi32(_mm512_and_si512(T[0], top), 12), _mm512_srli_epi32(_mm512_and_si512(_mm512_srli_epi32(T[0], 16), top), 8)),
            _mm512_or_si512(_mm512_srli_epi32(_mm512_and_si512(T[1], top), 4), _mm512_and_si512(_mm512_srli_epi32(T[1], 16), top)));
        const __m512 d = f16_lo(db);
        for (int g = 0; g < 16; ++g) {
            const __m512i word = (g / 4) % 2 ? _mm512_srli_epi32(T[g / 8], 16) : T[g / 8];
            const __m512i s = _mm512_and_si512(_mm512_srli_epi32(word, 3 * (g % 4)), _mm512_set1_epi32(7));
            const __m512 odd = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(s, 1), _mm512_set1_epi32(1)));
            ws[g] = _mm512_mul_ps(_mm512_mul_ps(d, odd), _mm512_set1_ps(0.125f));
        }
    } else {  // IQ2: d (0.5 + s) / 4, nibble g of the 8 scale bytes
        const __m512 d = f16_lo(_mm512_i32gather_epi32(rows, w[0] + off, 1));
        __m512i T[4];
        dwords16(w, off + Tr::kScaleOff, 0xFF, T);
        for (int g = 0; g < 16; ++g) {
            const __m512 s = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(T[g / 8], 4 * (g % 8)), _mm512_set1_epi32(0xF)));
            ws[g] = _mm512_mul_ps(_mm512_mul_ps(d, _mm512_add_ps(_mm512_set1_ps(0.5f), s)), _mm512_set1_ps(0.25f));
        }
    }
}

template <class Tr>
void grid8_sb(const uint8_t* const* w, __m512i rows, const ref::ActQ8Row& x, int64_t sb, const PanelShare& ps, __m512& acc) {
    const int64_t off = sb * Tr::kBytes;
    const Grid8Consts& cc = grid8_consts();
    const auto& tc = Tr::codes();
    // IQ2: magnitudes 8 ^ 17 c0 ^ 35 c1 = 8, 25, 43; IQ1: 8 c + 2 (c0 -> bit 3, c1 -> bit 4)
    const __m512i magm = _mm512_set1_epi64(Tr::kIq1 ? 0x0000000102000000ll : 0x0302000001020000ll);
    // activations regrouped: X[4 W + jp], lanes L % 2 = 0 from values 0-127, 1 from 128-255
    __m512i X[8];
    {
        const int8_t* xq = x.qs + 256 * sb;
        const __m512i x0 = _mm512_loadu_si512(xq), x1 = _mm512_loadu_si512(xq + 64);
        const __m512i x2 = _mm512_loadu_si512(xq + 128), x3 = _mm512_loadu_si512(xq + 192);
        for (int i = 0; i < 8; ++i)
            X[i] = _mm512_mask_blend_epi8(0xFFFF0000FFFF0000ull, _mm512_permutex2var_epi8(x0, cc.actrl[i], x1),
                                          _mm512_permutex2var_epi8(x2, cc.actrl[i], x3));
    }
    __m512i R[16];  // row c's 16 group sums (row-major)
#pragma GCC unroll 2
    for (int pr = 0; pr < 8; ++pr) {
        prefetch_share(ps, pr, 8);
        const PairIn in = Tr::pair(w[2 * pr] + off, w[2 * pr + 1] + off, cc);
        const __m512i lo = lookup_codes<Tr::kSub>(tc.lo, in.idx, in.hb), hi = lookup_codes<Tr::kSub>(tc.hi, in.idx, in.hb);
        __m512i D[2];
#pragma GCC unroll 2
        for (int W = 0; W < 2; ++W) {
            const __m512i Z = W ? _mm512_unpackhi_epi8(lo, hi) : _mm512_unpacklo_epi8(lo, hi);
            __mmask64 dm = 0;  // IQ1_M: the entries whose delta is -1/8 (IQ1_S: per granule, below)
            if constexpr (Tr::kIq1 && !Tr::kDeltaPerGranule) dm = _mm512_bitshuffle_epi64_mask(in.mod[W], cc.dsel);
            __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int jp = 0; jp < 4; ++jp) {
                const __m512i m = _mm512_gf2p8affine_epi64_epi8(_mm512_multishift_epi64_epi8(cc.wctrl[jp], Z), magm, Tr::kIq1 ? 2 : 8);
                if constexpr (Tr::kDeltaPerGranule) {
                    s = _mm512_dpbusd_epi32(s, m, X[4 * W + jp]);
                } else if constexpr (Tr::kIq1) {
                    s = _mm512_dpbusd_epi32(s, _mm512_mask_sub_epi8(m, dm, m, _mm512_set1_epi8(2)), X[4 * W + jp]);
                } else {
                    const __mmask64 sm = _mm512_bitshuffle_epi64_mask(in.mod[W], cc.ssel[jp]);
                    s = _mm512_dpbusd_epi32(s, m, _mm512_mask_sub_epi8(X[4 * W + jp], sm, _mm512_setzero_si512(), X[4 * W + jp]));
                }
            }
            D[W] = s;  // lane L dword d: row L / 2, group 8 (L % 2) + 4 W + d
        }
        R[2 * pr] = _mm512_permutex2var_epi64(D[0], _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), D[1]);
        R[2 * pr + 1] = _mm512_permutex2var_epi64(D[0], _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15), D[1]);
    }
    __m512i G[16];
    transpose16(R, G);  // G[g] lane c: row c's sum of group g
    __m512 ws[16];
    __mmask16 dneg[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    scales16<Tr>(w, rows, off, ws, dneg);
    constexpr int kGroups = std::is_same_v<Tr, G8IQ1S> ? 8 : 16, kPer = 16 / kGroups;
#pragma GCC unroll 16
    for (int k = 0; k < kGroups; ++k) {
        const int64_t i16 = 16 * sb + kPer * k;  // first 16-value group of the granule in the row
        __m512i I = kPer == 2 ? _mm512_add_epi32(G[2 * k], G[2 * k + 1]) : G[k];
        if constexpr (Tr::kIq1) {
            int32_t ns = x.nsum[4 * i16];
            if (kPer == 2) ns += x.nsum[4 * i16 + 4];
            I = _mm512_add_epi32(I, _mm512_set1_epi32(9 * ns));
            // IQ1_S: the weights were taken as u = 8 c + 2 (delta +1/8); w = u - 10 + delta, so a
            // granule with delta -1/8 adds 2 nsum more
            if constexpr (Tr::kDeltaPerGranule) I = _mm512_mask_add_epi32(I, dneg[k], I, _mm512_set1_epi32(2 * ns));
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(ws[k], _mm512_set1_ps(x.dxv[4 * i16])), acc);
    }
}

}  // namespace

__attribute__((noinline)) void gemv16_iq2xs(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    gemv16_k256<grid8_sb<G8IQ2XS>>(a, x, r, n, nc);
}
__attribute__((noinline)) void gemv16_iq2s(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    gemv16_k256<grid8_sb<G8IQ2S>>(a, x, r, n, nc);
}
__attribute__((noinline)) void gemv16_iq1s(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    gemv16_k256<grid8_sb<G8IQ1S>>(a, x, r, n, nc);
}
__attribute__((noinline)) void gemv16_iq1m(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    gemv16_k256<grid8_sb<G8IQ1M>>(a, x, r, n, nc);
}

}  // namespace moe::kernels::avx512

#pragma GCC diagnostic pop
MOE_TARGET_POP
