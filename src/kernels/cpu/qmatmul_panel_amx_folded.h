#pragma once
// The AMX-INT8 Q4_K, Q5_K and Q6_K panel GEMMs with the granule scales folded into the tile operands
// (qmatmul_panel_amx_folded.cpp says how) and the Q8_0 / Q4_0 / Q5_0 / MXFP4 ones with register accumulators
// (qmatmul_panel_amx_blocks.cpp), for panel_gemm_amx / panel_gemm_amx_emulated
// (qmatmul_panel_amx.cpp), and the scratch and token-row helpers the AMX kernel files share;
// internal to those files.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/qmatmul_panel_amx.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/matmul_ref.h"

namespace moe::kernels::panel {

// Per-thread scratch of at least `bytes` (grown, never shrunk), 64-byte aligned.
unsigned char* amx_scratch(size_t bytes);

// The token rows an A tile reads: 16 activation rows in place, or the call's last rows (fewer than
// 16) from a zero-padded copy, pad [16][Kp] (pad_tail_rows).
struct TileRows {
    const uint8_t* base;
    size_t stride;
};
inline void pad_tail_rows(const unsigned char* act, size_t act_stride, int64_t m, int64_t K, int64_t Kp, uint8_t* pad) {
    const int64_t r_tail = m / 16 * 16;
    if (r_tail == m) return;
    std::memset(pad, 0, 16 * static_cast<size_t>(Kp));
    for (int64_t r = r_tail; r < m; ++r) std::memcpy(pad + (r - r_tail) * Kp, act + r * act_stride, static_cast<size_t>(K));
}
inline TileRows tile_rows(const unsigned char* act, size_t act_stride, const uint8_t* pad, int64_t Kp, int64_t m, int64_t r) {
    if (r + 16 <= m) return {act + r * act_stride, act_stride};
    return {pad, static_cast<size_t>(Kp)};
}

// y = x . w^T over a Q4_K panel matrix, bit for bit panel_gemm_avx512's; Tiles: amx::AmxTiles (call
// only where amx_usable()) or amx::EmuTiles (amx_tiles.h). The caller has checked the call.
template <class Tiles>
void panel_gemm_q4k_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o);
// The same over a Q5_K panel matrix.
template <class Tiles>
void panel_gemm_q5k_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o);
// The same over a Q6_K panel matrix.
template <class Tiles>
void panel_gemm_q6k_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o);
// The same over a Q8_0 panel matrix (qmatmul_panel_amx_blocks.cpp).
template <class Tiles>
void panel_gemm_q80_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o);
// The same over a Q4_0 panel matrix.
template <class Tiles>
void panel_gemm_q40_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o);
// The same over a Q5_0 panel matrix.
template <class Tiles>
void panel_gemm_q50_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o);
// The same over an MXFP4 panel matrix.
template <class Tiles>
void panel_gemm_mxfp4_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o);

}  // namespace moe::kernels::panel
