#pragma once
// AdamW (decoupled weight decay on matrices only) with linear warm-up and cosine decay to
// min_lr_frac * lr, and global gradient-norm clipping. f32 state, element-wise, so the result does
// not depend on the thread count (the norm is summed per fixed block, then blocks in order).
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "train/net.h"

namespace moe::train {

struct AdamSpec {
    double lr = 2e-3, min_lr_frac = 0.1;
    double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
    double weight_decay = 0.1;
    double clip = 1.0;  // max global gradient L2 norm (0 = off)
    int64_t warmup = 100;
};

// Learning rate at progress p in [0, 1] of the run (step / steps), warm-up over the first
// warmup / steps of it.
double lr_at(const AdamSpec& s, int64_t step, int64_t steps, double progress);

class AdamW {
public:
    explicit AdamW(size_t n) : m(n, 0.0f), v(n, 0.0f) {}
    // One update with learning rate lr; returns the gradient norm before clipping.
    double update(ThreadPool* pool, const AdamSpec& s, double lr, const std::vector<ParamInfo>& layout,
                  std::vector<float>& params, const std::vector<float>& grads);
    std::vector<float> m, v;
    int64_t t = 0;  // updates done
};

}  // namespace moe::train
