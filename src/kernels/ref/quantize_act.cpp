// Scalar reference of the ActQ8 activation quantizer (see quantize_act.h).
#include "kernels/ref/quantize_act.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"

namespace moe::ref {

const char* act_quant_name(ActQuant k) {
    switch (k) {
        case kActQ8_0: return "q8_0";
        case kActQ8_1: return "q8_1";
        case kActQ8_K: return "q8_K";
        default: return "none";
    }
}

bool act_q8_cols_ok(ActQuant kind, int64_t K, int64_t c0, int64_t c1) {
    const int64_t B = kind == kActQ8_K ? 256 : 32;
    const auto edge = [&](int64_t c) { return c % 64 == 0 && c % B == 0; };
    return 0 <= c0 && c0 < c1 && c1 <= K && edge(c0) && (c1 == K || edge(c1));
}

void act_q8_zero_cols(void* out, int64_t K, int64_t c0, int64_t c1) {
    const int64_t Kp = act_q8_padded(K), e = c1 >= K ? Kp : c1;  // c0, e: multiples of 64
    const ActQ8Row r = act_q8_row(out, K);
    const size_t n = static_cast<size_t>(e - c0);
    std::memset(r.qs + c0, 0, n);
    std::memset(r.dxv + c0 / 4, 0, n);   // 16 floats per 64 values
    std::memset(r.nsum + c0 / 4, 0, n);  // 16 int32 per 64 values
    const size_t dxs_end = c1 >= K ? act_q8_row_bytes(K) - 3 * static_cast<size_t>(Kp) : sizeof(float) * static_cast<size_t>(e / 32);
    std::memset(r.dxs + c0 / 32, 0, dxs_end - sizeof(float) * static_cast<size_t>(c0 / 32));
}

void quantize_act_q8(const float* x, int64_t K, void* out, ActQuant kind) { quantize_act_q8_cols(x, K, 0, K, out, kind); }

void quantize_act_q8_cols(const float* xc, int64_t K, int64_t c0, int64_t c1, void* out, ActQuant kind) {
    MOE_ASSERT(K > 0, "quantize_act_q8 K ", K);
    MOE_ASSERT(kind == kActQ8_0 || kind == kActQ8_1 || kind == kActQ8_K, "quantize_act_q8 kind ", static_cast<int>(kind));
    MOE_ASSERT(act_q8_cols_ok(kind, K, c0, c1), "quantize_act_q8 columns [", c0, ", ", c1, ") of ", K);
    act_q8_zero_cols(out, K, c0, c1);
    const ActQ8Row r = act_q8_row(out, K);
    const auto x = [&](int64_t i) { return xc[i - c0]; };  // value of column i
    const int64_t B = kind == kActQ8_K ? 256 : 32;  // values per scale
    for (int64_t b0 = c0; b0 < c1; b0 += B) {
        const int64_t n = std::min(B, K - b0);
        // per block: the multiplier mul (q = nearbyint(x * mul)) and the scale d of every group in it
        float amax = 0.0f, vmax = 0.0f;
        for (int64_t l = 0; l < n; ++l)
            if (std::fabs(x(b0 + l)) > amax) amax = std::fabs(x(b0 + l)), vmax = x(b0 + l);
        float mul = 0.0f, d = 0.0f, df32 = 0.0f;
        if (amax >= 1e-30f) {
            if (kind == kActQ8_K) {
                mul = -127.0f / vmax;
                d = 1.0f / mul;
            } else {
                mul = 127.0f / amax;
                df32 = amax / 127.0f;
                d = fp16_to_fp32(fp32_to_fp16(df32));
            }
        }
        for (int64_t g = b0 / 32; g < (b0 + n + 31) / 32; ++g) {
            const int64_t i0 = 32 * g, ng = std::min<int64_t>(32, K - i0);
            int32_t s16[2] = {0, 0};
            for (int64_t l = 0; l < ng; ++l) {
                const int q = std::min(127, static_cast<int>(std::nearbyint(x(i0 + l) * mul)));
                r.qs[i0 + l] = static_cast<int8_t>(q);
                s16[l / 16] += q;
            }
            const int64_t u = g / 2, h = g % 2;
            for (int l = 0; l < 8; ++l) r.dxv[16 * u + 8 * h + l] = d;
            r.nsum[16 * u + 8 * h + 0] = -s16[0];
            r.nsum[16 * u + 8 * h + 4] = -s16[1];
            const float s = static_cast<float>(s16[0] + s16[1]);
            r.dxs[g] = kind == kActQ8_1 ? fp16_to_fp32(fp32_to_fp16(df32 * s)) : d * s;
        }
    }
}

float act_q8_value(const void* row, int64_t K, int64_t i) {
    const ActQ8Row r = act_q8_row(const_cast<void*>(row), K);
    const int64_t g = i / 32;
    return r.dxv[16 * (g / 2) + 8 * (g % 2)] * static_cast<float>(r.qs[i]);
}

}  // namespace moe::ref
