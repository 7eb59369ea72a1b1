// Every router variant against small cases computed by hand from FACTS.md section 4. The cases run
// through the real MoeBlock with D = 1 and x = [1], so the router logits are exactly the router
// weights written below (1 * l = l in f32) and the whole fast path is exercised.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "moe_test_util.h"

using namespace moe;
using namespace moe::test;

namespace {

struct Routed {
    std::vector<int> ids;
    std::vector<float> w;
    std::vector<float> y;
};

// Routes x = [1] with router logits `logits` (D = 1) through a MoeBlock on every ISA path and
// checks that all paths agree bitwise; returns the routing.
Routed route_logits(MoeSpec s, const std::vector<float>& logits, const std::vector<float>& router_bias = {},
                    const std::vector<float>& sel_bias = {}) {
    s.n_embd = 1;
    if (s.n_ff == 0) s.n_ff = 2;
    s.n_expert = static_cast<int>(logits.size());
    s.has_router_bias = !router_bias.empty();
    s.has_selection_bias = !sel_bias.empty();
    TestModel m = make_model(s, 42);
    m.router = logits;
    if (s.has_router_bias) m.router_bias = router_bias;
    if (s.has_selection_bias) m.sel_bias = sel_bias;
    const MoeWeights w = m.views(0);
    const float x = 1.0f;
    ThreadPool pool(1);
    Routed first;
    bool have = false;
    for (kernels::Isa isa : kernels::supported_isas()) {
        kernels::CpuKernels k(isa);
        MoeBlock b(s, w, k, 1, 1);
        float y = 0;
        b.forward(pool, &x, 1, &y);
        const Routing& r = b.last_routing();
        Routed out;
        out.ids.assign(r.ids, r.ids + s.top_k);
        out.w.assign(r.weights, r.weights + s.top_k);
        out.y = {y};
        if (have) {
            EXPECT_EQ(out.ids, first.ids) << kernels::isa_name(isa);
            EXPECT_EQ(out.w, first.w) << kernels::isa_name(isa);
        } else {
            first = out;
            have = true;
        }
    }
    return first;
}

constexpr float kTol = 2e-6f;

// Mixtral / Qwen3-MoE: softmax over all, top-2, renormalise.
// logits [1, 3, 2, 0] -> top-2 = experts 1 (3), 2 (2); renormalised = softmax([3, 2])
// = [1 / (1 + e^-1), e^-1 / (1 + e^-1)] = [0.7310586, 0.2689414].
TEST(Router, MixtralSoftmaxTopkRenorm) {
    MoeSpec s;
    s.top_k = 2;
    s.norm_topk = true;
    const Routed r = route_logits(s, {1, 3, 2, 0});
    EXPECT_EQ(r.ids, (std::vector<int>{1, 2}));
    EXPECT_NEAR(r.w[0], 0.7310586f, kTol);
    EXPECT_NEAR(r.w[1], 0.2689414f, kTol);
}

// OLMoE / Qwen1.5-MoE: same selection, probabilities kept as they are (sum < 1):
// Z = e^1 + e^3 + e^2 + e^0 = 31.192875; w = [e^3 / Z, e^2 / Z] = [0.6439143, 0.2368828].
TEST(Router, OlmoeSoftmaxTopkNoRenorm) {
    MoeSpec s;
    s.top_k = 2;
    const Routed r = route_logits(s, {1, 3, 2, 0});
    EXPECT_EQ(r.ids, (std::vector<int>{1, 2}));
    EXPECT_NEAR(r.w[0], 0.6439143f, kTol);
    EXPECT_NEAR(r.w[1], 0.2368828f, kTol);
}

// GraniteMoE: top-k on raw logits, softmax over the selected ones; here the same numbers as Mixtral.
TEST(Router, GraniteTopkThenSoftmax) {
    MoeSpec s;
    s.top_k = 2;
    s.gating = Gating::SoftmaxSelected;
    const Routed r = route_logits(s, {1, 3, 2, 0});
    EXPECT_EQ(r.ids, (std::vector<int>{1, 2}));
    EXPECT_NEAR(r.w[0], 0.7310586f, kTol);
    EXPECT_NEAR(r.w[1], 0.2689414f, kTol);
}

// gpt-oss: logits = W x + b. raw [1.0, 0.5, 0.2, 0.9] + b [0, 1, 0, 0.2] = [1.0, 1.5, 0.2, 1.1];
// top-2 on the biased logits = experts 1 (1.5), 3 (1.1) (without the bias it would be 0 and 3);
// weights = softmax([1.5, 1.1]) = [1 / (1 + e^-0.4), ...] = [0.5986877, 0.4013123].
TEST(Router, GptOssBiasTopkOnLogitsThenSoftmax) {
    MoeSpec s;
    s.top_k = 2;
    s.gating = Gating::SoftmaxSelected;
    s.act = Activation::SwiGLUClamped;
    const Routed r = route_logits(s, {1.0f, 0.5f, 0.2f, 0.9f}, {0.0f, 1.0f, 0.0f, 0.2f});
    EXPECT_EQ(r.ids, (std::vector<int>{1, 3}));
    EXPECT_NEAR(r.w[0], 0.5986877f, kTol);
    EXPECT_NEAR(r.w[1], 0.4013123f, kTol);
}

// DeepSeek-V3: s = sigmoid(l); selection on s + bias; 4 groups of 2, group score = sum of top-2,
// keep 2 groups; top-2 within; weights = unbiased s, renormalised, x 2.5.
//   l    = [ 2,     -2,     1,     1,     3,     -3,     0,   0.5 ]
//   s    = [.880797 .119203 .731059 .731059 .952574 .047426 .5  .622459]
//   bias = [ 0,      0,     0,     0,    -0.5,    0,     .3   .3 ]
//   sel  = [.880797 .119203 .731059 .731059 .452574 .047426 .8  .922459]
//   group top-2 sums: g0 = 1.0, g1 = 1.462118, g2 = 0.5, g3 = 1.722459 -> keep g3, g1
//   (by group max, V2-style, g0 = .8808 would beat g1 = .7311: the top-2 sum matters here);
//   expert 0 (third best overall) is masked; top-2 of {2, 3, 6, 7} = 7 (.922), 6 (.8);
//   w = [.622459, .5] / 1.122459 * 2.5 = [1.3863739, 1.1136261].
TEST(Router, DeepSeekV3SigmoidBiasGroupTop2SumRenormScale) {
    MoeSpec s;
    s.top_k = 2;
    s.gating = Gating::Sigmoid;
    s.norm_topk = true;
    s.norm_eps = 1e-20f;
    s.scale = 2.5f;
    s.n_group = 4;
    s.topk_group = 2;
    s.group_score = GroupScore::Top2Sum;
    const Routed r = route_logits(s, {2, -2, 1, 1, 3, -3, 0, 0.5f}, {}, {0, 0, 0, 0, -0.5f, 0, 0.3f, 0.3f});
    EXPECT_EQ(r.ids, (std::vector<int>{7, 6}));
    EXPECT_NEAR(r.w[0], 1.3863739f, 4 * kTol);
    EXPECT_NEAR(r.w[1], 1.1136261f, 4 * kTol);
}

// Same logits without the bias: sel = s; group sums g0 = 1.0, g1 = 1.462118 (.731 + .731),
// g2 = 1.0, g3 = 1.122459 -> keep g1, g3; top-2 = experts 2 and 3, an exact tie broken to the
// lower index first; w = [.731059, .731059] / 1.462118 * 2.5 = [1.25, 1.25].
TEST(Router, DeepSeekV3TieInsideKeptGroup) {
    MoeSpec s;
    s.top_k = 2;
    s.gating = Gating::Sigmoid;
    s.norm_topk = true;
    s.scale = 2.5f;
    s.n_group = 4;
    s.topk_group = 2;
    s.group_score = GroupScore::Top2Sum;
    const Routed r = route_logits(s, {2, -2, 1, 1, 3, -3, 0, 0.5f});
    EXPECT_EQ(r.ids, (std::vector<int>{2, 3}));
    EXPECT_NEAR(r.w[0], 1.25f, 4 * kTol);
    EXPECT_NEAR(r.w[1], 1.25f, 4 * kTol);
}

// Masking convention: we follow DeepSeek's official `Gate` (masked experts = -inf), not HF's 0.0.
// l = 0 everywhere -> s = 0.5; bias [-1, -1, -2, -2] -> sel [-0.5, -0.5, -1.5, -1.5];
// 2 groups of 2, keep 1: g0 = -1 > g1 = -3 -> keep g0. Top-2 = [0, 1]. (HF's 0.0 fill would pick
// the masked experts 2 and 3, whose 0.0 beats -0.5.) w = [.5, .5] / 1 = [.5, .5].
TEST(Router, DeepSeekV3MaskedGroupsAreMinusInf) {
    MoeSpec s;
    s.top_k = 2;
    s.gating = Gating::Sigmoid;
    s.norm_topk = true;
    s.n_group = 2;
    s.topk_group = 1;
    s.group_score = GroupScore::Top2Sum;
    const Routed r = route_logits(s, {0, 0, 0, 0}, {}, {-1, -1, -2, -2});
    EXPECT_EQ(r.ids, (std::vector<int>{0, 1}));
    EXPECT_NEAR(r.w[0], 0.5f, kTol);
    EXPECT_NEAR(r.w[1], 0.5f, kTol);
}

// DeepSeek-V2: softmax over all, 3 groups of 2 scored by their max, keep 2, top-2, no renorm, x 16.
// l = [0, 2, 1, 1.5, 3, -1]: group maxima g0 = 2, g1 = 1.5, g2 = 3 (in logits) -> keep g2, g0;
// top-2 of {0, 1, 4, 5} = 4, 1 (expert 3, logit 1.5, is masked although it beats expert 0).
// Z = 1 + e^2 + e^1 + e^1.5 + e^3 + e^-1; w = 16 [e^3 / Z, e^2 / Z] = [8.9163930, 3.2801577].
TEST(Router, DeepSeekV2SoftmaxGroupMaxScale) {
    MoeSpec s;
    s.top_k = 2;
    s.scale = 16.0f;
    s.n_group = 3;
    s.topk_group = 2;
    s.group_score = GroupScore::Max;
    const Routed r = route_logits(s, {0, 2, 1, 1.5f, 3, -1});
    EXPECT_EQ(r.ids, (std::vector<int>{4, 1}));
    EXPECT_NEAR(r.w[0], 8.9163930f, 16 * kTol);
    EXPECT_NEAR(r.w[1], 3.2801577f, 16 * kTol);
}

// Ties go to the lower expert index, in selection and in slot order.
TEST(Router, TiesGoToLowerIndex) {
    MoeSpec s;
    s.top_k = 2;
    Routed r = route_logits(s, {1, 2, 2, 2});
    EXPECT_EQ(r.ids, (std::vector<int>{1, 2}));
    s.top_k = 1;
    r = route_logits(s, {0, 0, 0, 0, 0});
    EXPECT_EQ(r.ids, (std::vector<int>{0}));
    s.top_k = 3;
    s.gating = Gating::SoftmaxSelected;
    r = route_logits(s, {5, 7, 5, 7, 5});
    EXPECT_EQ(r.ids, (std::vector<int>{1, 3, 0}));
}

// topk_desc directly: total order, k = n, ties.
TEST(Router, TopkDesc) {
    const float v[] = {0.5f, 2.0f, -1.0f, 2.0f, 0.5f, -INFINITY, 3.0f};
    int32_t scratch[7], out[7];
    topk_desc(v, 7, 7, scratch, out);
    EXPECT_EQ(std::vector<int>(out, out + 7), (std::vector<int>{6, 1, 3, 0, 4, 2, 5}));
    topk_desc(v, 7, 3, scratch, out);
    EXPECT_EQ(std::vector<int>(out, out + 3), (std::vector<int>{6, 1, 3}));
}

// Qwen2-MoE shared expert with its sigmoid gate (D = 2, E = 2, k = 1, F = Fs = 1, no renorm):
// x = [1, 0]; router rows e0 = [0, 0], e1 = [1, 0] -> logits [0, 1] -> p = [.2689414, .7310586];
// top-1 = expert 1, w = .7310586. Expert 1: gate [1, 0] -> g = 1, up [2, 0] -> u = 2,
// h = silu(1) * 2 = 1.4621172; down rows [1], [-1] -> [1.4621172, -1.4621172]; x w -> [1.0688933,
// -1.0688933]. Shared: gate [1, 1] -> 1, up [1, 0] -> 1, h = silu(1) = .7310586, down [2], [0] ->
// [1.4621172, 0]; gate_inp_shexp [2, 0] -> sigmoid(2) = .8807971 -> [1.2878285, 0].
// y = [2.3567218, -1.0688933].
TEST(Router, Qwen2SharedExpertSigmoidGate) {
    MoeSpec s;
    s.n_embd = 2;
    s.n_ff = 1;
    s.n_expert = 2;
    s.top_k = 1;
    s.n_shared = 1;
    s.n_ff_shared = 1;
    s.shared_gate_sigmoid = true;
    TestModel m = make_model(s, 1);
    m.router = {0, 0, 1, 0};
    m.gate = {9, 9, 1, 0};  // expert 0 (unused), expert 1
    m.up = {9, 9, 2, 0};
    m.down = {9, 9, 1, -1};
    m.gate_sh = {1, 1};
    m.up_sh = {1, 0};
    m.down_sh = {2, 0};
    m.gate_inp_sh = {2, 0};
    const MoeWeights w = m.views(0);
    const float x[2] = {1, 0};
    ThreadPool pool(1);
    for (kernels::Isa isa : kernels::supported_isas()) {
        kernels::CpuKernels k(isa);
        MoeBlock b(s, w, k, 1, 1);
        float y[2];
        b.forward(pool, x, 1, y);
        EXPECT_EQ(b.last_routing().ids[0], 1);
        EXPECT_NEAR(b.last_routing().weights[0], 0.7310586f, kTol);
        EXPECT_NEAR(y[0], 2.3567218f, 1e-5f) << kernels::isa_name(isa);
        EXPECT_NEAR(y[1], -1.0688933f, 1e-5f) << kernels::isa_name(isa);
        const RefOutput ref = moe_reference(s, w, x, 1);
        EXPECT_NEAR(ref.y[0], 2.3567218105529903, 1e-9);
        EXPECT_NEAR(ref.y[1], -1.068893290777046, 1e-9);
    }
}

// gpt-oss clamped SwiGLU: g = min(g, L), u = clamp(u, -L, L), out = (u + 1) * g * sigmoid(1.702 g).
// D = 1, x = 1, E = 1, F = 1, gate 10 -> g = 7; up -9 -> u = -7; h = -6 * 7 * sigmoid(11.914)
// = -41.9997...; down 1, w = 1 -> y = -42 * sigmoid(11.914) = -41.999720.
TEST(Router, GptOssClampedSwiGLU) {
    MoeSpec s;
    s.n_embd = 1;
    s.n_ff = 1;
    s.n_expert = 1;
    s.top_k = 1;
    s.gating = Gating::SoftmaxSelected;
    s.act = Activation::SwiGLUClamped;
    TestModel m = make_model(s, 1);
    m.router = {0.3f};
    m.gate = {10};
    m.up = {-9};
    m.down = {1};
    const MoeWeights w = m.views(0);
    const float x = 1.0f;
    ThreadPool pool(1);
    kernels::CpuKernels k(kernels::best_isa());
    MoeBlock b(s, w, k, 1, 1);
    float y = 0;
    b.forward(pool, &x, 1, &y);
    const double want = -42.0 / (1.0 + std::exp(-1.702 * 7.0));
    EXPECT_NEAR(y, want, 1e-4);
    EXPECT_NEAR(moe_reference(s, w, &x, 1).y[0], want, 1e-9);
}

// A NaN or inf router logit is an error naming the layer, never a silent pick.
TEST(Router, NonFiniteLogitNamesTheLayer) {
    const MoeSpec s = make_spec(Variant::SoftmaxNorm, 8, 2, 16, 8);
    TestModel m = make_model(s, 5);
    const MoeWeights w = m.views(7);
    std::vector<float> x = random_x(4, 16, 6);
    ThreadPool pool(2);
    kernels::CpuKernels k(kernels::best_isa());
    MoeBlock b(s, w, k, 4, 2);
    std::vector<float> y(4 * 16);
    for (float bad : {NAN, INFINITY}) {
        x[2 * 16 + 3] = bad;  // token 2
        try {
            b.forward(pool, x.data(), 4, y.data());
            FAIL() << "expected moe::Error for " << bad;
        } catch (const moe::Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find("layer 7"), std::string::npos) << msg;
            EXPECT_NE(msg.find("token 2"), std::string::npos) << msg;
        }
    }
    // A router weight that overflows the logit to inf is caught the same way.
    x = random_x(4, 16, 6);
    m.router[5] = 3e38f;
    m.router[6] = 3e38f;
    for (int i = 0; i < 16; ++i) x[i] = 10.0f;
    EXPECT_THROW(b.forward(pool, x.data(), 4, y.data()), moe::Error);
}

}  // namespace
