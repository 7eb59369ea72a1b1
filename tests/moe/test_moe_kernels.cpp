// f32 matmul kernels: every ISA path this CPU has against the scalar reference kernel and an fp64
// dot product, over awkward sizes; and the determinism contract (a dot product's bits do not
// depend on the block it is computed in).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/cpu/cpu_kernels.h"

using namespace moe;
using namespace moe::kernels;

namespace {

struct Problem {
    int64_t m, K, N;
    std::vector<float> w, x;
    size_t stride;  // bytes between weight rows (>= K floats: rows may be padded)
};

Problem make_problem(int64_t m, int64_t K, int64_t N, int64_t pad, uint64_t seed) {
    Problem p{m, K, N, {}, {}, static_cast<size_t>(K + pad) * sizeof(float)};
    Rng rng(seed);
    p.w.resize(static_cast<size_t>(N * (K + pad)));
    for (auto& v : p.w) v = rng.normal();
    p.x.resize(static_cast<size_t>(m * (K + 3)));  // ldx = K + 3
    for (auto& v : p.x) v = rng.normal();
    return p;
}

std::vector<float> run(const MatmulKernel& k, const Problem& p, int64_t n0, int64_t n1) {
    std::vector<float> y(static_cast<size_t>(p.m * (n1 - n0)), std::nanf(""));
    MatmulArgs a;
    a.w = p.w.data();
    a.w_row_stride = p.stride;
    a.x = p.x.data();
    a.ldx = p.K + 3;
    a.y = y.data();
    a.ldy = n1 - n0;
    a.m = p.m;
    a.K = p.K;
    a.n0 = n0;
    a.n1 = n1;
    k(a);
    return y;
}

class Kernels : public testing::TestWithParam<Isa> {};

TEST_P(Kernels, MatchReferenceOnAwkwardShapes) {
    const CpuKernels ck(GetParam());
    const MatmulKernel& k = ck.matmul(DType::F32, "w");
    for (int64_t m : {1, 2, 3, 4, 5, 9, 33, 70})
        for (int64_t K : {1, 7, 8, 15, 16, 17, 31, 33, 100, 257, 520})
            for (int64_t N : {1, 3, 4, 5, 13}) {
                const Problem p = make_problem(m, K, N, K % 3, static_cast<uint64_t>(m * 1000 + K * 10 + N));
                const std::vector<float> y = run(k, p, 0, N);
                for (int64_t r = 0; r < m; ++r)
                    for (int64_t n = 0; n < N; ++n) {
                        double ref = 0, mag = 0;
                        const float* wr = reinterpret_cast<const float*>(reinterpret_cast<const char*>(p.w.data()) + n * p.stride);
                        for (int64_t i = 0; i < K; ++i) {
                            ref += static_cast<double>(wr[i]) * p.x[static_cast<size_t>(r * (K + 3) + i)];
                            mag += std::fabs(static_cast<double>(wr[i]) * p.x[static_cast<size_t>(r * (K + 3) + i)]);
                        }
                        // f32 sum of K products: |error| <= K * u * sum |terms| (u = 2^-24), worst case.
                        const double tol = static_cast<double>(K) * std::ldexp(1.0, -24) * mag + 1e-30;
                        ASSERT_NEAR(y[static_cast<size_t>(r * N + n)], ref, tol)
                            << isa_name(GetParam()) << " m=" << m << " K=" << K << " N=" << N << " r=" << r << " n=" << n;
                    }
            }
}

// Determinism contract: y[r][n] computed alone (m = 1, one column) has the same bits as in any block.
TEST_P(Kernels, DotProductBitsIndependentOfBlocking) {
    const CpuKernels ck(GetParam());
    const MatmulKernel& k = ck.matmul(DType::F32, "w");
    constexpr int64_t M = 37;  // crosses the kernels' 32-row group
    for (int64_t K : {5, 16, 37, 130, 256, 300, 777}) {  // > 256: K is walked in chunks
        const Problem p = make_problem(M, K, 11, 1, static_cast<uint64_t>(K));
        const std::vector<float> full = run(k, p, 0, 11);
        const std::vector<float> part = run(k, p, 3, 10);  // columns 3..9
        for (int64_t r = 0; r < M; ++r)
            for (int64_t n = 3; n < 10; ++n)
                ASSERT_EQ(std::memcmp(&full[static_cast<size_t>(r * 11 + n)], &part[static_cast<size_t>(r * 7 + n - 3)], 4), 0);
        for (int64_t r = 0; r < M; ++r) {
            Problem one = p;
            one.m = 1;
            one.x.assign(p.x.begin() + r * (K + 3), p.x.begin() + (r + 1) * (K + 3));
            for (int64_t n = 0; n < 11; ++n) {
                const std::vector<float> y = run(k, one, n, n + 1);
                ASSERT_EQ(std::memcmp(&y[0], &full[static_cast<size_t>(r * 11 + n)], 4), 0) << "K=" << K << " r=" << r << " n=" << n;
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Moe, Kernels, testing::ValuesIn(supported_isas()),
                         [](const testing::TestParamInfo<Isa>& i) { return std::string(isa_name(i.param)); });

TEST(KernelDispatch, UnsupportedDtypeIsAClearError) {
    const CpuKernels ck(Isa::Scalar);
    EXPECT_TRUE(ck.has_matmul(DType::F32));
    for (DType t : {DType::Q8_0, DType::Q4_K, DType::F16, DType::BF16}) EXPECT_TRUE(ck.has_matmul(t));
    for (DType t : {DType::Q8_K, DType::Q8_1}) {  // types without a kernel (not weight formats)
        EXPECT_FALSE(ck.has_matmul(t));
        try {
            ck.matmul(t, "blk.0.ffn_down_exps.weight");
            FAIL();
        } catch (const moe::Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find("blk.0.ffn_down_exps.weight"), std::string::npos) << msg;
            EXPECT_NE(msg.find(dtype_name(t)), std::string::npos) << msg;
        }
    }
}

TEST(KernelDispatch, ForceIsaFromEnvironment) {
    const char* old = std::getenv("MOE_FORCE_ISA");
    const std::string saved = old ? old : "";
    for (Isa isa : supported_isas()) {
        setenv("MOE_FORCE_ISA", isa_name(isa), 1);
        EXPECT_EQ(CpuKernels::from_env().isa(), isa);
    }
    setenv("MOE_FORCE_ISA", "sse9", 1);
    EXPECT_THROW(CpuKernels::from_env(), moe::Error);
    unsetenv("MOE_FORCE_ISA");
    EXPECT_EQ(CpuKernels::from_env().isa(), best_isa());
    if (old) setenv("MOE_FORCE_ISA", saved.c_str(), 1);
    EXPECT_TRUE(isa_supported(Isa::Scalar));
}

}  // namespace
