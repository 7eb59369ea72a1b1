#pragma once
// Quantized weight block layouts (ggml / GGUF, FACTS.md section 3) and their scalar reference
// dequantizers and quantizers. The dequantizers follow the format definitions exactly (each value
// is the one float the definition's arithmetic produces; tests/kernels/test_dequant.cpp checks
// hand-built blocks element by element). The quantizers are simple round-to-nearest ones that make
// test and `moe gen` data; they need not match llama.cpp's quantizers bit for bit.
//
// One file per type: quant_<type>.cpp. Q8_0 lives in quantize_q8_0.{h,cpp}.
#include <cstdint>

#include "core/dtype.h"
#include "kernels/ref/quantize_q8_0.h"

namespace moe::ref {

constexpr int kQK = 256;  // elements per K-quant super-block

struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockMxfp4 { uint8_t e; uint8_t qs[16]; };
struct BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
// IQ family and ternary types (ggml-common.h layouts; FACTS.md section 3, docs/FORMATS.md).
struct BlockIQ4_NL { uint16_t d; uint8_t qs[16]; };
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };
struct BlockIQ2_XXS { uint16_t d; uint16_t qs[32]; };
struct BlockIQ2_XS { uint16_t d; uint16_t qs[32]; uint8_t scales[8]; };
struct BlockIQ2_S { uint16_t d; uint8_t qs[32]; uint8_t signs[32]; uint8_t qh[8]; uint8_t scales[8]; };
struct BlockIQ3_XXS { uint16_t d; uint8_t qs[64]; uint8_t sas[32]; };  // sas: 8 x u32 scale+signs
struct BlockIQ3_S { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t signs[32]; uint8_t scales[4]; };
struct BlockIQ1_S { uint16_t d; uint8_t qs[32]; uint16_t qh[8]; };
struct BlockIQ1_M { uint8_t qs[32]; uint8_t qh[16]; uint8_t scales[8]; };
struct BlockTQ1_0 { uint8_t qs[48]; uint8_t qh[4]; uint16_t d; };
struct BlockTQ2_0 { uint8_t qs[64]; uint16_t d; };

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockMxfp4) == 17);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockIQ2_XXS) == 66 && sizeof(BlockIQ2_XS) == 74 && sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98 && sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ1_S) == 50 && sizeof(BlockIQ1_M) == 56);
static_assert(sizeof(BlockTQ1_0) == 54 && sizeof(BlockTQ2_0) == 66);

// Q4_K / Q5_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes
// (ggml's get_scale_min_k4), and the inverse used by the quantizers.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}
void pack_scale_min_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t q[12]);
// Q4_K / Q5_K quantizer helper: for 256 values x, per 32-element sub-block j the affine grid
// -dmin*m[j] + d*sc[j]*q, q in [0, levels]; sets fp16 d, dmin, 6-bit sc, m and the levels q[256].
void quantize_affine_k(const float* x, int levels, uint16_t* d, uint16_t* dmin, uint8_t sc[8], uint8_t m[8],
                       uint8_t q[256]);

// Q3_K: signed scale j (0..15) = 6-bit field - 32.
int q3_k_scale(const uint8_t scales[12], int j);

// MXFP4 element values (2 x E2M1) and the E8M0 half-scale 2^(e-128), built from its float bits
// (inline: the decode GEMV calls it per block and row, and std::ldexp cost 40 % of gpt-oss decode):
// e >= 2 is the normal float with biased exponent e - 1; e = 1, 0 are the subnormals 2^-127, 2^-128.
// tests/kernels/test_quant_mxfp4.cpp checks all 256 values against std::ldexp(1, e - 128).
extern const int8_t kMxfp4Values[16];
inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e >= 2 ? static_cast<uint32_t>(e - 1) << 23 : 0x00200000u << e;
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
}

// Dequantizers: x is n / block-size blocks, y n floats (n a multiple of the block size, asserted).
void dequantize_row_q4_0(const void* x, float* y, int64_t n);
void dequantize_row_q4_1(const void* x, float* y, int64_t n);
void dequantize_row_q5_0(const void* x, float* y, int64_t n);
void dequantize_row_q5_1(const void* x, float* y, int64_t n);
void dequantize_row_mxfp4(const void* x, float* y, int64_t n);
void dequantize_row_q2_k(const void* x, float* y, int64_t n);
void dequantize_row_q3_k(const void* x, float* y, int64_t n);
void dequantize_row_q4_k(const void* x, float* y, int64_t n);
void dequantize_row_q5_k(const void* x, float* y, int64_t n);
void dequantize_row_q6_k(const void* x, float* y, int64_t n);
void dequantize_row_iq4_nl(const void* x, float* y, int64_t n);
void dequantize_row_iq4_xs(const void* x, float* y, int64_t n);
void dequantize_row_iq2_xxs(const void* x, float* y, int64_t n);
void dequantize_row_iq2_xs(const void* x, float* y, int64_t n);
void dequantize_row_iq2_s(const void* x, float* y, int64_t n);
void dequantize_row_iq3_xxs(const void* x, float* y, int64_t n);
void dequantize_row_iq3_s(const void* x, float* y, int64_t n);
void dequantize_row_iq1_s(const void* x, float* y, int64_t n);
void dequantize_row_iq1_m(const void* x, float* y, int64_t n);
void dequantize_row_tq1_0(const void* x, float* y, int64_t n);
void dequantize_row_tq2_0(const void* x, float* y, int64_t n);
// IQ1_M: the block's fp16 super-scale, spread over the top nibbles of the four u16 scale words.
uint16_t iq1_m_scale_bits(const uint8_t scales[8]);
// TQ1_0: trit n (0..4) of a base-3 packed byte q (q = ceil(v * 256 / 243) for v the 5-trit number,
// most significant trit first): (uint8(q * 3^n) * 3) >> 8.
inline int tq1_trit(uint8_t q, int n) {
    static constexpr uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const auto r = static_cast<uint8_t>(q * pow3[n]);
    return (static_cast<int>(r) * 3) >> 8;
}

// Round-to-nearest reference quantizers (x: n floats; y: n / block-size blocks).
void quantize_row_q4_0(const float* x, void* y, int64_t n);
void quantize_row_q4_k(const float* x, void* y, int64_t n);
void quantize_row_q5_k(const float* x, void* y, int64_t n);
void quantize_row_q6_k(const float* x, void* y, int64_t n);
void quantize_row_mxfp4(const float* x, void* y, int64_t n);

// Generic entries by DType. dequantize_row: every type above plus Q8_0, F32, F16, BF16.
// quantize_row: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, MXFP4. Both return false (writing nothing)
// for a type they do not handle; n must be a multiple of the type's block size (asserted).
bool dequantize_row(DType type, const void* x, float* y, int64_t n);
bool quantize_row(DType type, const float* x, void* y, int64_t n);
bool can_dequantize(DType type);
bool can_quantize(DType type);

}  // namespace moe::ref
