#include "moe/combine.h"

#include <algorithm>

namespace moe {

void combine(ThreadPool& pool, const Routing& r, const DispatchPlan& plan, const float* yp, int64_t D,
             const float* shared, const float* shared_gate, float* y) {
    const int k = r.k;
    constexpr int64_t kCol = 512;  // column block: lets decode (T = 1) split D across threads
    const int64_t nb = (D + kCol - 1) / kCol;
    const int64_t grain = std::max<int64_t>(1, 65536 / (kCol * (k + 1)));  // tiny batches run inline
    pool.parallel_for(r.n_tokens * nb, grain, [&](int64_t b, int64_t e, int) {
        for (int64_t it = b; it < e; ++it) {
            const int64_t t = it / nb, d0 = (it % nb) * kCol, d1 = std::min(D, d0 + kCol);
            float* yt = y + t * D;
            std::fill(yt + d0, yt + d1, 0.0f);
            for (int s = 0; s < k; ++s) {
                const int32_t p = plan.slot_row[t * k + s];
                if (p < 0) continue;
                const float w = r.weights[t * k + s];
                const float* src = yp + static_cast<int64_t>(p) * D;
                for (int64_t d = d0; d < d1; ++d) yt[d] += w * src[d];
            }
            if (shared) {
                const float g = shared_gate ? shared_gate[t] : 1.0f;
                const float* src = shared + t * D;
                for (int64_t d = d0; d < d1; ++d) yt[d] += g * src[d];
            }
        }
    });
}

}  // namespace moe
