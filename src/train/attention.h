#pragma once
// Causal GQA attention over B sequences of T tokens, forward and backward (f32 / f64).
//   q[B*T, Hq, hd], k/v[B*T, Hkv, hd] (q/k already normed and rotated), out[B*T, Hq, hd]
//   S = scale q k^T (causal), P = softmax(S) (saved [B, Hq, T, T]), out = P v
// Backward: dP = dout v^T, dS = P (dP - rowsum(P dP)), dq = scale dS k, dk = scale dS^T q,
// dv = P^T dout. Threads take (sequence, kv head) pairs, so dk/dv of a kv head are summed over its
// query heads by one thread in a fixed order.
#include <cstdint>

#include "core/thread_pool.h"

namespace moe::train {

struct AttnShape {
    int64_t B = 0, T = 0, Hq = 0, Hkv = 0, hd = 0;
    double scale = 0;  // 1/sqrt(hd)
};

template <typename R>
void attention_fwd(ThreadPool* pool, const AttnShape& s, const R* q, const R* k, const R* v, R* P, R* out);
// dq, dk, dv are overwritten.
template <typename R>
void attention_bwd(ThreadPool* pool, const AttnShape& s, const R* q, const R* k, const R* v, const R* P,
                   const R* dout, R* dq, R* dk, R* dv);

}  // namespace moe::train
