// Dense projection op (threads + bias around the MoE layer's f32 matmul kernels) vs an fp64 oracle,
// every ISA, awkward sizes; prefill vs decode and thread-count independence bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "dense_test_util.h"
#include "kernels/cpu/matmul_dense.h"

using namespace moe;

namespace {
constexpr double kU = 1.0 / (1 << 24);

struct Shape {
    int64_t T, N, K;
    bool bias;
};
}  // namespace

TEST(MatmulDense, MatchesFp64OnEveryIsa) {
    Rng rng(0x3a73);
    ThreadPool pool(3);
    const Shape shapes[] = {{1, 1, 1, false},  {1, 33, 80, true},  {7, 64, 128, true}, {5, 19, 4097, false},
                            {70, 50, 300, true}, {3, 200, 17, true}, {1, 512, 64, false}};
    for (kernels::Isa isa : test::dense_isas()) {
        const kernels::CpuKernels ck(isa);
        const kernels::MatmulKernel& kernel = ck.matmul(DType::F32, "test.weight");
        for (const Shape& sh : shapes) {
            const std::vector<float> x = test::random_vec(rng, static_cast<size_t>(sh.T * sh.K));
            const std::vector<float> w = test::random_vec(rng, static_cast<size_t>(sh.N * sh.K));
            const std::vector<float> b = test::random_vec(rng, static_cast<size_t>(sh.N), -4.0f, 4.0f);
            std::vector<float> y(static_cast<size_t>(sh.T * sh.N), -9.0f);
            const MatmulSpec spec{sh.T, sh.N, sh.K, 0};
            cpu::matmul_dense(spec, kernel, x.data(), w.data(), sh.bias ? b.data() : nullptr, y.data(), &pool);
            for (int64_t t = 0; t < sh.T; ++t)
                for (int64_t n = 0; n < sh.N; ++n) {
                    double acc = 0, aabs = 0;
                    for (int64_t k = 0; k < sh.K; ++k) {
                        acc += static_cast<double>(x[t * sh.K + k]) * w[n * sh.K + k];
                        aabs += std::fabs(static_cast<double>(x[t * sh.K + k]) * w[n * sh.K + k]);
                    }
                    if (sh.bias) acc += b[static_cast<size_t>(n)];
                    // A K-term f32 dot product (sequential on the scalar path, lanes + reduction on
                    // SIMD) errs by <= (K + 4) u sum|x w|; the bias add by u (|acc| + |b|).
                    const double tol = (sh.K + 4) * kU * aabs + 2 * kU * (std::fabs(acc) + 4) + 1e-30;
                    ASSERT_NEAR(y[t * sh.N + n], acc, tol) << kernels::isa_name(isa) << " T=" << sh.T << " N=" << sh.N
                                                           << " K=" << sh.K << " t=" << t << " n=" << n;
                }
        }
    }
}

TEST(MatmulDense, PrefillEqualsDecodeAndThreadCountBitExactly) {
    Rng rng(0x3a74);
    ThreadPool pool1(1), pool4(4);
    const int64_t T = 13, N = 37, K = 4096 + 5;
    const std::vector<float> x = test::random_vec(rng, static_cast<size_t>(T * K));
    const std::vector<float> w = test::random_vec(rng, static_cast<size_t>(N * K));
    const std::vector<float> b = test::random_vec(rng, static_cast<size_t>(N));
    for (kernels::Isa isa : test::dense_isas()) {
        const kernels::CpuKernels ck(isa);
        const auto& kernel = ck.matmul(DType::F32, "test.weight");
        std::vector<float> all(static_cast<size_t>(T * N)), all1(all.size());
        cpu::matmul_dense({T, N, K, 0}, kernel, x.data(), w.data(), b.data(), all.data(), &pool4);
        cpu::matmul_dense({T, N, K, 0}, kernel, x.data(), w.data(), b.data(), all1.data(), &pool1);
        ASSERT_EQ(all, all1) << kernels::isa_name(isa);
        for (int64_t t = 0; t < T; ++t) {
            std::vector<float> one(static_cast<size_t>(N));
            cpu::matmul_dense({1, N, K, 0}, kernel, x.data() + t * K, w.data(), b.data(), one.data(), nullptr);
            for (int64_t n = 0; n < N; ++n) ASSERT_EQ(one[n], all[t * N + n]) << kernels::isa_name(isa) << " t=" << t;
        }
    }
}

// W rows further apart than K floats (a view into a wider matrix) are honoured.
TEST(MatmulDense, RowStride) {
    Rng rng(0x3a75);
    const int64_t T = 2, N = 5, K = 20, ld = 32;
    const std::vector<float> x = test::random_vec(rng, static_cast<size_t>(T * K));
    std::vector<float> wide = test::random_vec(rng, static_cast<size_t>(N * ld));
    std::vector<float> packed(static_cast<size_t>(N * K));
    for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) packed[n * K + k] = wide[n * ld + k];
    for (kernels::Isa isa : test::dense_isas()) {
        const kernels::CpuKernels ck(isa);
        const auto& kernel = ck.matmul(DType::F32, "w");
        std::vector<float> a(static_cast<size_t>(T * N)), b(a.size());
        cpu::matmul_dense({T, N, K, ld * sizeof(float)}, kernel, x.data(), wide.data(), nullptr, a.data(), nullptr);
        cpu::matmul_dense({T, N, K, 0}, kernel, x.data(), packed.data(), nullptr, b.data(), nullptr);
        EXPECT_EQ(a, b) << kernels::isa_name(isa);
    }
}
