// The MXFP4 panel layout (qmatmul_panel_layout.h): scalar repack / unpack, the scalar reference dot
// of one panel row (qmatmul_panel_layout.cpp dispatches) and the AVX-512 VNNI decode GEMV
// (panel_gemv_avx512 dispatches). The block decode GEMV (gemv16_nibble_blocks<DMXFP4>) loads 16 rows x 4 blocks'
// qs into one vector per row and reduces the 16 rows' lanes to [block][row] sums (granule_sums)
// and gathers the 16 rows' exponents per block; here the codes are stored column-interleaved as
// Q4_0's nibble vectors, so the vpdpbusd accumulators are the 16 rows' block sums (no reduction)
// and a block's 16 exponents are one 16-byte load.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/cpu/isa_target.h"

namespace moe::kernels::panel::detail {

namespace {

// Level byte of value j (< 32) of block b, column c, and its nibble's shift (Q4_0's nibble vectors).
inline size_t mx_byte(int64_t b, int j, int c) { return static_cast<size_t>(256 * b + 64 * (j / 8) + 4 * c + j % 4); }
inline int mx_shift(int j) { return 4 * ((j % 8) / 4); }

}  // namespace

void repack_mxfp4(const uint8_t* rows, size_t row_stride, int64_t nb, int nrows, uint8_t* out) {
    uint8_t* E = out + static_cast<size_t>(nb) * kMxfp4BlockLevelBytes;
    for (int c = 0; c < nrows; ++c)
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* B = rows + c * row_stride + static_cast<size_t>(b) * kMxfp4BlockBytes;
            uint8_t code[32];
            for (int j = 0; j < 16; ++j) {
                code[j] = B[1 + j] & 0xF;
                code[16 + j] = B[1 + j] >> 4;
            }
            // byte 4 c + i of vector v = code 8 v + i | code 8 v + 4 + i << 4
            for (int v = 0; v < 4; ++v)
                for (int i = 0; i < 4; ++i)
                    out[256 * b + 64 * v + 4 * c + i] = static_cast<uint8_t>(code[8 * v + i] | code[8 * v + 4 + i] << 4);
            E[16 * b + c] = B[0];
        }
}

void unpack_mxfp4(const uint8_t* panel, int64_t nb, int nrows, uint8_t* rows, size_t row_stride) {
    const uint8_t* E = panel + static_cast<size_t>(nb) * kMxfp4BlockLevelBytes;
    for (int c = 0; c < nrows; ++c)
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t* B = rows + c * row_stride + static_cast<size_t>(b) * kMxfp4BlockBytes;
            B[0] = E[16 * b + c];
            std::memset(B + 1, 0, 16);
            for (int j = 0; j < 32; ++j) {  // value by value (repack goes vector by vector: the test compares both)
                const int code = (panel[mx_byte(b, j, c)] >> mx_shift(j)) & 0xF;
                B[1 + j % 16] = static_cast<uint8_t>(B[1 + j % 16] | code << (4 * (j / 16)));
            }
        }
}

// Row c of an MXFP4 panel against the kActQ8_0 row x: per block I = sum kMxfp4Values[code] x
// (exact), then acc = fma(float(I), e8m0_half(e) * dx, acc) in K order (the block kernels' chain,
// DMXFP4 / gemv16_nibble_blocks<DMXFP4>).
float dot_mxfp4(const uint8_t* P, int64_t nb, int c, const ref::ActQ8Row& x) {
    const uint8_t* E = P + static_cast<size_t>(nb) * kMxfp4BlockLevelBytes;
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
        int32_t I = 0;
        for (int j = 0; j < 32; ++j) I += ref::kMxfp4Values[(P[mx_byte(b, j, c)] >> mx_shift(j)) & 0xF] * x.qs[32 * b + j];
        acc = std::fma(static_cast<float>(I), ref::e8m0_half(E[16 * b + c]) * x.dxv[8 * b], acc);
    }
    return acc;
}

}  // namespace moe::kernels::panel::detail

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,avx2")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace moe::kernels::panel::detail {

namespace {

#include "kernels/cpu/qmatmul_panel_gemv_avx512.inc"  // bcast, load_once, gemv_blocks

// The levels kMxfp4Values + 16 (u8 4..28) by code in every 128-bit lane: vpshufb's table (DMXFP4's).
inline __m512i mx_table() { return _mm512_broadcast_i32x4(_mm_setr_epi8(16, 17, 18, 19, 20, 22, 24, 28, 16, 15, 14, 13, 12, 10, 8, 4)); }

#include "kernels/cpu/e8m0_avx512.inc"  // e8m0_half16

// Decoder for gemv_blocks: each nibble vector's low and high nibbles (masked) through the level
// table give the quads 8 v .. + 3 and 8 v + 4 .. + 7 of the 16 columns; the offset 16 seeds the
// sums (I = sum kMxfp4Values x, exact); the scale of a block is its 16 exponents (one 16-byte load).
struct DecMxfp4 {
    static constexpr int kLevelBytes = kMxfp4BlockLevelBytes, kOffset = 16, kHiShift = 0;
    static constexpr bool kGroups = false;
    struct Blk {};
    __m512i tbl, m4;  // set in a written constructor (see DecQ40 in qmatmul_panel_gemv.cpp)
    DecMxfp4() : tbl(mx_table()), m4(_mm512_set1_epi8(0x0F)) {}
    Blk block(const uint8_t*) const { return {}; }
    void levels(const Blk&, __m512i V, int, __m512i& lo, __m512i& hi) const {
        lo = _mm512_shuffle_epi8(tbl, _mm512_and_si512(V, m4));
        hi = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(V, 4), m4));
    }
    __m512 scale(const uint8_t* P, int64_t nb, int64_t g) const { return e8m0_half16(P + nb * kMxfp4BlockLevelBytes + 16 * g); }
};

}  // namespace

void gemv_mxfp4_avx512(const PanelMatrix& w, const ref::ActQ8Row& x, int64_t n0, int64_t n1, float* y) {
    gemv_blocks<DecMxfp4>(w, x, n0, n1, y);
}

}  // namespace moe::kernels::panel::detail

#pragma GCC diagnostic pop
MOE_TARGET_POP
