// MoeBlock properties: bitwise determinism (thread count, batch position, batch contents), the
// opt-in approximations (hand cases + reports), routing statistics, trace, stage times, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/rng.h"
#include "moe_test_util.h"

using namespace moe;
using namespace moe::test;

namespace {

std::vector<float> run(MoeBlock& b, ThreadPool& pool, const std::vector<float>& x, int64_t T, int64_t D,
                       const MoeObserve& obs = {}) {
    std::vector<float> y(static_cast<size_t>(T * D));
    b.forward(pool, x.data(), T, y.data(), obs);
    return y;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

class Determinism : public testing::TestWithParam<Variant> {};

// Same output bit for bit for every thread count (1, 2, 3, 5 threads; pools larger than the
// machine's cores are fine), on every ISA path.
TEST_P(Determinism, ThreadCount) {
    const int64_t T = 37, D = 72, F = 56;
    const MoeSpec s = make_spec(GetParam(), 16, 4, D, F);
    TestModel m = make_model(s, 11);
    const MoeWeights w = m.views(1);
    const std::vector<float> x = random_x(T, D, 12);
    for (kernels::Isa isa : kernels::supported_isas()) {
        kernels::CpuKernels k(isa);
        MoeBlock b(s, w, k, T, 5);
        ThreadPool p1(1);
        const std::vector<float> y1 = run(b, p1, x, T, D);
        for (int n : {2, 3, 5}) {
            ThreadPool p(n);
            const std::vector<float> y = run(b, p, x, T, D);
            EXPECT_TRUE(same_bits(y1.data(), y.data(), y.size())) << kernels::isa_name(isa) << " threads " << n;
        }
    }
}

// A token's output does not depend on its position in the batch or on the other tokens: each
// token alone (T = 1), and each token placed at another position among different random tokens,
// gives the same bits as in the original batch.
TEST_P(Determinism, BatchPositionAndContents) {
    const int64_t T = 19, D = 40, F = 36;
    const MoeSpec s = make_spec(GetParam(), 8, 2, D, F);
    TestModel m = make_model(s, 21);
    const MoeWeights w = m.views(2);
    const std::vector<float> x = random_x(T, D, 22);
    ThreadPool pool(2);
    for (kernels::Isa isa : kernels::supported_isas()) {
        kernels::CpuKernels k(isa);
        MoeBlock b(s, w, k, 64, 2);
        const std::vector<float> y = run(b, pool, x, T, D);
        Rng rng(23);
        for (int64_t t = 0; t < T; ++t) {
            const std::vector<float> xt(x.begin() + t * D, x.begin() + (t + 1) * D);
            const std::vector<float> yt = run(b, pool, xt, 1, D);
            ASSERT_TRUE(same_bits(yt.data(), y.data() + t * D, static_cast<size_t>(D)))
                << kernels::isa_name(isa) << " token " << t << " alone";
            // embed at position pos of a batch of Tb random tokens
            const int64_t Tb = 1 + static_cast<int64_t>(rng.below(50));
            const int64_t pos = static_cast<int64_t>(rng.below(static_cast<uint64_t>(Tb)));
            std::vector<float> xb = random_x(Tb, D, 100 + static_cast<uint64_t>(t));
            std::copy(xt.begin(), xt.end(), xb.begin() + pos * D);
            const std::vector<float> yb = run(b, pool, xb, Tb, D);
            ASSERT_TRUE(same_bits(yb.data() + pos * D, y.data() + t * D, static_cast<size_t>(D)))
                << kernels::isa_name(isa) << " token " << t << " at " << pos << " of " << Tb;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Moe, Determinism, testing::ValuesIn(all_variants()),
                         [](const testing::TestParamInfo<Variant>& i) { return std::string(variant_name(i.param)); });

// Two layers sharing one scratch arena give the same bits as with their own arenas.
TEST(Scratch, SharedArenaAcrossLayers) {
    const int64_t T = 12, D = 40, F = 24;
    const MoeSpec s1 = make_spec(Variant::SoftmaxNorm, 8, 2, D, F);
    const MoeSpec s2 = make_spec(Variant::DeepSeekV3, 16, 4, D, F);
    TestModel m1 = make_model(s1, 61), m2 = make_model(s2, 62);
    const MoeWeights w1 = m1.views(0), w2 = m2.views(1);
    const std::vector<float> x = random_x(T, D, 63);
    ThreadPool pool(2);
    kernels::CpuKernels kern(kernels::best_isa());
    MoeBlock a(s1, w1, kern, T, 2), b(s2, w2, kern, T, 2);
    const std::vector<float> ya = run(a, pool, x, T, D), yb = run(b, pool, ya, T, D);
    Arena shared(std::max(a.scratch_needed(), b.scratch_needed()));
    a.use_shared_scratch(&shared);
    b.use_shared_scratch(&shared);
    const std::vector<float> za = run(a, pool, x, T, D), zb = run(b, pool, za, T, D);
    EXPECT_TRUE(same_bits(ya.data(), za.data(), ya.size()));
    EXPECT_TRUE(same_bits(yb.data(), zb.data(), yb.size()));
    Arena tiny(64);
    EXPECT_THROW(a.use_shared_scratch(&tiny), moe::Error);
    a.use_shared_scratch(nullptr);  // back to an owned arena
    const std::vector<float> again = run(a, pool, x, T, D);
    EXPECT_TRUE(same_bits(ya.data(), again.data(), ya.size()));
}

// ---------------------------------------------------------------- approximations (hand cases)

struct HandRouting {
    int64_t T;
    int k, E;
    std::vector<int32_t> ids;
    std::vector<float> w, scores, select;
    Routing view() {
        return Routing{T, k, E, ids.data(), w.data(), scores.data(), select.data()};
    }
};

// One token, k = 4, weights [0.7, 0.2, 0.06, 0.04] (sum 1).
HandRouting one_token() {
    HandRouting h{1, 4, 8, {5, 2, 7, 0}, {0.7f, 0.2f, 0.06f, 0.04f}, std::vector<float>(8, 0), std::vector<float>(8, 0)};
    return h;
}

TEST(Approx, OffByDefault) {
    MoeApprox a;
    EXPECT_FALSE(a.any());
    EXPECT_EQ(a.describe(), "exact");
}

// Dynamic top-k: threshold 0.6 -> the top share 0.7 >= 0.6, keep only slot 0, rescaled to the
// original sum 1.0. Threshold 0.85 -> cumulative 0.7, 0.9 -> keep 2: [0.7, 0.2] * 1 / 0.9.
TEST(Approx, DynamicTopk) {
    HandRouting h = one_token();
    Routing r = h.view();
    ApproxReport rep;
    apply_dynamic_topk(0.6f, r, rep);
    EXPECT_EQ(h.ids, (std::vector<int32_t>{5, -1, -1, -1}));
    EXPECT_FLOAT_EQ(h.w[0], 1.0f);
    EXPECT_EQ(rep.dynamic_topk_changed, 1);
    EXPECT_EQ(rep.slots_dropped, 3);

    h = one_token();
    r = h.view();
    rep = {};
    apply_dynamic_topk(0.85f, r, rep);
    EXPECT_EQ(h.ids, (std::vector<int32_t>{5, 2, -1, -1}));
    EXPECT_NEAR(h.w[0], 0.7f / 0.9f, 1e-6f);
    EXPECT_NEAR(h.w[1], 0.2f / 0.9f, 1e-6f);

    h = one_token();
    r = h.view();
    rep = {};
    apply_dynamic_topk(1.0f, r, rep);  // needs every slot: unchanged
    EXPECT_EQ(rep.dynamic_topk_changed, 0);
    EXPECT_EQ(h.ids, (std::vector<int32_t>{5, 2, 7, 0}));
}

// Pruning at 0.1: shares [0.7, 0.2, 0.06, 0.04] -> drop the last two, rescale [0.7, 0.2] to 1.
// A model without renormalisation keeps its weight sum: [0.35, 0.1, 0.03, 0.02] (sum 0.5) ->
// [0.35, 0.1] * 0.5 / 0.45. The top-1 slot is never pruned, whatever the threshold.
TEST(Approx, Pruning) {
    HandRouting h = one_token();
    Routing r = h.view();
    ApproxReport rep;
    apply_pruning(0.1f, r, rep);
    EXPECT_EQ(h.ids, (std::vector<int32_t>{5, 2, -1, -1}));
    EXPECT_NEAR(h.w[0], 0.7f / 0.9f, 1e-6f);
    EXPECT_EQ(rep.prune_changed, 1);
    EXPECT_EQ(rep.slots_dropped, 2);

    h = one_token();
    for (auto& v : h.w) v *= 0.5f;
    r = h.view();
    apply_pruning(0.1f, r, rep);
    EXPECT_NEAR(h.w[0], 0.35f * 0.5f / 0.45f, 1e-6f);
    EXPECT_NEAR(h.w[1], 0.1f * 0.5f / 0.45f, 1e-6f);

    HandRouting u{1, 2, 4, {3, 1}, {0.5f, 0.5f}, std::vector<float>(4, 0), std::vector<float>(4, 0)};
    r = u.view();
    rep = {};
    apply_pruning(0.9f, r, rep);  // the top slot stays even though its share 0.5 < 0.9
    EXPECT_EQ(u.ids, (std::vector<int32_t>{3, -1}));
    EXPECT_FLOAT_EQ(u.w[0], 1.0f);
}

// Capacity: T = 4 tokens, E = 4, k = 1, factor 1 -> cap = ceil(1 * 4 * 1 / 4) = 1 row per expert.
// Every token's first choice is expert 0. Selection scores (softmax-like):
//   token 0: [.4 .3 .2 .1] -> keeps expert 0
//   token 1: [.4 .1 .2 .3] -> 0 full -> next best with room: 3 (.3)
//   token 2: [.4 .1 .3 .2] -> 0 full -> 2 (.3)
//   token 3: [.4 .2 .2 .2] -> 0, 2, 3 full -> 1 (.2); ties among 1, 2, 3 would go to the lowest
// Weights are recomputed for the new set (softmax no renorm: w = score of the new expert).
TEST(Approx, CapacityReroutesNeverDrops) {
    MoeSpec s;
    s.n_embd = 1;
    s.n_ff = 1;
    s.n_expert = 4;
    s.top_k = 1;
    HandRouting h{4, 1, 4, {0, 0, 0, 0}, {.4f, .4f, .4f, .4f}, {}, {}};
    h.scores = {.4f, .3f, .2f, .1f, .4f, .1f, .2f, .3f, .4f, .1f, .3f, .2f, .4f, .2f, .2f, .2f};
    h.select = h.scores;
    Routing r = h.view();
    ApproxReport rep;
    int64_t load[4];
    float totals[4];
    uint8_t moved[4];
    apply_capacity(s, 1.0f, false, r, load, totals, moved, rep);
    EXPECT_EQ(h.ids, (std::vector<int32_t>{0, 3, 2, 1}));
    EXPECT_EQ(h.w, (std::vector<float>{.4f, .3f, .3f, .2f}));
    EXPECT_EQ(rep.capacity_changed, 3);
    EXPECT_EQ(rep.slots_rerouted, 3);
    for (int e = 0; e < 4; ++e) EXPECT_EQ(load[e], 1);
}

// Through the block: every approximation reports what it changed; the output stays finite and
// every remaining slot is computed (dispatch rows = valid slots).
TEST(Approx, BlockReportsAndCapacityRespected) {
    const int64_t T = 64, D = 48, F = 32;
    const int E = 16, k = 4;
    const MoeSpec s = make_spec(Variant::SoftmaxNorm, E, k, D, F);
    TestModel m = make_model(s, 31, 3.0f, -1);
    const MoeWeights w = m.views(4);
    const std::vector<float> x = random_x(T, D, 32);
    ThreadPool pool(2);
    kernels::CpuKernels kern(kernels::best_isa());
    MoeBlock exact(s, w, kern, T, 2);
    const std::vector<float> y0 = run(exact, pool, x, T, D);
    // From the exact routing (renormalised, so shares = weights): dynamic top-k at 0.5 changes the
    // tokens whose first k - 1 shares already reach 0.5, and leaves exactly one expert to the
    // tokens whose top share alone is >= 0.5.
    int64_t want_dyn = 0, want_top1_only = 0;
    for (int64_t t = 0; t < T; ++t) {
        const float* wt = exact.last_routing().weights + t * k;
        float cum = 0;
        for (int j = 0; j < k - 1; ++j) cum += wt[j];
        want_dyn += cum >= 0.5f;
        want_top1_only += wt[0] >= 0.5f;
    }

    {
        MoeApprox a;
        a.dynamic_topk_threshold = 0.5f;
        MoeBlock b(s, w, kern, T, 2, a);
        ApproxReport rep;
        const std::vector<float> y = run(b, pool, x, T, D, {nullptr, nullptr, nullptr, 0, &rep});
        EXPECT_EQ(rep.tokens, T);
        EXPECT_EQ(rep.dynamic_topk_changed, want_dyn);
        EXPECT_GT(want_top1_only, 0);
        int64_t top1_only = 0;
        for (int64_t t = 0; t < T; ++t) top1_only += valid_slots(b.last_routing(), t) == 1;
        EXPECT_EQ(top1_only, want_top1_only);
        int64_t valid = 0;
        for (int64_t t = 0; t < T; ++t) valid += valid_slots(b.last_routing(), t);
        EXPECT_EQ(b.last_plan().n_rows, valid);
        EXPECT_EQ(valid, T * k - rep.slots_dropped);
        for (float v : y) ASSERT_TRUE(std::isfinite(v));
    }
    {
        MoeApprox a;
        a.capacity_factor = 1.0f;  // cap = 64 * 4 / 16 = 16 rows per expert
        MoeBlock b(s, w, kern, T, 2, a);
        ApproxReport rep;
        run(b, pool, x, T, D, {nullptr, nullptr, nullptr, 0, &rep});
        for (int e = 0; e < E; ++e) EXPECT_LE(b.last_plan().counts[e], 16) << e;
        EXPECT_EQ(b.last_plan().n_rows, T * k);  // re-routed, never dropped
        EXPECT_GT(rep.capacity_changed, 0);
        for (int64_t t = 0; t < T; ++t)  // a token never uses one expert twice
            for (int i = 0; i < k; ++i)
                for (int j = i + 1; j < k; ++j)
                    EXPECT_NE(b.last_routing().ids[t * k + i], b.last_routing().ids[t * k + j]);
    }
    {
        MoeApprox a;
        a.temperature = 2.0f;  // flattens the softmax: every token's weights change
        MoeBlock b(s, w, kern, T, 2, a);
        ApproxReport rep;
        const std::vector<float> y = run(b, pool, x, T, D, {nullptr, nullptr, nullptr, 0, &rep});
        EXPECT_EQ(rep.temperature_changed, T);
        EXPECT_FALSE(same_bits(y.data(), y0.data(), y.size()));
    }
    {
        MoeApprox a;  // all off: bitwise the exact block, nothing reported
        MoeBlock b(s, w, kern, T, 2, a);
        ApproxReport rep;
        const std::vector<float> y = run(b, pool, x, T, D, {nullptr, nullptr, nullptr, 0, &rep});
        EXPECT_TRUE(same_bits(y.data(), y0.data(), y.size()));
        EXPECT_EQ(rep.tokens, 0);
    }
}

TEST(Approx, InvalidKnobsAreErrors) {
    MoeApprox a;
    a.temperature = 0.0f;
    EXPECT_THROW(a.validate(), moe::Error);
    a = {};
    a.prune_threshold = 1.5f;
    EXPECT_THROW(a.validate(), moe::Error);
    a = {};
    a.capacity_factor = -1.0f;
    EXPECT_THROW(a.validate(), moe::Error);
}

// ---------------------------------------------------------------- statistics, trace, timings

// 4 tokens, E = 4, k = 2: ids {0,1}, {0,2}, {0,1}, {3,0}; counts [4, 2, 1, 1] of 8 assignments.
// imbalance = 4 / 2 = 2; entropy = -(.5 ln .5 + .25 ln .25 + 2 * .125 ln .125) = 1.2130076 nats;
// top-1 counts [3, 0, 0, 1]; top-1 weight share: weights (.6,.4) (.5,.5) (.9,.1) (.7,.3) -> .675.
TEST(Stats, HandCounts) {
    HandRouting h{4, 2, 4, {0, 1, 0, 2, 0, 1, 3, 0}, {.6f, .4f, .5f, .5f, .9f, .1f, .7f, .3f}, {}, {}};
    RoutingStats st(4);
    st.add(h.view());
    EXPECT_EQ(st.counts(), (std::vector<int64_t>{4, 2, 1, 1}));
    EXPECT_EQ(st.top1_counts(), (std::vector<int64_t>{3, 0, 0, 1}));
    EXPECT_EQ(st.tokens(), 4);
    EXPECT_EQ(st.assignments(), 8);
    EXPECT_DOUBLE_EQ(st.imbalance(), 2.0);
    EXPECT_NEAR(st.load_entropy(), 1.2130076, 1e-6);
    EXPECT_NEAR(st.load_entropy_norm(), 1.2130076 / std::log(4.0), 1e-6);
    EXPECT_DOUBLE_EQ(st.max_load_share(), 0.5);
    EXPECT_NEAR(st.top1_weight_share(), 0.675, 1e-6);
}

TEST(Stats, TraceTimesThroughBlock) {
    const int64_t T = 5, D = 24, F = 16;
    const MoeSpec s = make_spec(Variant::Qwen2Shared, 8, 2, D, F);
    TestModel m = make_model(s, 41);
    const MoeWeights w = m.views(9);
    const std::vector<float> x = random_x(T, D, 42);
    ThreadPool pool(2);
    kernels::CpuKernels kern(kernels::best_isa());
    MoeBlock b(s, w, kern, T, 2);
    StageTimes times;
    RoutingStats stats(8);
    RoutingTrace trace;
    MoeObserve obs{&times, &stats, &trace, 100, nullptr};
    run(b, pool, x, T, D, obs);
    run(b, pool, x, T, D, obs);
    EXPECT_EQ(times.calls, 2);
    EXPECT_GT(times.total(), 0.0);
    EXPECT_GE(times.route, 0.0);
    EXPECT_GT(times.experts, 0.0);  // 10 + 5 rows, decode-sized: routed and shared experts in one run
    EXPECT_EQ(times.shared, 0.0);   // (a stage of its own only with an expert cache or EP)
    EXPECT_EQ(stats.tokens(), 2 * T);
    EXPECT_EQ(stats.assignments(), 2 * T * 2);
    ASSERT_EQ(trace.size(), static_cast<size_t>(2 * T));
    const std::string path = testing::TempDir() + "moe_trace_test.tsv";
    trace.write_tsv(path);
    std::ifstream in(path);
    std::string header, line;
    std::getline(in, header);
    EXPECT_EQ(header, "layer\ttoken\texperts\tweights");
    std::getline(in, line);
    std::istringstream ls(line);
    int layer;
    int64_t token;
    std::string ids;
    ls >> layer >> token >> ids;
    EXPECT_EQ(layer, 9);
    EXPECT_EQ(token, 100);
    const Routing& r = b.last_routing();
    EXPECT_EQ(ids, std::to_string(r.ids[0]) + "," + std::to_string(r.ids[1]));
    std::remove(path.c_str());
    EXPECT_THROW(trace.write_tsv("/nonexistent-dir/x.tsv"), moe::Error);
}

// ---------------------------------------------------------------- errors

TEST(Errors, UnsupportedDtypeNamesTensorAndType) {
    const MoeSpec s = make_spec(Variant::SoftmaxNorm, 4, 2, 256, 32);
    TestModel m = make_model(s, 51);
    MoeWeights w = m.views(3);
    // a Q8_K view of the same shape (its bytes fit in the f32 buffer): a type with no kernel
    w.up_exps = make_view(w.up_exps.name, DType::Q8_K, {256, 32, 4}, m.up.data());
    kernels::CpuKernels kern(kernels::best_isa());
    try {
        MoeBlock b(s, w, kern, 4, 1);
        FAIL() << "expected moe::Error";
    } catch (const moe::Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("blk.3.ffn_up_exps.weight"), std::string::npos) << msg;
        EXPECT_NE(msg.find("q8_K"), std::string::npos) << msg;
    }
}

TEST(Errors, ShapesSpecAndBatch) {
    MoeSpec s = make_spec(Variant::SoftmaxNorm, 4, 2, 16, 8);
    TestModel m = make_model(s, 52);
    MoeWeights w = m.views(0);
    kernels::CpuKernels kern(kernels::best_isa());
    MoeSpec bad = s;
    bad.top_k = 5;
    EXPECT_THROW(MoeBlock(bad, w, kern, 4, 1), moe::Error);
    bad = s;
    bad.n_group = 3;
    EXPECT_THROW(MoeBlock(bad, w, kern, 4, 1), moe::Error);
    MoeWeights wb = w;
    wb.down_exps.ne[0] = 9;
    try {
        MoeBlock b(s, wb, kern, 4, 1);
        FAIL();
    } catch (const moe::Error& e) {
        EXPECT_NE(std::string(e.what()).find("ffn_down_exps"), std::string::npos) << e.what();
    }
    MoeBlock b(s, w, kern, 4, 1);
    std::vector<float> x(5 * 16, 0.5f), y(5 * 16);
    ThreadPool pool(1), big(2);
    EXPECT_THROW(b.forward(pool, x.data(), 5, y.data()), moe::Error);  // T > max_tokens
    EXPECT_THROW(b.forward(big, x.data(), 4, y.data()), moe::Error);   // pool larger than planned
    EXPECT_NO_THROW(b.forward(pool, x.data(), 4, y.data()));
}

}  // namespace

// set_active_k(k') routes exactly as a block built with top_k = k' on the same weights (every
// router variant), and set_active_k(top_k) restores the full output; out-of-range k is an error.
TEST(MoeBlockActiveK, EqualsABlockBuiltWithTheSmallerK) {
    const int64_t T = 23, D = 48, F = 40;
    ThreadPool pool(2);
    const kernels::CpuKernels kern(kernels::supported_isas().back());
    for (Variant v : all_variants()) {
        const MoeSpec s = make_spec(v, 16, 6, D, F);
        TestModel m = make_model(s, 31);
        const MoeWeights w = m.views(0);
        const std::vector<float> x = random_x(T, D, 32);
        MoeBlock full(s, w, kern, T, 2);
        const std::vector<float> y6 = run(full, pool, x, T, D);
        for (int k : {1, 2, 4}) {
            MoeSpec sk = s;
            sk.top_k = k;
            MoeBlock ref(sk, w, kern, T, 2);
            full.set_active_k(k);
            EXPECT_EQ(full.active_k(), k);
            const std::vector<float> yk = run(full, pool, x, T, D), yr = run(ref, pool, x, T, D);
            EXPECT_TRUE(same_bits(yk.data(), yr.data(), yk.size())) << variant_name(v) << " k " << k;
            EXPECT_FALSE(same_bits(yk.data(), y6.data(), yk.size())) << variant_name(v) << " k " << k;
        }
        full.set_active_k(6);
        const std::vector<float> back = run(full, pool, x, T, D);
        EXPECT_TRUE(same_bits(back.data(), y6.data(), back.size())) << variant_name(v);
        EXPECT_THROW(full.set_active_k(0), Error);
        EXPECT_THROW(full.set_active_k(7), Error);
    }
}
