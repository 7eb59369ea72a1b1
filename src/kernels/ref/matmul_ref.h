#pragma once
// Scalar reference matmul (the oracle for every fast f32 kernel, and the "scalar" ISA path).
// y[r*ldy + (n - n0)] = sum_{i < K} W[n][i] * x[r*ldx + i], plain sequential f32 sum over i.
#include <cstddef>
#include <cstdint>

namespace moe::kernels {

// Arguments of one matmul call: m activation rows times the weight rows [n0, n1).
// W rows are K floats (or K elements of the weight dtype), w_row_stride bytes apart.
struct MatmulArgs {
    const void* w = nullptr;     // weight row 0 (not row n0)
    size_t w_row_stride = 0;     // bytes between consecutive weight rows
    const float* x = nullptr;    // activations [m, ldx], first K used
    int64_t ldx = 0;
    float* y = nullptr;          // outputs [m, ldy]; column (n - n0)
    int64_t ldy = 0;
    int64_t m = 0, K = 0, n0 = 0, n1 = 0;
    // Optional prepared activations for the int8 kernels (MatmulKernel::act_q8): the same m rows
    // already quantized by kernels::quantize_act_rows, xq_stride bytes apart. When null the kernel
    // quantizes x itself (same bytes, so the result is identical); other kernels ignore it.
    const void* xq = nullptr;
    size_t xq_stride = 0;
};

void matmul_f32_ref(const MatmulArgs& a);

}  // namespace moe::kernels
