// The scalar MXFP4 quantizer (moe gen --type mxfp4) against the format's definition, read back
// through the reference dequantizer: per block of 32 the shared E8M0 exponent is
// floor(log2(amax)) - 2 + 127, and every value decodes to the nearest point of the E2M1 grid
// +-{0, .5, 1, 1.5, 2, 3, 4, 6} * 2^(e - 127) (checked against all 16 codes by brute force);
// values already on the grid come back exactly; zeros, tiny and huge blocks stay finite.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/ref/quant_formats.h"

using namespace moe;

namespace {

std::vector<float> roundtrip(const std::vector<float>& x, std::vector<uint8_t>* bytes = nullptr) {
    std::vector<uint8_t> q(x.size() / 32 * sizeof(ref::BlockMxfp4));
    ref::quantize_row_mxfp4(x.data(), q.data(), static_cast<int64_t>(x.size()));
    std::vector<float> y(x.size());
    ref::dequantize_row_mxfp4(q.data(), y.data(), static_cast<int64_t>(x.size()));
    if (bytes) *bytes = q;
    return y;
}

}  // namespace

TEST(QuantMxfp4, NearestGridPointWithSharedExponent) {
    std::mt19937 rng(42);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (float scale : {1e-3f, 0.05f, 1.0f, 37.0f}) {
        std::vector<float> x(32 * 64);
        for (auto& v : x) v = nd(rng) * scale;
        std::vector<uint8_t> q;
        const std::vector<float> y = roundtrip(x, &q);
        for (size_t b = 0; b < x.size() / 32; ++b) {
            float amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
            const int e = static_cast<int>(std::floor(std::log2(static_cast<double>(amax)))) - 2 + 127;
            ASSERT_EQ(q[b * 17], e) << "block " << b << " amax " << amax;
            const double d = std::ldexp(1.0, e - 127);  // E2M1 unit of this block
            for (int j = 0; j < 32; ++j) {
                const double v = x[b * 32 + j];
                double best = INFINITY;
                for (int c = 0; c < 16; ++c) best = std::min(best, std::fabs(ref::kMxfp4Values[c] * 0.5 * d - v));
                EXPECT_EQ(std::fabs(y[b * 32 + j] - v), best) << "block " << b << " elem " << j << " x " << v;
            }
        }
    }
}

TEST(QuantMxfp4, GridValuesRoundTripExactly) {
    std::mt19937 rng(7);
    std::vector<float> x(32 * 32);
    for (auto& v : x) v = std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10) * (rng() % 2 ? 1.0f : -1.0f);
    const std::vector<float> once = roundtrip(x);
    EXPECT_EQ(roundtrip(once), once);  // re-quantizing grid values is lossless
}

TEST(QuantMxfp4, EdgeBlocksStayFinite) {
    std::vector<float> x(96, 0.0f);                 // all zeros
    for (int j = 32; j < 64; ++j) x[j] = 1e-40f;    // denormals: exponent clamps at 0
    for (int j = 64; j < 96; ++j) x[j] = j % 2 ? 3e38f : -3e38f;  // near FLT_MAX: exponent clamps at 254
    const std::vector<float> y = roundtrip(x);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.0f);
    for (float v : y) EXPECT_TRUE(std::isfinite(v));
    EXPECT_GT(y[65], 1e38f);
    EXPECT_LT(y[64], -1e38f);
}

// The E8M0 half-scale is built from float bits; every one of the 256 bytes equals 2^(e - 128)
// computed by the C library (subnormals at e = 0, 1 included).
TEST(QuantMxfp4, E8m0HalfEqualsLdexpForEveryByte) {
    for (int e = 0; e < 256; ++e) {
        const float want = std::ldexp(1.0f, e - 128);
        const float got = moe::ref::e8m0_half(static_cast<uint8_t>(e));
        EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0) << "e = " << e << ": " << got << " vs " << want;
    }
}
