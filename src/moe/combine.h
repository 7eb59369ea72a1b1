#pragma once
// Combine: y[t, :] = sum over slots s (in slot order) of w[t, s] * yp[slot_row[t, s], :], in f32,
// then + gate[t] * shared[t, :] when shared experts exist. Rows return to token order. Each output
// element is summed by one thread in this fixed order.
#include <cstdint>

#include "core/thread_pool.h"
#include "moe/dispatch.h"
#include "moe/router.h"

namespace moe {

// shared: [T, D] or null; shared_gate: [T] or null (= 1).
void combine(ThreadPool& pool, const Routing& r, const DispatchPlan& plan, const float* yp, int64_t D,
             const float* shared, const float* shared_gate, float* y);

}  // namespace moe
