#pragma once
// AMX-BF16 prefill GEMM for dense F32 / F16 / BF16 weights (issue 15), opt-in (MOE_AMX_BF16=1):
// it rounds the activations (and F32 / F16 weights) to bf16, so its output differs from the f32
// kernels' (matmul_f32.cpp, matmul_half.cpp) by a bounded amount. BF16 weights are used exactly as
// stored: only the activations are rounded.
//
// Panel layout (bf16_panels_repack): per 16 weight rows (output columns n, a "panel"; the last one
// zero-padded to 16), K / 2 rows of 64 bytes, row k = the 16 columns' bf16 pairs (values 2k, 2k + 1)
// in order: the TDPBF16PS B operand ("VNNI pair layout"), 16 rows of it (32 values) = one B tile.
// Panel p starts at p * K * 32 bytes. K must be a multiple of 32 (one A / B tile of depth).
//
// Result: y[r][n] = sum over the K / 32 steps s (in order) of C = C + (l0 + l1), where l0, l1 are
// the two f32 lanes of TDPBF16PS over step s's 16 value pairs (amx_tiles.h EmuTiles::dpbf16ps has
// the exact rounding steps: FMAs, DAZ, FTZ, RNE); the same bits whatever m, n0, n1 or the thread.
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/ref/matmul_ref.h"

namespace moe::kernels::bf16amx {

// Rows per call from which the caller should take this path (one A tile of tokens); decode (m
// below this) stays on the f32 kernels.
inline constexpr int64_t kMinRows = 16;

// N output columns (weight rows) of K values in the panel layout above.
struct Bf16PanelMatrix {
    const uint16_t* panels = nullptr;
    int64_t N = 0, K = 0;
};

// True for the weight types the repack reads (F32, F16, BF16).
bool bf16_panels_supported(DType t);
// Bytes of the panels of an N x K matrix: ceil(N / 16) * K * 32.
size_t bf16_panel_bytes(int64_t N, int64_t K);
// Writes the panels of the N x K matrix w (rows of type t, row_stride bytes apart) to out
// (bf16_panel_bytes(N, K) bytes): F32 and F16 rounded to bf16 (RNE), BF16 copied. Throws moe::Error
// ([kernels]) on another type or K % 32 != 0.
void bf16_panels_repack(DType t, const void* w, size_t row_stride, int64_t N, int64_t K, uint16_t* out);

// The m rows of x (ldx apart; K a multiple of 32) rounded to bf16 (RNE) into out [m][K]:
// AVX512-BF16's VCVTNE2PS2BF16 where the CPU has it (every AMX-BF16 CPU does; AMD Zen 4 too),
// else fp32_to_bf16. The same bits except for f32 denormals, which the instruction flushes to a
// zero of their sign while fp32_to_bf16 keeps a bf16 denormal: TDPBF16PS reads both as that zero.
void round_rows_bf16(const float* x, int64_t ldx, int64_t m, int64_t K, uint16_t* out);
// The portable fallback of round_rows_bf16 (for tests).
void round_rows_bf16_scalar(const float* x, int64_t ldx, int64_t m, int64_t K, uint16_t* out);

// y[r][n - n0] for n in [n0, n1) (n0 a multiple of 16) of the a.m rows of a.x, rounded to bf16 per
// row; a.w / a.w_row_stride are not read. Call only where amx_bf16_usable() (isa.h). Throws moe::Error
// ([kernels]) on a.K != w.K, K % 32 != 0 or a column range outside the matrix.
void matmul_bf16_amx(const Bf16PanelMatrix& w, const MatmulArgs& a);
// The same kernel on the scalar tile emulator (amx_tiles.h EmuTiles), for tests; runs anywhere.
void matmul_bf16_amx_emulated(const Bf16PanelMatrix& w, const MatmulArgs& a);

}  // namespace moe::kernels::bf16amx
