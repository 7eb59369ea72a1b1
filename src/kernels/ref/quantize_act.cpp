// Scalar reference of the ActQ8 activation quantizer (see quantize_act.h).
#include "kernels/ref/quantize_act.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace moe::ref {

void quantize_act_q8(const float* x, int64_t K, void* out) {
    MOE_ASSERT(K > 0, "quantize_act_q8 K ", K);
    const int64_t Kp = act_q8_padded(K);
    std::memset(out, 0, act_q8_row_bytes(K));
    const ActQ8Row r = act_q8_row(out, K);
    for (int64_t g = 0; g < Kp / 32; ++g) {
        const int64_t i0 = 32 * g, n = K - i0 < 32 ? (K - i0 > 0 ? K - i0 : 0) : 32;
        float amax = 0.0f;
        for (int64_t l = 0; l < n; ++l) amax = std::fmax(amax, std::fabs(x[i0 + l]));
        const float d = amax >= 1e-30f ? amax / 127.0f : 0.0f;  // tiny groups -> 0 (1/d stays finite)
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int32_t s16[2] = {0, 0};
        for (int64_t l = 0; l < n; ++l) {
            const float v = x[i0 + l] * id;
            const int q = static_cast<int>(std::nearbyint(v));
            r.qs[i0 + l] = static_cast<int8_t>(q);
            s16[l / 16] += q;
        }
        const int64_t u = g / 2, h = g % 2;
        for (int l = 0; l < 8; ++l) r.dxv[16 * u + 8 * h + l] = d;
        r.nsum[16 * u + 8 * h + 0] = -s16[0];
        r.nsum[16 * u + 8 * h + 4] = -s16[1];
        r.dxs[g] = d * static_cast<float>(s16[0] + s16[1]);
    }
}

float act_q8_value(const void* row, int64_t K, int64_t i) {
    const ActQ8Row r = act_q8_row(const_cast<void*>(row), K);
    const int64_t g = i / 32;
    return r.dxv[16 * (g / 2) + 8 * (g % 2)] * static_cast<float>(r.qs[i]);
}

}  // namespace moe::ref
