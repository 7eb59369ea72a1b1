#pragma once
// Activation quantization for the int8 weight kernels (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K): one f32
// activation row of K values becomes an "ActQ8" row, laid out for the SIMD dot products.
//
// Per 32-element group g: d_g = max|x| / 127 (f32, not rounded to fp16; 0 when max|x| < 1e-30), q = nearbyint(x * (1/d_g))
// (round half to even, |q| <= 127). The row is padded with zeros to Kp = K rounded up to 64.
// ActQ8 row layout (row_bytes(K) bytes, every part 64-byte sized):
//   int8  qs[Kp]                  quantized values
//   float dxv[Kp/64][16]          per 64-element unit u: lanes 0..7 = d of group 2u, lanes 8..15 = d of group 2u+1
//   int32 nsum[Kp/64][16]         per unit: lane 4i = -(sum of q over the 16 elements 16i..16i+15 of the unit), other lanes 0
//   float dxs[Kp/32] (+ pad)      d_g * (sum of q over group g)   (for the min term of Q4_K / Q5_K)
// Every value is computed the same way on every ISA path (max, one division, one multiply and
// round-to-nearest-even per element, integer sums), so the SIMD quantizer gives the same bytes as
// this reference; tests check that.
#include <cstddef>
#include <cstdint>

namespace moe::ref {

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

// x: K floats (finite); out: act_q8_row_bytes(K) bytes, 4-byte aligned.
void quantize_act_q8(const float* x, int64_t K, void* out);
// Dequantized activation value i (d_g * q_i), for tests and references.
float act_q8_value(const void* row, int64_t K, int64_t i);

}  // namespace moe::ref
