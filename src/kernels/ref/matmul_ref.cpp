#include "kernels/ref/matmul_ref.h"

namespace moe::kernels {

void matmul_f32_ref(const MatmulArgs& a) {
    for (int64_t r = 0; r < a.m; ++r) {
        const float* x = a.x + r * a.ldx;
        for (int64_t n = a.n0; n < a.n1; ++n) {
            const float* w = reinterpret_cast<const float*>(static_cast<const char*>(a.w) + n * a.w_row_stride);
            float s = 0.0f;
            for (int64_t i = 0; i < a.K; ++i) s += w[i] * x[i];
            a.y[r * a.ldy + (n - a.n0)] = s;
        }
    }
}

}  // namespace moe::kernels
