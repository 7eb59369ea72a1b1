#pragma once
// Int8 matmul kernels for quantized weights (kQmmTypes below: the legacy types, the K-quants, the IQ
// family, TQ1_0/TQ2_0, MXFP4) and the f16/bf16 weight kernels. Internal to src/kernels/cpu; callers
// get them through CpuKernels::matmul(DType, name). How each further type maps onto the form below
// (levels, offset, scales, min terms): qmatmul_decode_more.h.
//
// The math (every path): activations are quantized per row to ActQ8 (kernels/ref/quantize_act.h:
// int8, one f32 scale per 32 values). A weight row is read as 64-element units of unsigned 8-bit
// levels q (Q8_0: stored int8 + 128; Q4_0: nibble; Q4_K: nibble; Q5_K: 5 bits; Q6_K: 6 bits), an
// f32 scale per 16 values ws (Q8_0/Q4_0: d; Q4_K/Q5_K: d*sc; Q6_K: d*sc, all exact in f32), an
// integer offset 2^shift (Q8_0 128, Q4_0 8, Q6_K 32, none for Q4_K/Q5_K) and, for Q4_K/Q5_K, a
// min dmin*m per 32 values (Q4_1/Q5_1: -m per 32). Then, exactly in integers per 16 values i:
//     isum_i = sum_l q_l * xq_l - 2^shift * sum_l xq_l
// and, per granule g of values sharing one weight scale (16 values or 32), one sequential f32 chain
// per output in K order:
//     acc = fma(float(I_g), ws_g * dx_g, acc)        (I_g: exact integer sum over the granule)
//     acc = fma(-m_g, dxs_g, acc)                    (Q4_1/Q5_1 only, after each granule)
// The K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (the super-block integer chain): their granule scales
// are small integers sc_g (Q2_K 0..15, Q3_K -32..31, Q4_K/Q5_K 0..63 per 32 values, Q6_K
// -128..127 per 16) and their mins m_g (Q2_K 0..15 per 16, Q4_K/Q5_K 0..63 per 32) under ONE f16 d
// (and dmin) per 256-value super-block, and Q8_K activations have one dx per 256 values, so per
// super-block, exactly in int32:
//     S = sum_g sc_g * I_g      (I_g the exact granule sum above, offset included: Q3_K levels - 4,
//                                Q6_K levels - 32)
//     M = sum_g m_g * nsum_g    (types with mins; nsum_g = -sum of the granule's activation int8s)
//     acc = fma(float(S), d * dx, acc);  acc = fma(float(M), dmin * dx, acc)   (mins), in that order.
// Bounds (|xq| <= 128): Q2_K |I_g| <= 16*3*128 = 6144, |S| <= 16*15*6144 < 2^21, |M| <= 16*15*2048
// < 2^19; Q3_K |I_g| <= 16*4*128 = 8192, |S| <= 16*32*8192 = 2^22; Q4_K/Q5_K |I_g| <= 32*31*128
// < 2^17, |S| <= 8*63*2^17 < 2^26, |M| <= 8*63*4096 < 2^21; Q6_K |I_g| <= 16*32*128 = 2^16, |S| <=
// 16*128*2^16 = 2^27: int32 exact. float(M) is exact, float(S) exact for Q2_K/Q3_K and rounded once
// for the others (the same rounding on every path), so per 256 values two or three roundings and
// two FMAs replace the per-granule chain's 16-64 (Q4_K decode GEMV +13 %, Q6_K panel GEMM +8 %,
// kernel alone: docs/PERFORMANCE.md). I_g and nsum_g fit int16 for Q2_K/Q3_K (their decode GEMVs
// form S and M with vpdpwssd: qmatmul_avx512_kq_gemv.cpp), and the Q4_K/Q5_K mins and 32-value
// nsum do too (M by vpdpwssd on word pairs).
// The integer sums are exact on every path and the f32 chain is the same operation sequence on
// every path (scalar: std::fma; AVX2: integer sums with vpmaddwd; AVX-512: 16 columns per zmm lane
// with vpdpbusd over a column-interleaved repack), so all ISA paths give the same bits, and each
// y[r][n] depends only on its weight row, its activation row and K -- never on m, the column range,
// the thread, or whether the caller prepared the activations (the determinism contract of
// cpu_kernels.h, here even across ISAs).
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/ref/quantize_act.h"

namespace moe::kernels {

// Weight types with an int8 kernel (every path; the AVX-512 VNNI path for the subset
// qmm_has_avx512 names, the AVX2 path otherwise).
inline constexpr DType kQmmTypes[] = {
    DType::Q8_0,   DType::Q4_0,   DType::Q4_1,  DType::Q5_0,    DType::Q5_1,  DType::Q2_K,
    DType::Q3_K,   DType::Q4_K,   DType::Q5_K,  DType::Q6_K,    DType::IQ4_NL, DType::IQ4_XS,
    DType::IQ3_S,  DType::IQ3_XXS, DType::IQ2_S, DType::IQ2_XS, DType::IQ2_XXS, DType::IQ1_M,
    DType::IQ1_S,  DType::TQ1_0,  DType::TQ2_0, DType::MXFP4,
};
// True for the weight types with an int8 kernel.
bool qmm_supported(DType t);
// True if the AVX-512 VNNI kernel for t exists and this CPU runs it.
bool qmm_has_avx512(DType t);
// Kernel functions per (type, path); nullptr if the type has no int8 kernel.
MatmulFn qmm_kernel(DType t, Isa isa);
// The AVX2 kernels that read the weight blocks in place (qmatmul_avx2_blocks.h: Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q5_0, MXFP4, IQ4_NL, IQ4_XS, the IQ1/IQ2/IQ3 grid types; they need
// F16C); nullptr for the other types (Q4_1, Q5_1, TQ1_0, TQ2_0), which run the generic AVX2 path.
MatmulFn qmm_avx2_blocks_kernel(DType t);
// The AVX-512 kernel of t as a CPU without the optional extensions its decode GEMV uses would run
// it (Q3_K without GFNI; IQ2_XXS without AVX512_VBMI: the generic decode rows), or nullptr where t
// has no such variant or this CPU has no AVX-512 path. For the tests: both variants are checked on
// a CPU that has the extensions.
MatmulFn qmm_avx512_baseline_kernel(DType t);

// The activation quantization of weight type t's int8 kernel (the vec_dot_type llama.cpp's CPU
// backend pairs with t, kernels/ref/quantize_act.h); kActNone for the non-int8 types.
constexpr ref::ActQuant act_quant(DType t) {
    switch (t) {
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q5_0:
        case DType::IQ4_NL:
        case DType::MXFP4: return ref::kActQ8_0;
        case DType::Q4_1:
        case DType::Q5_1: return ref::kActQ8_1;
        case DType::Q2_K:
        case DType::Q3_K:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
        case DType::IQ4_XS:
        case DType::IQ3_S:
        case DType::IQ3_XXS:
        case DType::IQ2_S:
        case DType::IQ2_XS:
        case DType::IQ2_XXS:
        case DType::IQ1_M:
        case DType::IQ1_S:
        case DType::TQ1_0:
        case DType::TQ2_0: return ref::kActQ8_K;
        default: return ref::kActNone;
    }
}

// Quantize m activation rows (ldx floats apart) to ActQ8 rows of kind `kind`, `stride` bytes apart
// (>= ref::act_q8_row_bytes(K)). Same bytes on every ISA path.
void quantize_act_rows(Isa isa, ref::ActQuant kind, const float* x, int64_t ldx, int64_t m, int64_t K, void* out,
                       size_t stride);
// Columns [c0, c1) of one ActQ8 row of K values (x: their c1 - c0 values; the contract and bytes
// of ref::quantize_act_q8_cols, so threads may fill one row's column ranges side by side).
void quantize_act_cols(Isa isa, ref::ActQuant kind, const float* x, int64_t K, int64_t c0, int64_t c1, void* out);

// The kernel's ActQ8 activation rows: a.xq if the caller prepared them (with `kind`), else x
// quantized into a per-thread buffer (valid until the next call on this thread).
const unsigned char* qmm_activations(const MatmulArgs& a, Isa isa, ref::ActQuant kind, size_t* stride);

// f16 / bf16 weights with f32 activations (weights converted exactly, f32 FMAs as matmul_f32).
MatmulFn half_kernel(DType t, Isa isa);

}  // namespace moe::kernels
