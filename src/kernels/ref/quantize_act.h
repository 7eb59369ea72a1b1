#pragma once
// Activation quantization for the int8 weight kernels: one f32 activation row of K values becomes
// an "ActQ8" row, laid out for the SIMD dot products. Each weight type takes the activation
// quantization llama.cpp's CPU backend uses for it (ggml-cpu type_traits vec_dot_type), so both
// engines multiply the same int8 activations (docs/PARITY.md, issue 17):
//   kActQ8_0 (Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4): per 32 values amax = max|x|, q = nearbyint(x * (127 / amax)),
//            scale d = fp16(amax / 127) (the f16 scale of block_q8_0).
//   kActQ8_1 (Q4_1, Q5_1): q and d as kActQ8_0; the group sum for the min term is fp16(amax / 127 * sum q)
//            (block_q8_1's s).
//   kActQ8_K (the K-quants, IQ types but IQ4_NL, TQ1_0/TQ2_0): per 256 values, max = the first value
//            of largest |x|, iscale = -127 / max, q = min(127, nearbyint(iscale * x)), d = 1 / iscale
//            (f32, negative when max > 0: d * q keeps the sign).
// A group / block with amax < 1e-30 becomes all zeros with d = 0 (keeps 127 / amax finite; llama.cpp
// zeroes only amax == 0, a difference of < 1e-30 per value). Rounding is round-half-even (llama.cpp's
// _mm256_round_ps / nearest_int). The row is padded with zeros to Kp = K rounded up to 64; a last
// block shorter than 256 (K % 256 != 0, never for the K-quant types) is quantized on its own.
// ActQ8 row layout (row_bytes(K) bytes, every part 64-byte sized):
//   int8  qs[Kp]                  quantized values
//   float dxv[Kp/64][16]          per 64-element unit u: lanes 0..7 = d of group 2u, lanes 8..15 = d of group 2u+1
//   int32 nsum[Kp/64][16]         per unit: lane 4i = -(sum of q over the 16 elements 16i..16i+15 of the unit), other lanes 0
//   float dxs[Kp/32] (+ pad)      d_g * (sum of q over group g)   (for the min terms; kActQ8_1: as above)
// Every value is computed the same way on every ISA path (max, one division, one multiply and
// round-to-nearest-even per element, integer sums), so the SIMD quantizer gives the same bytes as
// this reference; tests check that.
#include <cstddef>
#include <cstdint>

namespace moe::ref {

enum ActQuant : uint8_t { kActNone = 0, kActQ8_0 = 1, kActQ8_1 = 2, kActQ8_K = 3 };
const char* act_quant_name(ActQuant k);

struct ActQ8Row {
    int8_t* qs;
    float* dxv;
    int32_t* nsum;
    float* dxs;
};

inline int64_t act_q8_padded(int64_t K) { return (K + 63) / 64 * 64; }
inline size_t act_q8_row_bytes(int64_t K) {
    const size_t Kp = static_cast<size_t>(act_q8_padded(K));
    return 3 * Kp + (Kp / 8 + 63) / 64 * 64;
}
inline ActQ8Row act_q8_row(void* base, int64_t K) {
    const size_t Kp = static_cast<size_t>(act_q8_padded(K));
    char* p = static_cast<char*>(base);
    return {reinterpret_cast<int8_t*>(p), reinterpret_cast<float*>(p + Kp), reinterpret_cast<int32_t*>(p + 2 * Kp),
            reinterpret_cast<float*>(p + 3 * Kp)};
}

// x: K floats (finite); out: act_q8_row_bytes(K) bytes, 4-byte aligned; kind != kActNone.
void quantize_act_q8(const float* x, int64_t K, void* out, ActQuant kind);
// Columns [c0, c1) of a row of K values only (x: those c1 - c0 values): writes the row's parts for
// them and, when c1 == K, the row's zero padding, nothing else, so threads may fill one row's
// column ranges side by side (the grouped FFN quantizes each gate / up tile's h columns as it
// makes them). The bytes are those quantize_act_q8 gives for the whole row. act_q8_cols_ok(kind,
// K, c0, c1) must hold: c0 a multiple of 64 and of the kind's block (256 for kActQ8_K, else 32),
// c1 the same or K.
void quantize_act_q8_cols(const float* x, int64_t K, int64_t c0, int64_t c1, void* out, ActQuant kind);
bool act_q8_cols_ok(ActQuant kind, int64_t K, int64_t c0, int64_t c1);
// Zeroes the parts of row `out` (K values) for columns [c0, c1), to the row's end when c1 == K.
void act_q8_zero_cols(void* out, int64_t K, int64_t c0, int64_t c1);
// Dequantized activation value i (d_g * q_i), for tests and references.
float act_q8_value(const void* row, int64_t K, int64_t i);

}  // namespace moe::ref
