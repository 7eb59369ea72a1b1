#pragma once
// The AMX-INT8 prefill GEMM over a repacked panel matrix (qmatmul_panel_layout.h): the same
// calls and the same bits as panel_gemm_avx512 (qmatmul_panel_gemm.h), with the integer granule
// sums taken by tile dot products (qmatmul_panel_amx.cpp says how and what is verified where).
#include "core/dtype.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/matmul_ref.h"

namespace moe::kernels::panel {

// True for the types whose panels the AMX GEMM reads (Q8_0, Q4_0, Q5_0, MXFP4, Q4_K, Q5_K, Q6_K, Q3_K,
// Q2_K: every panel type).
bool panel_amx_supported(DType t);
// True for the types whose AMX GEMM is the default where AMX is usable: those measured faster than
// the VNNI panel GEMM on a Xeon with AMX (Q4_K, Q5_K and Q6_K, their scales folded into the tiles;
// Q8_0, Q4_0, Q5_0 and MXFP4, register accumulators; docs/PERFORMANCE.md); Q3_K and Q2_K run on tiles only with
// MOE_FORCE_ISA=amx (expected slower: per-granule stores).
bool panel_amx_default(DType t);
// Fewest activation rows a call needs for panel_matmul to run it on tiles; smaller calls (an
// expert that few tokens chose) take the VNNI panel GEMM, with the same bits. A tile product covers
// 16 rows (Q4_K / Q5_K: the kernel's blocks are 32), so a few rows pay for the whole tile work and the
// per-panel operand fill. Measured crossovers (panel_gemm_bench, one thread, AMX / VNNI;
// docs/PERFORMANCE.md, sessions 44 and 46): Q4_K 0.8-1.0x at m = 8, 1.0-1.07x at 10, 1.1-1.14x at
// 12; Q5_K 0.98-1.21x at 8, 1.15-1.24x at 10; Q6_K 0.76-1.07x at 20, 1.2-1.27x at 24; Q8_0 1.00x at
// 8, 1.16x at 10; Q4_0 0.97x at 10, 1.07x at 12; Q5_0 1.02x at 6, 1.13x at 8; MXFP4 0.89x at 8,
// 1.07x at 10.
int64_t panel_amx_min_rows(DType t);
// How the AMX GEMM runs; the defaults are the engine's. None of it changes the output bits.
struct AmxGemmOptions {
    // The kernels with folded scales (Q4_K, Q5_K, Q6_K) request the next panel's bytes a slice per
    // row block and super-block while the current panel computes (panel_prefetch.h), as the VNNI
    // panel GEMM does with the next pair. On a Xeon with AMX (docs/PERFORMANCE.md, session 42) the
    // kernels gave 1.03-1.09x while the tiles ran at their full rate and no gain or a loss while they
    // were throttled, pp512 a median 1.00x; kept, pending a steadier machine (panel_gemm_bench's path
    // amx-nopf runs without it).
    bool prefetch_next = true;
};

// As panel_gemm_avx512, on AMX tiles: call only where amx_usable() (isa.h) and panel_gemv_usable().
// Throws moe::Error ([kernels]) on a type without an AMX kernel, a K that is not the panels' or a
// column range check_range refuses.
void panel_gemm_amx(const PanelMatrix& w, const MatmulArgs& a);
void panel_gemm_amx(const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o);
// The same kernel on the scalar tile emulator (amx_tiles.h EmuTiles), for tests: needs only
// panel_gemv_usable() (AVX-512 VNNI, for the f32 chain and the activation quantizer).
void panel_gemm_amx_emulated(const PanelMatrix& w, const MatmulArgs& a);
void panel_gemm_amx_emulated(const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o);

}  // namespace moe::kernels::panel
