#pragma once
// Row-wise training ops, forward and backward side by side (f32 for training, f64 for gradient
// tests). Shapes are given per call; "rows" are independent. Each backward takes the forward's
// inputs/saved values and the output gradient and *accumulates* parameter gradients.
// Threads (pool may be null) split rows, or columns for parameter gradients, in fixed blocks:
// results do not depend on the thread count.
#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/ref/rope.h"

namespace moe::train {

// y[n, d] = x * rstd * w, rstd[n] = 1 / sqrt(mean(x^2) + eps) (saved for backward). y may be x.
template <typename R>
void rmsnorm_fwd(ThreadPool* pool, int64_t n, int64_t d, float eps, const R* x, const R* w, R* y, R* rstd);
// dx[n, d] = d/dx (x may not alias dx); dw[d] += sum over rows of dy * x * rstd.
template <typename R>
void rmsnorm_bwd(ThreadPool* pool, int64_t n, int64_t d, const R* x, const R* w, const R* rstd, const R* dy,
                 R* dx, R* dw);

// NeoX RoPE in place on x[n_tok, n_head, head_dim] with the engine's cos/sin table; token t at
// position pos[t]. inverse = true rotates back (the backward of a rotation is its transpose).
template <typename R>
void rope(ThreadPool* pool, const RopeCache& cache, R* x, int64_t n_tok, int64_t n_head, const int32_t* pos,
          bool inverse);

// a[n] = silu(g) * u ; backward: dg, du from da.
template <typename R>
void swiglu_fwd(int64_t n, const R* g, const R* u, R* a);
template <typename R>
void swiglu_bwd(int64_t n, const R* g, const R* u, const R* da, R* dg, R* du);

// Mean cross-entropy of logits[n, V] against targets[n] (natural log). Overwrites logits with the
// gradient of the mean loss (softmax - onehot) * scale / n when grad is true. Returns the summed
// loss over rows (caller divides).
template <typename R>
double cross_entropy(ThreadPool* pool, int64_t n, int64_t V, R* logits, const int32_t* targets, bool grad,
                     double scale);

}  // namespace moe::train
