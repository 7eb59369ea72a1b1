#include "kernels/ref/softmax.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace moe::ref {

void softmax(const SoftmaxSpec& spec, const float* x, float* y) {
    MOE_ASSERT(spec.n_rows >= 0 && spec.row_len > 0, "softmax shape ", spec.n_rows, " x ", spec.row_len);
    const int64_t n = spec.row_len;
    for (int64_t r = 0; r < spec.n_rows; ++r) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < n; ++i) mx = xr[i] > mx ? xr[i] : mx;
        MOE_ASSERT(std::isfinite(mx), "softmax row ", r, " has no finite value (max ", mx, ")");
        double sum = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            const float e = std::exp(xr[i] - mx);
            yr[i] = e;
            sum += e;
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t i = 0; i < n; ++i) yr[i] *= inv;
    }
}

}  // namespace moe::ref
