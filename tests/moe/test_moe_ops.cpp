// Op-test harness of the MoE block: random inputs over many shapes and every router variant,
// fast path (every ISA path this CPU has, chosen in-process through CpuKernels) against the fp64
// reference. Expert ids and counts are compared exactly, weights to f32 rounding, outputs by NMSE
// with a derived threshold (moe_test_util.h). Case names carry every parameter, e.g.
// Moe/OpTest.Block/T1_E257_k8_D100_F70_softmax_norm.
//
// Modes: `test` (default) checks every case against the reference; `perf`
// (MOE_OPTEST_MODE=perf ./test_moe_ops [--gtest_filter=...]) times the fast path of every case on
// every ISA path and prints one row per case, asserting nothing about speed. Model-sized shapes are
// timed by `moe bench-moe` (tools/lib/cmd_bench_moe.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <cstdlib>
#include <string>

#include "core/timer.h"
#include "moe_test_util.h"

using namespace moe;
using namespace moe::test;

namespace {

struct OpCase {
    int64_t T;
    int E, k;
    int64_t D, F;
    Variant v;
    bool hot = false;  // every token routed to expert 0 (a hot expert)
};

std::string case_name(const testing::TestParamInfo<OpCase>& i) {
    const OpCase& c = i.param;
    return "T" + std::to_string(c.T) + "_E" + std::to_string(c.E) + "_k" + std::to_string(c.k) + "_D" +
           std::to_string(c.D) + "_F" + std::to_string(c.F) + "_" + variant_name(c.v) + (c.hot ? "_hot" : "");
}

std::vector<OpCase> all_cases() {
    struct Shape {
        int64_t T;
        int E, k;
        int64_t D, F;
        bool hot;
    };
    const Shape shapes[] = {
        {1, 1, 1, 32, 32, false},      // E = 1
        {1, 8, 2, 64, 96, false},      // decode, Mixtral-like routing
        {1, 257, 8, 100, 70, false},   // E = 257 (prime), D and F not multiples of 16/32/64
        {7, 8, 8, 48, 40, false},      // k = E
        {3, 257, 257, 17, 9, false},   // k = E = 257
        {5, 16, 4, 33, 17, false},     // odd sizes everywhere
        {9, 256, 8, 64, 32, false},    // DeepSeek-V3 topology (8 groups of 32)
        {33, 60, 4, 96, 72, false},    // Qwen1.5-MoE-like E
        {64, 64, 8, 128, 96, false},   // prefill, OLMoE-like routing
        {130, 16, 2, 40, 24, false},   // more rows than one row tile per expert
        {48, 8, 2, 64, 48, true},      // every token to one expert
        {40, 16, 1, 40, 24, true},     // k = 1, all tokens on one expert
    };
    std::vector<OpCase> v;
    for (const Shape& s : shapes)
        for (Variant var : all_variants()) v.push_back({s.T, s.E, s.k, s.D, s.F, var, s.hot});
    return v;
}

// Relative gap below which f32 routing may legitimately choose a different expert set than the
// fp64 reference: router logits carry f32 rounding of ~1e-6 relative (dot of length D <= 128 here).
constexpr double kTieGap = 1e-4;

class OpTest : public testing::TestWithParam<OpCase> {};

bool perf_mode() {
    const char* m = std::getenv("MOE_OPTEST_MODE");
    return m && std::string(m) == "perf";
}

// perf mode: time the fast path only (no reference), >= 0.2 s per ISA path, print a row.
void run_perf(const OpCase& c, const MoeSpec& spec, const MoeWeights& w, const std::vector<float>& x) {
    ThreadPool pool(2);
    std::vector<float> y(static_cast<size_t>(c.T * c.D));
    const double flops = 2.0 * 3.0 * static_cast<double>(c.T * c.k * c.D * c.F);
    for (kernels::Isa isa : kernels::supported_isas()) {
        const kernels::CpuKernels kern(isa);
        MoeBlock block(spec, w, kern, c.T, pool.size());
        block.forward(pool, x.data(), c.T, y.data());  // warm-up
        int reps = 0;
        Timer timer;
        do {
            block.forward(pool, x.data(), c.T, y.data());
            ++reps;
        } while (timer.seconds() < 0.2);
        const double sec = timer.seconds() / reps;
        std::printf("perf %-40s %-7s %10.3f ms %8.2f GFLOP/s\n",
                    case_name({c, 0}).c_str(), kernels::isa_name(isa), sec * 1e3, flops / sec * 1e-9);
    }
}

TEST_P(OpTest, Block) {
    const OpCase& c = GetParam();
    const MoeSpec spec = make_spec(c.v, c.E, c.k, c.D, c.F);
    const uint64_t seed = static_cast<uint64_t>(c.T * 1000003 + c.E * 7919 + c.k * 131 + c.D * 17 + c.F) * 8 +
                          static_cast<uint64_t>(c.v);
    TestModel model = make_model(spec, seed, 2.0f, c.hot ? 0 : -1);
    const MoeWeights w = model.views(3);
    const std::vector<float> x = random_x(c.T, c.D, seed + 1, c.hot);
    if (perf_mode()) {
        run_perf(c, spec, w, x);
        return;
    }
    const RefOutput ref = moe_reference(spec, w, x.data(), c.T);

    std::vector<char> use(static_cast<size_t>(c.T), 1);
    int64_t ambiguous = 0;
    for (int64_t t = 0; t < c.T; ++t)
        if (ref.margin[static_cast<size_t>(t)] < kTieGap) {
            use[static_cast<size_t>(t)] = 0;
            ++ambiguous;
        }
    ASSERT_LE(ambiguous, std::max<int64_t>(1, c.T / 8)) << "too many near-ties in the random routing";
    if (c.hot) {
        for (int64_t t = 0; t < c.T; ++t) ASSERT_EQ(ref.ids[static_cast<size_t>(t * c.k)], 0);
    }

    ThreadPool pool(2);
    for (kernels::Isa isa : kernels::supported_isas()) {
        SCOPED_TRACE(kernels::isa_name(isa));
        const kernels::CpuKernels kern(isa);
        MoeBlock block(spec, w, kern, c.T, pool.size());
        std::vector<float> y(static_cast<size_t>(c.T * c.D), std::nanf(""));
        RoutingStats stats(c.E);
        block.forward(pool, x.data(), c.T, y.data(), {nullptr, &stats});
        const Routing& r = block.last_routing();

        // ids (as a set; slot order is checked against the fast path's own scores) and weights
        std::vector<int64_t> ref_counts(static_cast<size_t>(c.E), 0);
        for (int64_t t = 0; t < c.T; ++t) {
            const int32_t* ids = r.ids + t * c.k;
            for (int j = 0; j + 1 < c.k; ++j) {
                const float a = r.select[t * c.E + ids[j]], b = r.select[t * c.E + ids[j + 1]];
                ASSERT_TRUE(a > b || (a == b && ids[j] < ids[j + 1])) << "slot order, token " << t;
            }
            if (!use[static_cast<size_t>(t)]) continue;
            std::map<int, double> want;
            for (int j = 0; j < c.k; ++j) {
                want[ref.ids[static_cast<size_t>(t * c.k + j)]] = ref.weights[static_cast<size_t>(t * c.k + j)];
                ++ref_counts[static_cast<size_t>(ref.ids[static_cast<size_t>(t * c.k + j)])];
            }
            for (int j = 0; j < c.k; ++j) {
                auto it = want.find(ids[j]);
                ASSERT_NE(it, want.end()) << "token " << t << " slot " << j << ": expert " << ids[j]
                                          << " not selected by the reference";
                EXPECT_NEAR(r.weights[t * c.k + j], it->second, 3e-5 * (1.0 + std::fabs(it->second)))
                    << "token " << t << " expert " << ids[j];
            }
        }
        // per-expert counts exactly (the dispatch plan and the stats agree with the reference)
        if (ambiguous == 0) {
            for (int e = 0; e < c.E; ++e) {
                ASSERT_EQ(block.last_plan().counts[e], ref_counts[static_cast<size_t>(e)]) << "expert " << e;
                ASSERT_EQ(stats.counts()[static_cast<size_t>(e)], ref_counts[static_cast<size_t>(e)]);
            }
        }
        EXPECT_EQ(block.last_plan().n_rows, c.T * c.k);  // dropless

        const double err = nmse(y.data(), ref.y.data(), c.T, c.D, use);
        const double thr = nmse_threshold(c.D, std::max(c.F, spec.n_ff_shared), c.k);
        EXPECT_LT(err, thr) << "nmse " << err << " threshold " << thr;
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.3g (threshold %.3g)", err, thr);
        RecordProperty(std::string("nmse_") + kernels::isa_name(isa), buf);
    }
}

INSTANTIATE_TEST_SUITE_P(Moe, OpTest, testing::ValuesIn(all_cases()), case_name);

}  // namespace
