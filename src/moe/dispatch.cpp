#include "moe/dispatch.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace moe {

void build_dispatch(const Routing& r, DispatchPlan& plan) {
    const int E = r.n_expert, k = r.k;
    const int64_t T = r.n_tokens;
    plan.n_expert = E;
    plan.n_tokens = T;
    plan.k = k;
    std::fill(plan.counts, plan.counts + E, 0);
    for (int64_t i = 0; i < T * k; ++i) {
        const int32_t e = r.ids[i];
        if (e < 0) continue;
        MOE_ASSERT(e < E, "expert id ", e, " out of range");
        ++plan.counts[e];
    }
    plan.offsets[0] = 0;
    for (int e = 0; e < E; ++e) plan.offsets[e + 1] = plan.offsets[e] + plan.counts[e];
    plan.n_rows = plan.offsets[E];
    // Counting sort, scanning (token, slot) in order: rows of an expert come out in token order.
    // counts[] doubles as the fill cursor and is restored afterwards.
    std::fill(plan.counts, plan.counts + E, 0);
    for (int64_t t = 0; t < T; ++t)
        for (int s = 0; s < k; ++s) {
            const int32_t e = r.ids[t * k + s];
            if (e < 0) {
                plan.slot_row[t * k + s] = -1;
                continue;
            }
            const int64_t p = plan.offsets[e] + plan.counts[e]++;
            plan.row_token[p] = static_cast<int32_t>(t);
            plan.row_slot[p] = s;
            plan.slot_row[t * k + s] = static_cast<int32_t>(p);
        }
}

void gather_rows(ThreadPool& pool, const DispatchPlan& plan, const float* x, int64_t D, float* xp) {
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, D));
    pool.parallel_for(plan.n_rows, grain, [&](int64_t b, int64_t e, int) {
        for (int64_t p = b; p < e; ++p)
            std::memcpy(xp + p * D, x + static_cast<int64_t>(plan.row_token[p]) * D, sizeof(float) * static_cast<size_t>(D));
    });
}

}  // namespace moe
