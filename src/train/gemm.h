#pragma once
// Dense GEMM for the trainer: C[M,N] (+)= op(A)[M,K] . op(B)[K,N], row-major, f32 or f64.
// Training is ~all GEMMs of modest shapes (K, N ~ 64..1024, M = tokens), in three forms:
//   forward   y  = x . W^T   (W stored as GGUF [out][in])   -> trans_b
//   input grad dx = dy . W                                   -> plain
//   weight grad dW += dy^T . x                               -> trans_a
// The engine's matmul kernels compute x . W^T for one-shot inference on quantized weights; they
// have no transposed-A form and no accumulate, so the trainer has its own f32 kernel: a 4x32
// register tile (GCC vector extensions, AVX-512 with -march=native) over a row-major B panel;
// trans_b transposes B into scratch first (O(K*N), small next to O(M*K*N)). f64 (gradient
// tests) and gemm_ref use the plain triple loop, the reference behind the fast kernel.
// Threads split C into fixed blocks of rows, each C element is summed over k in order: results
// do not depend on the thread count.
#include <cstdint>

#include "core/thread_pool.h"

namespace moe::train {

template <typename R>
struct Gemm {
    int64_t M = 0, N = 0, K = 0;
    const R* A = nullptr;
    int64_t lda = 0;  // row stride of A as stored ([M,K], or [K,M] when trans_a)
    bool trans_a = false;
    const R* B = nullptr;
    int64_t ldb = 0;  // row stride of B as stored ([K,N], or [N,K] when trans_b)
    bool trans_b = false;
    R* C = nullptr;
    int64_t ldc = 0;
    bool accumulate = false;  // C += ... instead of C = ...
};

// pool may be null (single thread).
void gemm(ThreadPool* pool, const Gemm<float>& g);
void gemm(ThreadPool* pool, const Gemm<double>& g);
// Scalar reference (any type), summing over k in order in double.
template <typename R>
void gemm_ref(const Gemm<R>& g);

}  // namespace moe::train
