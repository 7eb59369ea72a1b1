// AdamW with warm-up + cosine decay and clipping (see optim.h).
#include "train/optim.h"

#include <algorithm>
#include <cmath>

namespace moe::train {

double lr_at(const AdamSpec& s, int64_t step, int64_t steps, double progress) {
    if (step < s.warmup) return s.lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup);
    const double w = steps > 0 ? static_cast<double>(s.warmup) / static_cast<double>(steps) : 0.0;
    const double p = std::clamp((progress - w) / std::max(1e-9, 1.0 - w), 0.0, 1.0);
    const double lo = s.lr * s.min_lr_frac;
    return lo + 0.5 * (s.lr - lo) * (1.0 + std::cos(M_PI * p));
}

double AdamW::update(ThreadPool* pool, const AdamSpec& s, double lr, const std::vector<ParamInfo>& layout,
                     std::vector<float>& params, const std::vector<float>& grads) {
    constexpr int64_t kBlock = 1 << 16;
    const int64_t n = static_cast<int64_t>(params.size()), nb = (n + kBlock - 1) / kBlock;
    std::vector<double> part(static_cast<size_t>(nb));
    auto run = [&](int64_t count, auto&& f) {
        if (!pool || pool->size() == 1) f(int64_t(0), count);
        else pool->parallel_for(count, 1, [&](int64_t a, int64_t b, int) { f(a, b); });
    };
    run(nb, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
            double ss = 0;
            for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i)
                ss += static_cast<double>(grads[static_cast<size_t>(i)]) * grads[static_cast<size_t>(i)];
            part[static_cast<size_t>(b)] = ss;
        }
    });
    double ss = 0;
    for (double p : part) ss += p;
    const double norm = std::sqrt(ss);
    const float gscale = (s.clip > 0 && norm > s.clip) ? static_cast<float>(s.clip / norm) : 1.0f;
    ++t;
    const float b1 = static_cast<float>(s.beta1), b2 = static_cast<float>(s.beta2);
    const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(s.beta1, static_cast<double>(t))));
    const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(s.beta2, static_cast<double>(t))));
    const float flr = static_cast<float>(lr), eps = static_cast<float>(s.eps);
    for (const ParamInfo& p : layout) {
        const float decay = p.decay ? static_cast<float>(1.0 - lr * s.weight_decay) : 1.0f;
        const int64_t n0 = static_cast<int64_t>(p.offset), len = static_cast<int64_t>(p.size);
        run((len + kBlock - 1) / kBlock, [&](int64_t q0, int64_t q1) {
            for (int64_t i = n0 + q0 * kBlock; i < n0 + std::min(len, q1 * kBlock); ++i) {
                const size_t k = static_cast<size_t>(i);
                const float g = grads[k] * gscale;
                m[k] = b1 * m[k] + (1 - b1) * g;
                v[k] = b2 * v[k] + (1 - b2) * g * g;
                params[k] = params[k] * decay - flr * (m[k] * c1) / (std::sqrt(v[k] * c2) + eps);
            }
        });
    }
    return norm;
}

}  // namespace moe::train
