// RoPE: reference (cache + apply) vs an independent fp64 rotation, both llama.cpp conventions,
// partial rotation, linear and YaRN scaling, positions far from 0, hand-checked pair layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "dense_test_util.h"
#include "kernels/ref/rope.h"

using namespace moe;

namespace {

constexpr double kU = 1.0 / (1 << 24);

// Independent fp64 angle, written from llama.cpp's documented semantics (ggml rope_yarn /
// ggml_rope_yarn_corr_dims): freq_scale = 1/factor; for YaRN the ramp over pair index i between
// floor(corr(beta_fast)) and ceil(corr(beta_slow)) mixes extrapolated and interpolated angles.
void angle64(const RopeSpec& s, double pos, int64_t i, double* c, double* sn) {
    const double inv_freq = std::exp(-2.0 * i / s.n_rot * std::log(static_cast<double>(s.freq_base)));
    const double ext = pos * inv_freq;
    double theta = ext, mag = s.attn_factor;
    if (s.scaling == RopeScaling::Linear) theta = (pos / s.factor) * inv_freq;
    if (s.scaling == RopeScaling::Yarn) {
        const double interp = ext / s.factor;
        theta = interp;
        if (s.ext_factor != 0) {
            auto corr = [&](double beta) {
                // dimension index at which the wavelength 2*pi/inv_freq spans n_ctx_orig / beta turns
                return s.n_rot * std::log(s.n_ctx_orig / (2 * M_PI * beta)) / (2 * std::log(static_cast<double>(s.freq_base)));
            };
            const double lo = std::max(0.0, std::floor(corr(s.beta_fast)));
            const double hi = std::min(static_cast<double>(s.n_rot - 1), std::ceil(corr(s.beta_slow)));
            double ramp = (i - lo) / std::max(0.001, hi - lo);
            ramp = 1.0 - std::clamp(ramp, 0.0, 1.0);
            const double mix = ramp * s.ext_factor;
            theta = interp + (ext - interp) * mix;
            mag *= 1.0 + 0.1 * std::log(static_cast<double>(s.factor));
        }
    }
    *c = std::cos(theta) * mag;
    *sn = std::sin(theta) * mag;
}

// Rotate one [head_dim] row in fp64: pair i = (2i, 2i+1) (normal) or (i, i + n_rot/2) (neox).
void rotate64(const RopeSpec& s, double pos, const float* x, double* y) {
    for (int64_t d = 0; d < s.head_dim; ++d) y[d] = x[d];
    for (int64_t i = 0; i < s.n_rot / 2; ++i) {
        const int64_t a = s.mode == RopeMode::Normal ? 2 * i : i;
        const int64_t b = s.mode == RopeMode::Normal ? 2 * i + 1 : i + s.n_rot / 2;
        double c, sn;
        angle64(s, pos, i, &c, &sn);
        y[a] = x[a] * c - x[b] * sn;
        y[b] = x[a] * sn + x[b] * c;
    }
}

RopeSpec make(RopeMode mode, int64_t head_dim, int64_t n_rot, float base, RopeScaling sc = RopeScaling::None,
              float factor = 1, float attn = 1, float ext = 1, int64_t ctx_orig = 0) {
    RopeSpec s;
    s.mode = mode;
    s.head_dim = head_dim;
    s.n_rot = n_rot;
    s.freq_base = base;
    s.scaling = sc;
    s.factor = factor;
    s.attn_factor = attn;
    s.ext_factor = ext;
    s.n_ctx_orig = ctx_orig;
    return s;
}

}  // namespace

TEST(Rope, MatchesFp64AcrossModesScalingsAndShapes) {
    Rng rng(0x20e);
    std::vector<RopeSpec> specs;
    for (RopeMode m : {RopeMode::Normal, RopeMode::Neox}) {
        specs.push_back(make(m, 64, 64, 10000));
        specs.push_back(make(m, 80, 80, 1e6f));
        specs.push_back(make(m, 128, 128, 500000));
        specs.push_back(make(m, 64, 32, 10000));                                  // n_rot < head_dim
        specs.push_back(make(m, 80, 64, 10000));                                  // 16 dims pass through
        specs.push_back(make(m, 128, 128, 10000, RopeScaling::Linear, 4.0f));
        specs.push_back(make(m, 128, 128, 1e6f, RopeScaling::Yarn, 4.0f, 1.0f, 1.0f, 4096));
        specs.push_back(make(m, 64, 48, 10000, RopeScaling::Yarn, 8.0f, 0.8f, 1.0f, 2048));
        specs.push_back(make(m, 64, 64, 10000, RopeScaling::Yarn, 2.0f, 1.0f, 0.5f, 8192));
    }
    const int64_t n_pos = 9000;
    for (const RopeSpec& s : specs) {
        const RopeCache cache(s, n_pos);
        const int64_t T = 5, n_head = 3;
        // positions not starting at 0, unsorted, including 0 and the last cache row
        const std::vector<int32_t> pos = {1000, 0, 1, 8999, 4097};
        std::vector<float> x = test::random_vec(rng, static_cast<size_t>(T * n_head * s.head_dim), -2.0f, 2.0f);
        std::vector<float> y = x;
        ref::rope_apply(cache, y.data(), T, n_head, pos.data());
        std::vector<double> y64(static_cast<size_t>(s.head_dim));
        const double mag = std::max(1.0, 1.5 * s.attn_factor);  // |cos|,|sin| <= attn * (1 + 0.1 ln factor)
        for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < n_head; ++h) {
                const float* xr = x.data() + (t * n_head + h) * s.head_dim;
                const float* yr = y.data() + (t * n_head + h) * s.head_dim;
                rotate64(s, pos[static_cast<size_t>(t)], xr, y64.data());
                for (int64_t d = s.n_rot; d < s.head_dim; ++d) ASSERT_EQ(yr[d], xr[d]) << "pass-through dim " << d;
                for (int64_t d = 0; d < s.n_rot; ++d) {
                    // cos/sin rounded to f32 (u * mag each), two products and a sum in f32 (3u of
                    // |x0|mag + |x1|mag): <= 5u * mag * (|x0| + |x1|) <= 5u * mag * 4 with |x| <= 2.
                    // The fp64 angles of test and cache agree to ~1e-16 * pos, far below that.
                    ASSERT_NEAR(yr[d], y64[static_cast<size_t>(d)], 20 * kU * mag)
                        << "mode=" << static_cast<int>(s.mode) << " hd=" << s.head_dim << " n_rot=" << s.n_rot
                        << " scaling=" << static_cast<int>(s.scaling) << " t=" << t << " h=" << h << " d=" << d;
                }
            }
    }
}

// The two layouts on a hand-made vector: position 1, base chosen so theta_0 = 1 rad.
TEST(Rope, PairLayoutsByHand) {
    const double c = std::cos(1.0), s = std::sin(1.0);
    // head_dim 4, n_rot 4: theta_0 = pos, theta_1 = pos * base^(-1/2) = pos / 100 with base 10000.
    const double c1 = std::cos(0.01), s1 = std::sin(0.01);
    {
        const RopeCache cache(make(RopeMode::Normal, 4, 4, 10000), 4);
        float x[4] = {1, 2, 3, 4};
        const int32_t p = 1;
        ref::rope_apply(cache, x, 1, 1, &p);
        // normal: pairs (x0, x1) with theta_0 and (x2, x3) with theta_1
        EXPECT_NEAR(x[0], 1 * c - 2 * s, 1e-6);
        EXPECT_NEAR(x[1], 1 * s + 2 * c, 1e-6);
        EXPECT_NEAR(x[2], 3 * c1 - 4 * s1, 1e-6);
        EXPECT_NEAR(x[3], 3 * s1 + 4 * c1, 1e-6);
    }
    {
        const RopeCache cache(make(RopeMode::Neox, 4, 4, 10000), 4);
        float x[4] = {1, 2, 3, 4};
        const int32_t p = 1;
        ref::rope_apply(cache, x, 1, 1, &p);
        // neox: pairs (x0, x2) with theta_0 and (x1, x3) with theta_1
        EXPECT_NEAR(x[0], 1 * c - 3 * s, 1e-6);
        EXPECT_NEAR(x[2], 1 * s + 3 * c, 1e-6);
        EXPECT_NEAR(x[1], 2 * c1 - 4 * s1, 1e-6);
        EXPECT_NEAR(x[3], 2 * s1 + 4 * c1, 1e-6);
    }
    {
        // position 0 is the identity; linear scaling by 2 at position 2 equals no scaling at position 1
        const RopeCache plain(make(RopeMode::Neox, 8, 8, 10000), 4);
        const RopeCache lin(make(RopeMode::Neox, 8, 8, 10000, RopeScaling::Linear, 2.0f), 4);
        float a[8] = {1, -2, 3, -4, 5, -6, 7, -8}, b[8], z[8];
        std::copy(a, a + 8, b);
        std::copy(a, a + 8, z);
        const int32_t p1 = 1, p2 = 2, p0 = 0;
        ref::rope_apply(plain, a, 1, 1, &p1);
        ref::rope_apply(lin, b, 1, 1, &p2);
        ref::rope_apply(plain, z, 1, 1, &p0);
        for (int i = 0; i < 8; ++i) {
            EXPECT_FLOAT_EQ(a[i], b[i]);
            EXPECT_EQ(z[i], static_cast<float>(i % 2 ? -(i + 1) : i + 1));
        }
    }
}

// YaRN pieces: with ext_factor 0 it is plain linear interpolation (no magnitude change); with
// ext_factor 1 the fastest pairs (i <= lo) keep the unscaled angle and the slowest (i >= hi) are
// interpolated, and the magnitude is 1 + 0.1 ln(factor).
TEST(Rope, YarnLimits) {
    const RopeSpec lin = make(RopeMode::Neox, 128, 128, 10000, RopeScaling::Linear, 4.0f);
    const RopeSpec y0 = make(RopeMode::Neox, 128, 128, 10000, RopeScaling::Yarn, 4.0f, 1.0f, 0.0f, 4096);
    const RopeSpec y1 = make(RopeMode::Neox, 128, 128, 10000, RopeScaling::Yarn, 4.0f, 1.0f, 1.0f, 4096);
    const RopeSpec none = make(RopeMode::Neox, 128, 128, 10000);
    const double mag = 1.0 + 0.1 * std::log(4.0);
    for (int64_t i = 0; i < 64; ++i) {
        double c0, s0, cl, sl, c1, s1, cn, sn;
        rope_angle(y0, 777, i, &c0, &s0);
        rope_angle(lin, 777, i, &cl, &sl);
        EXPECT_NEAR(c0, cl, 1e-12);
        EXPECT_NEAR(s0, sl, 1e-12);
        rope_angle(y1, 777, i, &c1, &s1);
        EXPECT_NEAR(c1 * c1 + s1 * s1, mag * mag, 1e-12);
        rope_angle(none, 777, i, &cn, &sn);
        // corr(32) = 128 ln(4096 / (64 pi)) / (2 ln 10000) = 20.94 -> lo = 20; corr(1) -> hi = 46
        if (i <= 20) {
            EXPECT_NEAR(c1, cn * mag, 1e-9) << i;
            EXPECT_NEAR(s1, sn * mag, 1e-9) << i;
        }
        if (i >= 46) {
            EXPECT_NEAR(c1, cl * mag, 1e-9) << i;
            EXPECT_NEAR(s1, sl * mag, 1e-9) << i;
        }
    }
}

TEST(Rope, InvalidSpecsAreErrors) {
    EXPECT_THROW(RopeCache(make(RopeMode::Normal, 64, 63, 10000), 8), moe::Error);
    EXPECT_THROW(RopeCache(make(RopeMode::Normal, 64, 66, 10000), 8), moe::Error);
    EXPECT_THROW(RopeCache(make(RopeMode::Normal, 64, 64, 0.0f), 8), moe::Error);
    EXPECT_THROW(RopeCache(make(RopeMode::Normal, 64, 64, 10000, RopeScaling::Yarn, 4.0f, 1, 1, 0), 8), moe::Error);
    try {
        RopeCache(make(RopeMode::Normal, 64, 66, 10000), 8);
    } catch (const moe::Error& e) {
        EXPECT_NE(std::string(e.what()).find("[rope]"), std::string::npos) << e.what();
    }
}
