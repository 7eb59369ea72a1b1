#include "kernels/ref/rope.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace moe {

void rope_validate(const RopeSpec& s) {
    if (s.head_dim <= 0) throw_error("rope", "head_dim is ", s.head_dim, " (must be > 0)");
    if (s.n_rot <= 0 || s.n_rot % 2 != 0 || s.n_rot > s.head_dim)
        throw_error("rope", "rope.dimension_count is ", s.n_rot, " (must be even, > 0 and <= head_dim ", s.head_dim, ")");
    if (!(s.freq_base > 0.0f) || !std::isfinite(s.freq_base))
        throw_error("rope", "rope.freq_base is ", s.freq_base, " (must be > 0)");
    if (s.scaling != RopeScaling::None && (!(s.factor > 0.0f) || !std::isfinite(s.factor)))
        throw_error("rope", "rope.scaling.factor is ", s.factor, " (must be > 0)");
    if (s.scaling == RopeScaling::Yarn && s.n_ctx_orig <= 0)
        throw_error("rope", "YaRN needs rope.scaling.original_context_length > 0 (got ", s.n_ctx_orig, ")");
}

namespace {
double yarn_corr_dim(const RopeSpec& s, double beta) {
    return static_cast<double>(s.n_rot) * std::log(static_cast<double>(s.n_ctx_orig) / (beta * 2.0 * M_PI)) /
           (2.0 * std::log(static_cast<double>(s.freq_base)));
}
}  // namespace

void rope_angle(const RopeSpec& s, int64_t pos, int64_t i, double* cos_out, double* sin_out) {
    const double theta_extrap =
        static_cast<double>(pos) * std::pow(static_cast<double>(s.freq_base), -2.0 * static_cast<double>(i) / s.n_rot);
    double theta = theta_extrap;
    double mscale = s.attn_factor;
    if (s.scaling == RopeScaling::Linear) {
        theta = theta_extrap / s.factor;
    } else if (s.scaling == RopeScaling::Yarn) {
        const double freq_scale = 1.0 / s.factor;
        const double theta_interp = freq_scale * theta_extrap;
        theta = theta_interp;
        if (s.ext_factor != 0.0f) {
            const double lo = std::max(0.0, std::floor(yarn_corr_dim(s, s.beta_fast)));
            const double hi = std::min(static_cast<double>(s.n_rot - 1), std::ceil(yarn_corr_dim(s, s.beta_slow)));
            const double y = (static_cast<double>(i) - lo) / std::max(0.001, hi - lo);
            const double ramp = 1.0 - std::min(1.0, std::max(0.0, y));
            const double mix = ramp * s.ext_factor;
            theta = theta_interp * (1.0 - mix) + theta_extrap * mix;
            mscale *= 1.0 + 0.1 * std::log(1.0 / freq_scale);
        }
    }
    *cos_out = std::cos(theta) * mscale;
    *sin_out = std::sin(theta) * mscale;
}

RopeCache::RopeCache(const RopeSpec& spec, int64_t n_pos) : spec_(spec), n_pos_(n_pos) {
    rope_validate(spec);
    if (n_pos <= 0) throw_error("rope", "cache for ", n_pos, " positions (must be > 0)");
    const int64_t np = spec.n_rot / 2;
    cos_.resize(static_cast<size_t>(n_pos * np));
    sin_.resize(static_cast<size_t>(n_pos * np));
    for (int64_t p = 0; p < n_pos; ++p)
        for (int64_t i = 0; i < np; ++i) {
            double c, s;
            rope_angle(spec, p, i, &c, &s);
            cos_[static_cast<size_t>(p * np + i)] = static_cast<float>(c);
            sin_[static_cast<size_t>(p * np + i)] = static_cast<float>(s);
        }
}

namespace ref {

void rope_apply(const RopeCache& cache, float* x, int64_t n_tokens, int64_t n_head, const int32_t* pos) {
    const RopeSpec& s = cache.spec();
    const int64_t np = s.n_rot / 2;
    // Normal: pair i is (2i, 2i+1); Neox: pair i is (i, i + n_rot/2).
    const int64_t stride = s.mode == RopeMode::Normal ? 2 : 1;
    const int64_t offset = s.mode == RopeMode::Normal ? 1 : np;
    for (int64_t t = 0; t < n_tokens; ++t) {
        MOE_ASSERT(pos[t] >= 0 && pos[t] < cache.n_pos(), "rope position ", pos[t], " outside cache of ", cache.n_pos());
        const float* c = cache.cos(pos[t]);
        const float* sn = cache.sin(pos[t]);
        for (int64_t h = 0; h < n_head; ++h) {
            float* row = x + (t * n_head + h) * s.head_dim;
            for (int64_t i = 0; i < np; ++i) {
                float* a = row + i * stride;
                const float x0 = a[0], x1 = a[offset];
                a[0] = x0 * c[i] - x1 * sn[i];
                a[offset] = x0 * sn[i] + x1 * c[i];
            }
        }
    }
}

}  // namespace ref
}  // namespace moe
