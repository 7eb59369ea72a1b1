// Softmax, elementwise ops, f32/f16/bf16 row conversion and embedding lookup vs fp64 / exact
// expectations, and the embedding's out-of-range error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "dense_test_util.h"
#include "kernels/cpu/dequant_row.h"
#include "kernels/cpu/glu.h"
#include "kernels/ref/exp_f32.h"
#include "kernels/ref/dequant_row.h"
#include "kernels/ref/elementwise.h"
#include "kernels/ref/embedding.h"
#include "kernels/ref/softmax.h"

using namespace moe;

namespace {
constexpr double kU = 1.0 / (1 << 24);

// Independent fp64 decode of an IEEE half.
double half64(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0) v = std::ldexp(m, -24);
    else if (e == 31) v = m ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
    else v = std::ldexp(1024 + m, e - 25);
    return s ? -v : v;
}
}  // namespace

TEST(Softmax, MatchesFp64WithMaskedAndLargeValues) {
    Rng rng(0x50f7);
    for (int64_t n : {1, 2, 17, 1000, 151936 / 8}) {
        const int64_t rows = 3;
        std::vector<float> x = test::random_vec(rng, static_cast<size_t>(rows * n), -10.0f, 10.0f);
        for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(n + i)] += 1000.0f;  // would overflow exp without max subtraction
        if (n > 2)
            for (int64_t i = 0; i < n; i += 3) x[static_cast<size_t>(2 * n + i)] = -INFINITY;  // masked entries
        std::vector<float> y(x.size());
        ref::softmax({rows, n}, x.data(), y.data());
        for (int64_t r = 0; r < rows; ++r) {
            double mx = -INFINITY, sum = 0;
            for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(x[r * n + i]));
            for (int64_t i = 0; i < n; ++i) sum += std::exp(x[r * n + i] - mx);
            for (int64_t i = 0; i < n; ++i) {
                const double p = std::exp(x[r * n + i] - mx) / sum;
                // exp of an exactly representable difference (x - max rounds once: u |x - max| of
                // absolute argument error, <= 20 u here), exp itself ~1u, 1/sum (double) and the
                // final product 2u: relative error <= 24u; masked entries exactly 0.
                if (std::isinf(x[r * n + i])) ASSERT_EQ(y[r * n + i], 0.0f);
                else ASSERT_NEAR(y[r * n + i], p, 24 * kU * p + 1e-45) << "n=" << n << " r=" << r << " i=" << i;
            }
        }
    }
}

TEST(Elementwise, MatchFp64) {
    Rng rng(0xe1e);
    const int64_t n = 1001;
    std::vector<float> a = test::random_vec(rng, n, -20.0f, 20.0f), b = test::random_vec(rng, n, -3.0f, 3.0f);
    a[0] = -100.0f;  // exp(100) overflows f32: silu must still give ~ -0
    a[1] = 100.0f;
    a[2] = 0.0f;
    std::vector<float> y(n);
    ref::add(n, a.data(), b.data(), y.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], static_cast<float>(static_cast<double>(a[i]) + b[i]));
    ref::mul(n, a.data(), b.data(), y.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], static_cast<float>(static_cast<double>(a[i]) * b[i]));
    ref::scale(n, a.data(), 0.25f, y.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], a[i] * 0.25f);
    std::vector<float> s(n), g(n);
    ref::silu(n, a.data(), s.data());
    ref::swiglu(n, a.data(), b.data(), g.data());
    for (int64_t i = 0; i < n; ++i) {
        const double x = a[i], sil = x / (1.0 + std::exp(-x));
        // exp (~1u, with argument exact), 1 + e (u), x / (.) (u): relative <= 4u; swiglu one more u.
        ASSERT_NEAR(s[i], sil, 4 * kU * std::fabs(sil) + 1e-38) << "x=" << x;
        ASSERT_NEAR(g[i], sil * b[i], 5 * kU * std::fabs(sil * b[i]) + 1e-38) << "x=" << x;
    }
    // in place
    std::vector<float> c = a;
    ref::swiglu(n, c.data(), b.data(), c.data());
    EXPECT_EQ(c, g);
}

// ref::exp_f32 (the activations' exp): the correctly rounded exp (the fp64 exp rounded once) on
// every float of [-104, 89] with a random low-bit pattern, all but a tiny share exactly and the rest
// within one ulp; the limits and NaN exactly.
TEST(ExpF32, CorrectlyRoundedAlmostEverywhere) {
    Rng rng(0xe4f);
    int64_t n = 0, off = 0;
    for (int i = 0; i < 2000000; ++i) {
        const float x = static_cast<float>(rng.uniform(-104.0f, 89.0f));
        const float want = static_cast<float>(std::exp(static_cast<double>(x))), got = ref::exp_f32(x);
        ++n;
        if (got == want) continue;
        ++off;
        ASSERT_EQ(std::fabs(std::nextafter(want, got) - got), 0.0f) << "x=" << x << " exp " << got << " vs " << want;
    }
    EXPECT_LE(off, n / 10000) << off << " of " << n << " not correctly rounded";
    std::printf("exp_f32: %lld of %lld random arguments not correctly rounded (1 ulp)\n", static_cast<long long>(off), static_cast<long long>(n));
    EXPECT_EQ(ref::exp_f32(0.0f), 1.0f);
    EXPECT_EQ(ref::exp_f32(-0.0f), 1.0f);
    EXPECT_EQ(ref::exp_f32(89.0f), INFINITY);
    EXPECT_EQ(ref::exp_f32(1e30f), INFINITY);
    EXPECT_EQ(ref::exp_f32(INFINITY), INFINITY);
    EXPECT_EQ(ref::exp_f32(-104.0f), 0.0f);
    EXPECT_EQ(ref::exp_f32(-INFINITY), 0.0f);
    EXPECT_TRUE(std::isnan(ref::exp_f32(NAN)));
    EXPECT_EQ(ref::exp_f32(-87.5f), static_cast<float>(std::exp(-87.5)));    // subnormal results
    EXPECT_EQ(ref::exp_f32(-100.0f), static_cast<float>(std::exp(-100.0)));
}

// The experts' gated activation (cpu::glu): every ISA path gives the scalar reference's bits
// (glu1), SwiGLU and gpt-oss's clamped form, with and without biases, at row lengths around the
// 16-lane step, on random values including the exp limits and signed zeros; and glu1 is within a
// few roundings of the fp64 activation.
TEST(Glu, EveryPathEqualsReferenceAndFp64) {
    Rng rng(0x6c0);
    const cpu::GluSpec specs[2] = {{}, {true, 7.0f, 1.702f}};
    for (const cpu::GluSpec& s : specs) {
        for (int64_t n : {1, 15, 16, 17, 33, 1001}) {
            for (bool bias : {false, true}) {
                std::vector<float> g = test::random_vec(rng, static_cast<size_t>(n), -20.0f, 20.0f);
                const std::vector<float> u = test::random_vec(rng, static_cast<size_t>(n), -9.0f, 9.0f);
                const std::vector<float> gb = test::random_vec(rng, static_cast<size_t>(n), -1.0f, 1.0f),
                                         ub = test::random_vec(rng, static_cast<size_t>(n), -1.0f, 1.0f);
                const float special[] = {-120.0f, 120.0f, 0.0f, -0.0f, 88.7f, -88.7f, 103.9f, -103.9f, 1e-30f, -1e-30f};
                for (size_t i = 0; i < std::size(special) && i < g.size(); ++i) g[i * 7 % g.size()] = special[i];
                std::vector<float> want(g.size());
                for (size_t i = 0; i < g.size(); ++i) want[i] = cpu::glu1(s, bias ? g[i] + gb[i] : g[i], bias ? u[i] + ub[i] : u[i]);
                for (kernels::Isa isa : kernels::supported_isas()) {
                    std::vector<float> h = g;
                    cpu::glu(s, n, h.data(), u.data(), bias ? gb.data() : nullptr, bias ? ub.data() : nullptr, isa);
                    ASSERT_EQ(0, std::memcmp(h.data(), want.data(), want.size() * sizeof(float)))
                        << kernels::isa_name(isa) << " n=" << n << " clamped=" << s.clamped << " bias=" << bias;
                }
                for (size_t i = 0; i < g.size(); ++i) {
                    double gg = bias ? static_cast<double>(g[i] + gb[i]) : g[i];  // the f32 sums, exact in fp64
                    double uu = bias ? static_cast<double>(u[i] + ub[i]) : u[i];
                    double y, arg_err = 0;  // relative error of exp from its argument's rounding
                    if (!s.clamped) {
                        y = gg / (1.0 + std::exp(-gg)) * uu;  // -g is exact
                    } else {
                        const double L = s.limit, a = s.alpha;
                        gg = std::min(gg, L);
                        uu = std::min(std::max(uu, -L), L);
                        y = (uu + 1.0) * (gg / (1.0 + std::exp(-a * gg)));
                        arg_err = kU * std::fabs(a * gg);  // (-alpha) * g rounds once in f32
                    }
                    // exp (<= 1 ulp = 2u) plus its argument's error, 1 + e, the division, the product
                    // and u + 1: <= 6u + arg_err relative
                    const double tol = (6 * kU + arg_err) * std::fabs(y) + 1e-37;
                    // exp past the float range: inf in f32, so the activation is a signed zero
                    const double arg = s.clamped ? -static_cast<double>(s.alpha) * gg : -gg;
                    if (std::exp(arg) >= 3.4028235677973366e38) {  // FLT_MAX + half an ulp: rounds to inf
                        ASSERT_EQ(want[i], 0.0f) << "g=" << g[i];
                        continue;
                    }
                    ASSERT_NEAR(want[i], y, tol) << "g=" << g[i] << " u=" << u[i] << " clamped=" << s.clamped;
                }
            }
        }
    }
}

TEST(DequantRow, F16AllValuesAndBf16AllValuesOnEveryIsa) {
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> r(65536);
    ref::dequant_row(DType::F16, all.data(), r.data(), 65536);
    for (uint32_t i = 0; i < 65536; ++i) {
        const double want = half64(all[i]);
        if (std::isnan(want)) ASSERT_TRUE(std::isnan(r[i])) << i;
        else ASSERT_EQ(static_cast<double>(r[i]), want) << i;
    }
    std::vector<float> rb(65536);
    ref::dequant_row(DType::BF16, all.data(), rb.data(), 65536);
    for (uint32_t i = 0; i < 65536; ++i) {
        uint32_t bits;
        std::memcpy(&bits, &rb[i], 4);
        ASSERT_EQ(bits, i << 16);
    }
    for (kernels::Isa isa : test::dense_isas()) {
        for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{100}, int64_t{65536}}) {
            for (int off : {0, 3}) {  // unaligned source
                if (n + off > 65536) continue;
                std::vector<float> f(static_cast<size_t>(n) + 1, 123.0f);
                cpu::dequant_row(DType::F16, all.data() + off, f.data(), n, isa);
                for (int64_t i = 0; i < n; ++i) {
                    if (std::isnan(r[i + off])) ASSERT_TRUE(std::isnan(f[i]));
                    else ASSERT_EQ(f[i], r[i + off]) << kernels::isa_name(isa) << " n=" << n << " i=" << i;
                }
                ASSERT_EQ(f[static_cast<size_t>(n)], 123.0f) << "wrote past the row";
                cpu::dequant_row(DType::BF16, all.data() + off, f.data(), n, isa);
                for (int64_t i = 0; i < n; ++i) ASSERT_EQ(std::memcmp(&f[i], &rb[i + off], 4), 0);
            }
        }
        std::vector<float> src = {1.5f, -2.25f, 3.0f}, dst(3);
        cpu::dequant_row(DType::F32, src.data(), dst.data(), 3, isa);
        EXPECT_EQ(dst, src);
    }
    std::vector<float> dst(32);
    std::vector<uint8_t> q(34);
    EXPECT_THROW(ref::dequant_row(DType::Q8_K, q.data(), dst.data(), 256), moe::Error);  // no dequantizer for Q8_K (not a weight format)
    EXPECT_THROW(cpu::dequant_row(DType::Q8_K, q.data(), dst.data(), 256), moe::Error);
}

TEST(Embedding, LooksUpRowsInEveryFloatType) {
    Rng rng(0xe3b);
    const int64_t vocab = 50, dim = 40;
    const std::vector<float> table = test::round_f16(test::random_vec(rng, static_cast<size_t>(vocab * dim)));
    const std::vector<uint16_t> t16 = test::to_f16(table);
    std::vector<uint16_t> tb(table.size());
    for (size_t i = 0; i < table.size(); ++i) tb[i] = fp32_to_bf16(table[i]);
    const std::vector<int32_t> ids = {7, 0, 49, 7, 23};
    for (DType type : {DType::F32, DType::F16, DType::BF16}) {
        const void* data = type == DType::F32 ? static_cast<const void*>(table.data())
                           : type == DType::F16 ? static_cast<const void*>(t16.data())
                                                : static_cast<const void*>(tb.data());
        std::vector<float> out(ids.size() * dim);
        ref::embedding_lookup({type, vocab, dim}, data, ids.data(), static_cast<int64_t>(ids.size()), out.data());
        for (size_t t = 0; t < ids.size(); ++t)
            for (int64_t i = 0; i < dim; ++i) {
                const float want = type == DType::BF16 ? bf16_to_fp32(tb[ids[t] * dim + i]) : table[ids[t] * dim + i];
                ASSERT_EQ(out[t * dim + i], want) << dtype_name(type) << " t=" << t << " i=" << i;
            }
    }
}

TEST(Embedding, OutOfRangeIdIsAClearError) {
    const int64_t vocab = 10, dim = 4;
    std::vector<float> table(vocab * dim, 1.0f);
    for (int32_t bad : {10, -1, 1 << 30}) {
        const std::vector<int32_t> ids = {1, 2, bad};
        std::vector<float> out(ids.size() * dim, -5.0f);
        try {
            ref::embedding_lookup({DType::F32, vocab, dim}, table.data(), ids.data(), 3, out.data());
            FAIL() << "no error for id " << bad;
        } catch (const moe::Error& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find("[embedding]"), std::string::npos) << m;
            EXPECT_NE(m.find("token id " + std::to_string(bad)), std::string::npos) << m;
            EXPECT_NE(m.find("vocabulary of 10 tokens"), std::string::npos) << m;
        }
        for (float v : out) EXPECT_EQ(v, -5.0f) << "output written before the error";
    }
    std::vector<uint8_t> q(34 * 10);
    const int32_t id = 0;
    std::vector<float> out(32);
    EXPECT_THROW(ref::embedding_lookup({DType::Q8_K, 10, 256}, q.data(), &id, 1, out.data()), moe::Error);
}
