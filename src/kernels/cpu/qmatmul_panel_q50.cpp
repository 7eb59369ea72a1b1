// The Q5_0 panel layout (qmatmul_panel_layout.h): scalar repack / unpack, the scalar reference dot
// of one panel row (panel_gemv_ref calls these; qmatmul_panel_layout.cpp dispatches) and the
// AVX-512 decode GEMV (panel_gemv_avx512 dispatches). K step 32: the panel is laid out block by
// block (nb = K / 32 blocks), so any K of whole blocks (V2-Lite's ffn_down_exps: K = 1408) repacks.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/fp16.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/cpu/isa_target.h"

namespace moe::kernels::panel::detail {

namespace {

// Value j (< 32) of a block, column c: its byte in the block's 4 level vectors (byte 4 c + i of
// vector j / 8, i = j % 4; bits 0-2 for (j % 8) < 4, else bits 3-7) and in the side vector.
inline size_t q50_lev_byte(int j, int c) { return static_cast<size_t>(64 * (j / 8) + 4 * c + j % 4); }
inline size_t q50_side_byte(int j, int c) { return static_cast<size_t>(256 + 4 * c + j % 4); }
inline int q50_level(const uint8_t* L, int j, int c) {
    const int b = L[q50_lev_byte(j, c)];
    if ((j % 8) / 4) return b >> 3;
    return (b & 7) | ((L[q50_side_byte(j, c)] >> (2 * (j / 8))) & 3) << 3;
}
inline size_t q50_d_off(int64_t nb, int64_t b, int c) { return static_cast<size_t>(nb * kQ50BlkLevelBytes + 32 * b + 2 * c); }

}  // namespace

void repack_q50(const uint8_t* rows, size_t row_stride, int64_t nb, int nrows, uint8_t* out) {
    for (int64_t b = 0; b < nb; ++b) {
        uint8_t* L = out + b * kQ50BlkLevelBytes;
        for (int c = 0; c < nrows; ++c) {
            const uint8_t* B = rows + c * row_stride + b * kQ50BlockBytes;
            const uint32_t qh = static_cast<uint32_t>(B[2]) | static_cast<uint32_t>(B[3]) << 8 | static_cast<uint32_t>(B[4]) << 16 |
                                static_cast<uint32_t>(B[5]) << 24;
            uint8_t lev[32];
            for (int j = 0; j < 16; ++j) {
                lev[j] = static_cast<uint8_t>((B[6 + j] & 0xF) | ((qh >> j) & 1) << 4);
                lev[16 + j] = static_cast<uint8_t>((B[6 + j] >> 4) | ((qh >> (16 + j)) & 1) << 4);
            }
            // byte 4 c + i of vector v = low 3 bits of level 8 v + i | level 8 v + 4 + i << 3; side
            // byte 4 c + i, bits 2 v, 2 v + 1 = bits 3-4 of level 8 v + i
            for (int v = 0; v < 4; ++v)
                for (int i = 0; i < 4; ++i) {
                    const int l0 = lev[8 * v + i], l1 = lev[8 * v + 4 + i];
                    L[64 * v + 4 * c + i] = static_cast<uint8_t>((l0 & 7) | l1 << 3);
                    L[256 + 4 * c + i] = static_cast<uint8_t>(L[256 + 4 * c + i] | (l0 >> 3) << (2 * v));
                }
            std::memcpy(out + q50_d_off(nb, b, c), B, 2);
        }
    }
}

void unpack_q50(const uint8_t* panel, int64_t nb, int nrows, uint8_t* rows, size_t row_stride) {
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* L = panel + b * kQ50BlkLevelBytes;
        for (int c = 0; c < nrows; ++c) {
            uint8_t* B = rows + c * row_stride + b * kQ50BlockBytes;
            std::memcpy(B, panel + q50_d_off(nb, b, c), 2);
            std::memset(B + 2, 0, 20);
            for (int j = 0; j < 32; ++j) {  // value by value (repack goes vector by vector: the test compares both)
                const int lv = q50_level(L, j, c);
                B[6 + j % 16] = static_cast<uint8_t>(B[6 + j % 16] | (lv & 0xF) << (4 * (j / 16)));
                B[2 + j / 8] = static_cast<uint8_t>(B[2 + j / 8] | (lv >> 4) << (j % 8));
            }
        }
    }
}

// Row c of a Q5_0 panel against the kActQ8_0 row x: per block I = sum (level - 16) x (exact), then
// acc = fma(float(I), d * dx, acc) in K order (the block kernels' per-granule chain, DLegacy<Q5_0>).
float dot_q50(const uint8_t* P, int64_t nb, int c, const ref::ActQ8Row& x) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* L = P + b * kQ50BlkLevelBytes;
        int32_t I = 0;
        for (int j = 0; j < 32; ++j) I += (q50_level(L, j, c) - 16) * x.qs[32 * b + j];
        uint16_t hd;
        std::memcpy(&hd, P + q50_d_off(nb, b, c), 2);
        acc = std::fma(static_cast<float>(I), fp16_to_fp32(hd) * x.dxv[8 * b], acc);
    }
    return acc;
}

}  // namespace moe::kernels::panel::detail

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,gfni,fma,f16c,avx2")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace moe::kernels::panel::detail {

namespace {

#include "kernels/cpu/qmatmul_panel_gemv_avx512.inc"  // bcast, load_once, gemv_blocks

// vgf2p8affineqb bit matrix moving side bits 2 v, 2 v + 1 of each byte to bits 3, 4 (all others
// zero): the matrix's byte 7 - b is the input-bit mask of output bit b (as qmatmul_panel_gemv.cpp).
constexpr long long side_matrix(int v) {
    return static_cast<long long>(((1ull << (2 * v)) << (8 * (7 - 3))) | ((1ull << (2 * v + 1)) << (8 * (7 - 4))));
}
constexpr long long kSideTo34[4] = {side_matrix(0), side_matrix(1), side_matrix(2), side_matrix(3)};

// Decoder for gemv_blocks: per block and panel 4 level vectors and the side vector, each loaded
// once. Vector v's quad of values 8 v + 4 .. + 7 stays in place (v & 0xF8 = 8 x level: shifted back
// per block); the quad of values 8 v .. + 3 is (v & 7) | its bits 3-4 (side bits 2 v, 2 v + 1,
// moved by one vgf2p8affineqb) by one vpternlogd: Q5_K's decode (panels_q5k) per 32-value block.
// The offset 16 seeds the sums; |I| <= 32 x 31 x 128 (int32).
struct DecQ50 {
    static constexpr int kLevelBytes = kQ50BlkLevelBytes, kOffset = 16, kHiShift = 3;
    static constexpr bool kGroups = false;
    using Blk = __m512i;  // the block's side vector
    __m512i m7, mf8;  // set in a written constructor (see DecQ40 in qmatmul_panel_gemv.cpp)
    DecQ50() : m7(_mm512_set1_epi8(7)), mf8(_mm512_set1_epi8(static_cast<char>(0xF8))) {}
    Blk block(const uint8_t* L) const { return load_once(L + 256); }
    void levels(const Blk& H, __m512i V, int v, __m512i& lo, __m512i& hi) const {
        const __m512i top = _mm512_gf2p8affine_epi64_epi8(H, _mm512_set1_epi64(kSideTo34[v]), 0);
        lo = _mm512_ternarylogic_epi32(top, V, m7, 0xF8);  // A | (B & C)
        hi = _mm512_and_si512(V, mf8);
    }
    __m512 scale(const uint8_t* P, int64_t nb, int64_t g) const {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + nb * kQ50BlkLevelBytes + 32 * g)));
    }
};

}  // namespace

void panel_gemv_q50(const PanelMatrix& w, const ref::ActQ8Row& x, int64_t n0, int64_t n1, float* y) {
    check_range(w, n0, n1);
    gemv_blocks<DecQ50>(w, x, n0, n1, y);
}

}  // namespace moe::kernels::panel::detail

#pragma GCC diagnostic pop
MOE_TARGET_POP
