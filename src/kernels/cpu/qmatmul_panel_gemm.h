#pragma once
// The prefill GEMM over a repacked panel matrix (qmatmul_panel_layout.h): calls with any m, the
// same bits as the type's block kernels (qmatmul_panel_gemm.cpp says why).
#include "core/dtype.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/matmul_ref.h"

namespace moe::kernels::panel {

// True for the types whose panels the GEMM reads (Q2_K, Q3_K, Q4_K, Q6_K, Q8_0, Q4_0, Q5_K, Q5_0, MXFP4).
bool panel_gemm_supported(DType t);
// a.y[r][n - a.n0] = row n of w . activation row r, for r < a.m and n in [a.n0, a.n1) (a.w and
// a.w_row_stride unused; a.xq, if given, the rows of act_quant(w.type): Q8_K, Q8_0's per 32).
// AVX-512 VNNI: call only where panel_gemv_usable(). Throws moe::Error ([kernels]) on a type
// without a panel GEMM, a K that is not the panels', or a column range panel_gemv's check_range
// refuses.
void panel_gemm_avx512(const PanelMatrix& w, const MatmulArgs& a);

// One matmul call over a panel matrix, the one entry for the expert stacks (moe/experts.cpp) and
// the dense projections (model/forward.cpp): decode-sized calls (a.m <= 2) with prepared
// activation rows (a.xq in the type's act_quant format: Q8_K, Q8_0's per 32) take the panel GEMV
// row by row; the others the panel GEMM if `gemm` (the caller's panels serve every call: the type
// has a panel GEMM): on AMX tiles if `amx` (MatmulKernel::amx), the type has an AMX kernel
// (qmatmul_panel_amx.h) and the call at least panel_amx_min_rows rows, else AVX-512 VNNI, in parts
// of panel_gemm_row_chunk rows; the same bits. Returns false, having computed nothing,
// where neither applies: the caller runs the block kernel. Call only where panel_gemv_usable();
// a.n0 must be a multiple of 16.
bool panel_matmul(const PanelMatrix& w, const MatmulArgs& a, bool gemm, bool amx);
// Two decode calls at once (panel_gemv_pair_avx512: two long streams instead of each matrix's
// halves): served where both are one prepared activation row (m == 1, xq given) over the same rows
// [n0, n1) of two matrices of one shape and a panel_gemv_pair_supported type; a[j].w unused, each
// call its own x, y. Returns false, having computed nothing, otherwise: the caller runs them one by
// one (panel_matmul). Call only where panel_gemv_usable(); n0 a multiple of 16.
bool panel_matmul_pair(const PanelMatrix (&w)[2], const MatmulArgs (&a)[2]);
// Rows per GEMM call in panel_matmul: both GEMMs read all the call's activation rows once per
// 16-column panel, so a call of m > 256 rows (a dense projection over a long prompt) is cut into
// parts of about 128 rows (multiples of 32, the AMX kernels' row block; the last part also takes a
// remainder of fewer than 32 rows, and each part picks tiles or VNNI by its own rows) whose int8 rows stay
// in L2 while the weights stream through; the weights' panels are filled once per part instead of
// once. One thread, Q4_K, N = K = 2048 (panel_gemm_bench): m = 512 in one call 173 (AMX) and
// 117-128 (VNNI) GMAC/s, m = 128 276 and 171. In OLMoE Q4_K_M's pp512 (AMX) the dense projections'
// calls ran 1.08x faster (GMAC per thread-second; docs/PERFORMANCE.md, session 43). Since the AMX
// K-quant kernels were software-pipelined (session 44) they no longer lose at m = 512 (252-292
// against 261-288 GMAC/s at m = 128), so the parts now matter for VNNI.
int64_t panel_gemm_row_chunk(int64_t m);

}  // namespace moe::kernels::panel
