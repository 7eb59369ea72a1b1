#pragma once
// Dispatch plan: groups the (token, slot) pairs of a Routing by expert. Dropless by construction:
// every slot with an expert id becomes one row. Rows of an expert are ordered by (token, slot),
// so the plan is a pure function of the routing.
#include <cstdint>

#include "core/thread_pool.h"
#include "moe/router.h"

namespace moe {

struct DispatchPlan {
    int n_expert = 0;
    int64_t n_tokens = 0;
    int k = 0;
    int64_t n_rows = 0;            // selected (token, expert) pairs
    int64_t* counts = nullptr;     // [E] rows per expert
    int64_t* offsets = nullptr;    // [E + 1] first row of each expert; offsets[E] = n_rows
    int32_t* row_token = nullptr;  // [T * k] token of permuted row p
    int32_t* row_slot = nullptr;   // [T * k] slot of permuted row p
    int32_t* slot_row = nullptr;   // [T * k] inverse: permuted row of (token, slot), -1 if unused
};

// Builds the plan into the preallocated arrays of `plan` (sized for T * k rows and E experts).
void build_dispatch(const Routing& r, DispatchPlan& plan);

// xp[p, :] = x[row_token[p], :] for every row p (the permute).
void gather_rows(ThreadPool& pool, const DispatchPlan& plan, const float* x, int64_t D, float* xp);

}  // namespace moe
