#include "kernels/ref/rmsnorm.h"

#include <cmath>

#include "core/error.h"

namespace moe::ref {

void rmsnorm(const RmsNormSpec& spec, const float* x, const float* w, float* y) {
    MOE_ASSERT(spec.n_rows >= 0 && spec.row_len > 0, "rmsnorm shape ", spec.n_rows, " x ", spec.row_len);
    const int64_t n = spec.row_len;
    for (int64_t r = 0; r < spec.n_rows; ++r) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        double ss = 0.0;
        for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
        const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + spec.eps));
        for (int64_t i = 0; i < n; ++i) yr[i] = w ? xr[i] * inv * w[i] : xr[i] * inv;
    }
}

}  // namespace moe::ref
