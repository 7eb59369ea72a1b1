// RMSNorm: reference vs an fp64 computation, fast paths vs the same, per-head variant, aliasing.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "dense_test_util.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/ref/rmsnorm.h"

using namespace moe;

namespace {

constexpr double kU = 1.0 / (1 << 24);  // f32 unit roundoff

std::vector<double> rmsnorm64(const std::vector<float>& x, const float* w, int64_t rows, int64_t n, double eps) {
    std::vector<double> y(x.size());
    for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
        const double inv = 1.0 / std::sqrt(ss / n + eps);
        for (int64_t i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] * inv * (w ? w[i] : 1.0);
    }
    return y;
}

struct Case {
    int64_t rows, n;
    float eps;
    bool weight;
};

}  // namespace

TEST(RmsNorm, ReferenceAndFastPathsMatchFp64) {
    Rng rng(0x5eed01);
    const Case cases[] = {{1, 1, 1e-6f, true},   {3, 7, 1e-5f, true},   {4, 16, 1e-6f, false}, {2, 64, 1e-6f, true},
                          {5, 80, 1e-6f, true},  {6, 128, 1e-5f, true}, {2, 4097, 1e-6f, true}, {1, 8192, 1e-5f, true},
                          {3, 33, 0.5f, true}};
    for (const Case& c : cases) {
        // Rows at very different scales (the norm must remove the scale).
        std::vector<float> x = test::random_vec(rng, static_cast<size_t>(c.rows * c.n), -3.0f, 3.0f);
        for (int64_t r = 0; r < c.rows; ++r)
            for (int64_t i = 0; i < c.n; ++i) x[r * c.n + i] *= std::ldexp(1.0f, static_cast<int>(r) * 3 - 4);
        std::vector<float> w = test::random_vec(rng, static_cast<size_t>(c.n), -2.0f, 2.0f);
        const float* wp = c.weight ? w.data() : nullptr;
        const RmsNormSpec spec{c.rows, c.n, c.eps};
        const std::vector<double> y64 = rmsnorm64(x, wp, c.rows, c.n, c.eps);

        // Reference: double sum of squares, then inv rounded to f32 (u), x*inv (u), *w (u): <= 3u
        // relative per element; 4u leaves room for the sqrt/divide in double (~1e-16).
        std::vector<float> y(x.size());
        ref::rmsnorm(spec, x.data(), wp, y.data());
        for (size_t i = 0; i < y.size(); ++i)
            ASSERT_LE(std::fabs(y[i] - y64[i]), 4 * kU * std::fabs(y64[i]) + 1e-30)
                << "ref rows=" << c.rows << " n=" << c.n << " i=" << i;

        for (kernels::Isa isa : test::dense_isas()) {
            // Fast path: sum of n positive squares in 16 f32 lanes (n/16 FMAs each) + 4 reduction adds:
            // relative error <= (n/16 + 5) u; mean/eps/sqrt halve it, 1/sqrt adds ~3u, x*inv*w 2u.
            // Bound: ((n/16 + 5)/2 + 5) u <= (n/32 + 8) u relative.
            const double rel = (static_cast<double>(c.n) / 32 + 8) * kU;
            std::vector<float> yf(x.size());
            cpu::rmsnorm(spec, x.data(), wp, yf.data(), isa);
            for (size_t i = 0; i < yf.size(); ++i)
                ASSERT_LE(std::fabs(yf[i] - y64[i]), rel * std::fabs(y64[i]) + 1e-30)
                    << kernels::isa_name(isa) << " rows=" << c.rows << " n=" << c.n << " i=" << i;
            // In place gives the same bits as out of place.
            std::vector<float> xi = x;
            cpu::rmsnorm(spec, xi.data(), wp, xi.data(), isa);
            for (size_t i = 0; i < yf.size(); ++i) ASSERT_EQ(xi[i], yf[i]) << kernels::isa_name(isa);
        }
    }
}

// Qwen3-MoE q/k norm: the same op with row_len = head_dim over [T, n_head, head_dim]; every head
// chunk is normalised on its own with the one shared weight vector.
TEST(RmsNorm, PerHeadVariantNormalisesEachHeadChunk) {
    Rng rng(0x5eed02);
    for (int64_t head_dim : {64, 80, 128}) {
        const int64_t T = 3, n_head = 5;
        std::vector<float> x = test::random_vec(rng, static_cast<size_t>(T * n_head * head_dim));
        for (size_t i = 0; i < x.size(); ++i) x[i] *= static_cast<float>(1 + (i / head_dim) % 4);  // per-head scales
        std::vector<float> w = test::random_vec(rng, static_cast<size_t>(head_dim));
        const RmsNormSpec spec{T * n_head, head_dim, 1e-6f};
        for (kernels::Isa isa : test::dense_isas()) {
            std::vector<float> y(x.size());
            cpu::rmsnorm(spec, x.data(), w.data(), y.data(), isa);
            for (int64_t r = 0; r < T * n_head; ++r) {
                // each chunk: mean(y^2 / w^2) over the chunk is 1 / (1 + eps / ms) ~ 1
                double ss = 0;
                for (int64_t i = 0; i < head_dim; ++i) {
                    const double z = y[r * head_dim + i] / static_cast<double>(w[i]);
                    ss += z * z;
                }
                EXPECT_NEAR(ss / head_dim, 1.0, 1e-4) << "head row " << r;
                // and the direction of the chunk is kept: y/w proportional to x
                const double ratio = y[r * head_dim] / (static_cast<double>(w[0]) * x[r * head_dim]);
                for (int64_t i = 1; i < head_dim; ++i)
                    ASSERT_NEAR(y[r * head_dim + i] / (static_cast<double>(w[i]) * x[r * head_dim + i]), ratio,
                                1e-5 * ratio);
            }
        }
    }
}
