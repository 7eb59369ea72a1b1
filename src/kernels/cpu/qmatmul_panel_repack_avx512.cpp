// AVX-512 load-time repack of whole 16-row panels (qmatmul_panel_layout.h) for Q8_0 (any K % 32 == 0), Q4_K, Q6_K
// and MXFP4 (any K % 32 == 0):
// the same bytes as the scalar repack_panel, which stays the reference (test_panel_repack).
// Why: --repack / --repack-experts repack every weight at load, and the scalar byte-by-byte
// transposition ran at ~0.75 GB/s per core (a 6.9 GiB Q8_0 file: 9 s with the page cache warm,
// docs/PERFORMANCE.md). The panel's level vectors are a 16-row transposition of 4-byte groups
// (byte 4 c + i = a byte of row c), which is one dword gather per 64-byte vector: lane c reads
// row c at the same offset.
#include <immintrin.h>

#include <climits>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/cpu/isa_target.h"

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx2")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 on its own gather intrinsics
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace moe::kernels::panel {

namespace {

#include "kernels/cpu/q4k_scales_avx512.inc"  // q4k_scales_pack

// Dword at byte `off` of each of the 16 rows (lane c = row c); idx = c * row_stride.
inline __m512i rows_dword(const uint8_t* rows, __m512i idx, size_t off) {
    return _mm512_i32gather_epi32(idx, rows + off, 1);
}

// Q8_0: levels [nb blocks][8 quads qi][64], byte 4 c + i = q[4 qi + i] ^ 0x80 of the block of row
// c; d [nb blocks][16 columns] f16.
void repack_q80_16(const uint8_t* rows, __m512i idx, int64_t nb, uint8_t* out) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    uint8_t* D0 = out + static_cast<size_t>(nb) * kQ80BlkLevelBytes;
    for (int64_t blk = 0; blk < nb; ++blk) {
        const size_t at = static_cast<size_t>(blk) * kQ80BlockBytes;
        uint8_t* L = out + static_cast<size_t>(blk) * 512;
        for (int qi = 0; qi < 8; ++qi)
            _mm512_storeu_si512(L + 64 * qi, _mm512_xor_si512(rows_dword(rows, idx, at + 2 + 4 * qi), flip));
        // d: the low half of the dword at the block's start
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(D0 + 32 * blk), _mm512_cvtepi32_epi16(rows_dword(rows, idx, at)));
    }
}

// Q4_K: levels [nsb][8 granules g][4 vectors v][64], byte 4 c + i = (level 8 v + i) | (level
// 8 v + 4 + i) << 4 of granule g of row c, where granule g's levels are nibble g % 2 of
// qs[32 (g / 2) ..]: granules 2 h and 2 h + 1 share their bytes, so one pair of gathers (bytes
// 8 v .. 8 v + 3 and 8 v + 4 .. 8 v + 7 of qs[32 h ..]) gives both. Scales and d per row, scalar
// (256 of the super-block's 2304 bytes), the scales then packed (q4k_scales_pack).
void repack_q4k_16(const uint8_t* rows, size_t row_stride, __m512i idx, int64_t nsb, uint8_t* out) {
    const __m512i lo = _mm512_set1_epi8(0x0F);
    uint8_t* S0 = out + static_cast<size_t>(nsb) * kQ4kSbLevelBytes;
    uint8_t* D0 = S0 + static_cast<size_t>(nsb) * kQ4kSbScaleBytes;
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const size_t at = static_cast<size_t>(sb) * kQ4kBlockBytes;
        uint8_t* L = out + static_cast<size_t>(sb) * kQ4kSbLevelBytes;
        for (int h = 0; h < 4; ++h)
            for (int v = 0; v < 4; ++v) {
                const __m512i A = rows_dword(rows, idx, at + 16 + 32 * h + 8 * v);
                const __m512i B = rows_dword(rows, idx, at + 16 + 32 * h + 8 * v + 4);
                // even granule: low nibbles of A | low nibbles of B << 4; odd: high nibbles of A >> 4 | high of B
                _mm512_storeu_si512(L + 256 * (2 * h) + 64 * v, _mm512_ternarylogic_epi32(A, _mm512_slli_epi16(B, 4), lo, 0xE4));
                _mm512_storeu_si512(L + 256 * (2 * h + 1) + 64 * v, _mm512_ternarylogic_epi32(_mm512_srli_epi16(A, 4), B, lo, 0xE4));
            }
        alignas(64) uint8_t S[kQ4kScalesUnpacked];
        uint8_t* D = D0 + static_cast<size_t>(sb) * kQ4kSbDBytes;
        for (int c = 0; c < 16; ++c) {
            const uint8_t* b = rows + c * row_stride + at;
            for (int g = 0; g < 8; ++g) {
                uint8_t sc, m;
                ref::get_scale_min_k4(g, b + 4, &sc, &m);
                S[q4k_sc_at(g, c)] = sc;
                S[q4k_m_at(g, c)] = m;
            }
            std::memcpy(D + 2 * c, b, 2);
            std::memcpy(D + 32 + 2 * c, b + 2, 2);
        }
        q4k_scales_pack(S, S0 + static_cast<size_t>(sb) * kQ4kSbScaleBytes);
    }
}

// Q6_K: levels [nsb][8 octets o][384]: the low nibbles (4 vectors v at q6k_nib_at) as Q4_K's levels,
// then the top two bits (2 vectors h at q6k_top_at; byte 4 c + i: bits 2 q, 2 q + 1 = top bits of
// value 32 o + 16 h + 4 q + i); scales [nsb][16 granules][16 columns] int8; d [nsb][16 columns] f16.
// Octet o = 4 n + j holds values 128 n + 32 j ..: low nibbles = nibble j / 2 of ql[64 n + 32 (j % 2)
// ..], top bits = bits 2 j, 2 j + 1 of qh[32 n ..] (repack_q6k in qmatmul_panel_layout.cpp), so the
// gathers of one n serve 2 (nibbles) or 4 (top bits) octets.
void repack_q6k_16(const uint8_t* rows, size_t row_stride, __m512i idx, int64_t nsb, uint8_t* out) {
    const __m512i lo = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3);
    uint8_t* S0 = out + static_cast<size_t>(nsb) * kQ6kSbLevelBytes;
    uint8_t* D0 = S0 + static_cast<size_t>(nsb) * kQ6kSbScaleBytes;
    const auto srl = [](__m512i v, int n) { return n ? _mm512_srli_epi16(v, n) : v; };
    const auto sll = [](__m512i v, int n) { return n ? _mm512_slli_epi16(v, n) : v; };
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const size_t at = static_cast<size_t>(sb) * kQ6kBlockBytes;
        uint8_t* L = out + static_cast<size_t>(sb) * kQ6kSbLevelBytes;
        for (int n = 0; n < 2; ++n) {
            for (int j2 = 0; j2 < 2; ++j2)  // octets 4 n + j2 (nibble 0) and 4 n + j2 + 2 (nibble 1)
                for (int v = 0; v < 4; ++v) {
                    const __m512i A = rows_dword(rows, idx, at + 64 * n + 32 * j2 + 8 * v);
                    const __m512i B = rows_dword(rows, idx, at + 64 * n + 32 * j2 + 8 * v + 4);
                    _mm512_storeu_si512(L + q6k_nib_at(4 * n + j2, v), _mm512_ternarylogic_epi32(A, _mm512_slli_epi16(B, 4), lo, 0xE4));
                    _mm512_storeu_si512(L + q6k_nib_at(4 * n + j2 + 2, v),
                                        _mm512_ternarylogic_epi32(_mm512_srli_epi16(A, 4), B, lo, 0xE4));
                }
            for (int h = 0; h < 2; ++h) {
                __m512i T[4];
                for (int q = 0; q < 4; ++q) T[q] = rows_dword(rows, idx, at + 128 + 32 * n + 16 * h + 4 * q);
                for (int j = 0; j < 4; ++j) {  // octet 4 n + j: bits 2 j, 2 j + 1 of each byte
                    __m512i r = _mm512_setzero_si512();
                    for (int q = 0; q < 4; ++q) r = _mm512_or_si512(r, sll(_mm512_and_si512(srl(T[q], 2 * j), m3), 2 * q));
                    _mm512_storeu_si512(L + q6k_top_at(4 * n + j, h), r);
                }
            }
        }
        uint8_t* S = S0 + static_cast<size_t>(sb) * kQ6kSbScaleBytes;
        for (int c = 0; c < 16; ++c) {
            const uint8_t* b = rows + c * row_stride + at;
            for (int g = 0; g < 16; ++g) S[16 * g + c] = b[192 + g];
        }
        // d: the high half of the dword at byte 206 (scales 14, 15, then d; never past the block)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(D0 + static_cast<size_t>(sb) * kQ6kSbDBytes),
                            _mm512_cvtepi32_epi16(_mm512_srli_epi32(rows_dword(rows, idx, at + 206), 16)));
    }
}

// MXFP4: levels [nb][4 vectors v][64], byte 4 c + i = code 8 v + i | code 8 v + 4 + i << 4 of block b
// of row c, where codes 0..15 are the low nibbles of qs[0..15] and 16..31 the high ones: one pair of
// gathers (qs bytes 8 u .. 8 u + 3 and 8 u + 4 .. 8 u + 7) gives vectors u (low nibbles) and u + 2
// (high nibbles); e [nb][16 columns]: the low byte of the dword at the block's start. Every gather
// stays inside the block (qs ends at byte 16).
void repack_mxfp4_16(const uint8_t* rows, __m512i idx, int64_t nb, uint8_t* out) {
    const __m512i lo = _mm512_set1_epi8(0x0F);
    uint8_t* E0 = out + static_cast<size_t>(nb) * kMxfp4BlockLevelBytes;
    for (int64_t b = 0; b < nb; ++b) {
        const size_t at = static_cast<size_t>(b) * kMxfp4BlockBytes;
        uint8_t* L = out + static_cast<size_t>(b) * kMxfp4BlockLevelBytes;
        for (int u = 0; u < 2; ++u) {
            const __m512i A = rows_dword(rows, idx, at + 1 + 8 * u), B = rows_dword(rows, idx, at + 1 + 8 * u + 4);
            _mm512_storeu_si512(L + 64 * u, _mm512_ternarylogic_epi32(A, _mm512_slli_epi16(B, 4), lo, 0xE4));
            _mm512_storeu_si512(L + 64 * (u + 2), _mm512_ternarylogic_epi32(_mm512_srli_epi16(A, 4), B, lo, 0xE4));
        }
        _mm_storeu_si128(reinterpret_cast<__m128i*>(E0 + 16 * b), _mm512_cvtepi32_epi8(rows_dword(rows, idx, at)));
    }
}

}  // namespace

bool repack_panel_avx512(DType t, const uint8_t* rows, size_t row_stride, int64_t K, int nrows, uint8_t* out) {
    if (nrows != 16 || K <= 0 || row_stride > static_cast<size_t>(INT_MAX / 16)) return false;
    if (t != DType::Q8_0 && t != DType::Q4_K && t != DType::Q6_K && t != DType::MXFP4) return false;
    if (K % (t == DType::MXFP4 || t == DType::Q8_0 ? 32 : 256) != 0) return false;
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(static_cast<int>(row_stride)));
    if (t == DType::MXFP4) repack_mxfp4_16(rows, idx, K / 32, out);
    else if (t == DType::Q8_0) repack_q80_16(rows, idx, K / 32, out);
    else if (t == DType::Q4_K) repack_q4k_16(rows, row_stride, idx, K / 256, out);
    else repack_q6k_16(rows, row_stride, idx, K / 256, out);
    return true;
}

}  // namespace moe::kernels::panel

#pragma GCC diagnostic pop
MOE_TARGET_POP
