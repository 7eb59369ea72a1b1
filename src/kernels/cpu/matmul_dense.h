#pragma once
// Dense projection op: y[T, N] = x[T, K] * W^T (+ bias[N]), W stored as N rows of K elements
// (GGUF weight {K, N}: ne0 = K is the contiguous row), e.g. attn_q/k/v/output and the lm head.
// This is only the op wrapper (threading over output rows, bias, shape checks): the dot products
// are the MoE layer's matmul kernels (kernels::MatmulKernel from CpuKernels::matmul(dtype, name)),
// the same ones the experts use, so there is one f32 GEMM in the engine and dense weights get every
// weight type that gains a kernel there. Their determinism contract (each y[t, n] is one fixed
// sequence of operations, independent of T, tiles and threads) makes a token's projection
// bit-identical in prefill and in decode.
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_kernels.h"

namespace moe {
class ThreadPool;

struct MatmulSpec {
    int64_t n_tokens = 0;     // T
    int64_t n_out = 0;        // N (rows of W)
    int64_t n_in = 0;         // K (row length of W and x)
    size_t w_row_stride = 0;  // bytes between W rows; 0 = K * 4 (f32)
};

namespace cpu {
// x: [T, K] f32; w: N rows (kernel.weight_type); bias: [N] f32 or nullptr; y: [T, N] (no aliasing).
// pool: parallel over blocks of output rows (nullptr = calling thread only).
void matmul_dense(const MatmulSpec& spec, const kernels::MatmulKernel& kernel, const float* x, const void* w,
                  const float* bias, float* y, ThreadPool* pool);
}  // namespace cpu

}  // namespace moe
