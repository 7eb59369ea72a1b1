// Sampler: greedy exactness and ties, exact masks of top-k / top-p / min-p on hand-made logits,
// repetition penalty window, the drawn distribution against exact probabilities (chi-square),
// seeding, and NaN / invalid-setting errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "runtime/sampler.h"

using namespace moe;

namespace {

SamplerSpec make(float temp, int32_t k, float p, float minp, float pen = 1.0f, int32_t last_n = 64, uint64_t seed = 1) {
    SamplerSpec s;
    s.temperature = temp;
    s.top_k = k;
    s.top_p = p;
    s.min_p = minp;
    s.repeat_penalty = pen;
    s.repeat_last_n = last_n;
    s.seed = seed;
    return s;
}

// 8 tokens whose temperature-1 probabilities are exactly these, placed at scattered ids.
const double kP[8] = {0.4, 0.2, 0.15, 0.1, 0.08, 0.04, 0.02, 0.01};
const int32_t kId[8] = {5, 2, 7, 0, 3, 6, 1, 4};  // kId[r] = id of the r-th most likely token

std::vector<float> hand_logits() {
    std::vector<float> l(8);
    for (int r = 0; r < 8; ++r) l[static_cast<size_t>(kId[r])] = static_cast<float>(std::log(kP[r]) + 3.0);
    return l;
}

// Expected distribution written independently: keep the ranks in `keep`, apply temperature, renormalise.
std::map<int32_t, double> expected(int n_keep, double temp) {
    std::map<int32_t, double> m;
    double sum = 0;
    for (int r = 0; r < n_keep; ++r) sum += std::pow(kP[r], 1.0 / temp);
    for (int r = 0; r < n_keep; ++r) m[kId[r]] = std::pow(kP[r], 1.0 / temp) / sum;
    return m;
}

void expect_distribution(Sampler& s, const std::vector<float>& logits, const std::map<int32_t, double>& want) {
    const auto& d = s.distribution(logits.data(), static_cast<int64_t>(logits.size()));
    ASSERT_EQ(d.size(), want.size());
    for (const auto& c : d) {
        ASSERT_TRUE(want.count(c.id)) << "token " << c.id << " should be masked";
        // logits are f32 (ln p rounded: relative error of p ~ |ln p| * 2^-24 ~ 3e-7)
        EXPECT_NEAR(c.p, want.at(c.id), 1e-6) << "token " << c.id;
    }
}

}  // namespace

TEST(Sampler, GreedyIsArgmaxWithTiesToLowestId) {
    Sampler s(make(0.0f, 40, 0.9f, 0.1f));
    Rng rng(9);
    for (int rep = 0; rep < 20; ++rep) {
        std::vector<float> l(1000);
        for (auto& x : l) x = rng.uniform(-5, 5);
        const auto best = std::max_element(l.begin(), l.end()) - l.begin();
        EXPECT_EQ(s.sample(l.data(), 1000), best);
    }
    const std::vector<float> tie = {1, 3, 3, 2, 3};
    EXPECT_EQ(s.sample(tie.data(), 5), 1);
    std::vector<float> big(151936, -1.0f);
    big[151935] = 0.5f;
    big[70000] = 0.5f;
    EXPECT_EQ(s.sample(big.data(), 151936), 70000);
    // negative temperature is greedy too; -inf never wins
    Sampler n(make(-1.0f, 0, 1.0f, 0.0f));
    const std::vector<float> neg = {-INFINITY, -3, -2, -INFINITY};
    EXPECT_EQ(n.sample(neg.data(), 4), 2);
}

TEST(Sampler, TopKTopPMinPMaskExactlyTheRightSet) {
    const auto l = hand_logits();
    {  // no filters at temperature 1: the hand-made probabilities themselves
        Sampler s(make(1.0f, 0, 1.0f, 0.0f));
        expect_distribution(s, l, expected(8, 1.0));
    }
    {  // top-k 3
        Sampler s(make(1.0f, 3, 1.0f, 0.0f));
        expect_distribution(s, l, expected(3, 1.0));
    }
    {  // top-p: cumulative 0.4, 0.6, 0.75, 0.85 -> 0.55 keeps 2, 0.65 keeps 3, 0.8 keeps 4
        for (auto [p, keep] : {std::pair{0.55f, 2}, {0.65f, 3}, {0.8f, 4}, {0.1f, 1}}) {
            Sampler s(make(1.0f, 0, p, 0.0f));
            expect_distribution(s, l, expected(keep, 1.0));
        }
    }
    {  // min-p: keep p >= min_p * 0.4 -> 0.3 (0.12) keeps 3, 0.24 (0.096) keeps 4, 0.03 (0.012) keeps 7
        for (auto [m, keep] : {std::pair{0.3f, 3}, {0.24f, 4}, {0.03f, 7}, {1.0f, 1}}) {
            Sampler s(make(1.0f, 0, 1.0f, m));
            expect_distribution(s, l, expected(keep, 1.0));
        }
    }
    {  // chained: top-k 6 (mass 0.97), then top-p 0.9 on the renormalised 6: cumulative
       // .412 .619 .773 .876 .959 -> 5 kept; min-p 0.22: ratios to the max 1 .5 .375 .25 .2 -> 4 kept;
       // then temperature 0.5 squares the probabilities.
        Sampler s(make(0.5f, 6, 0.9f, 0.22f));
        expect_distribution(s, l, expected(4, 0.5));
    }
    {  // top-k ties: equal logits are ranked by id
        const std::vector<float> t = {1, 2, 2, 2, 0};
        Sampler s(make(1.0f, 2, 1.0f, 0.0f));
        const auto& d = s.distribution(t.data(), 5);
        ASSERT_EQ(d.size(), 2u);
        EXPECT_EQ(d[0].id, 1);
        EXPECT_EQ(d[1].id, 2);
    }
}

// Draws follow the exact probabilities. With N draws over K kept tokens the statistic
// X = sum_i (c_i - N p_i)^2 / (N p_i) is chi-square with K - 1 degrees of freedom (K - 1 = 3 here:
// mean 3, sd 2.45); P(X > 30) < 2e-6, so a correct sampler fails this bound essentially never,
// while a wrong mask (an extra token with p >= 0.02) or a wrong temperature adds
// N * sum (dp)^2 / p >> 30 at N = 200000 (e.g. temperature ignored: X ~ 1e4).
TEST(Sampler, DrawsMatchExactProbabilities) {
    const auto l = hand_logits();
    Sampler s(make(0.7f, 6, 0.9f, 0.22f, 1.0f, 64, 1234));
    const auto want = expected(4, 0.7);
    const int N = 200000;
    std::map<int32_t, int> count;
    for (int i = 0; i < N; ++i) count[s.sample(l.data(), 8)]++;
    double x2 = 0;
    for (const auto& [id, c] : count) {
        ASSERT_TRUE(want.count(id)) << "drew masked token " << id;
        const double e = N * want.at(id);
        x2 += (c - e) * (c - e) / e;
    }
    EXPECT_EQ(count.size(), want.size());
    EXPECT_LT(x2, 30.0);
}

TEST(Sampler, RepetitionPenaltyWindow) {
    const std::vector<float> l = {2.0f, -2.0f, 1.0f, 0.5f};
    auto dist = [&](Sampler& s) {
        std::vector<double> p(4, 0.0);
        for (const auto& c : s.distribution(l.data(), 4)) p[static_cast<size_t>(c.id)] = c.p;
        return p;
    };
    auto softmax = [](std::vector<double> z) {
        double sum = 0;
        for (auto& x : z) sum += (x = std::exp(x));
        for (auto& x : z) x /= sum;
        return z;
    };
    {  // window 2 sees the last two accepted tokens {1, 0}: 2 -> 2/2, -2 -> -2*2; token 2 (accepted earlier) is not penalised
        Sampler s(make(1.0f, 0, 1.0f, 0.0f, 2.0f, 2));
        for (int32_t t : {2, 0, 1, 0}) s.accept(t);
        const auto p = dist(s), w = softmax({1.0, -4.0, 1.0, 0.5});
        for (int i = 0; i < 4; ++i) EXPECT_NEAR(p[i], w[i], 1e-7) << i;
    }
    {  // penalty 1 is off; window 0 is off
        Sampler a(make(1.0f, 0, 1.0f, 0.0f, 1.0f, 8)), b(make(1.0f, 0, 1.0f, 0.0f, 3.0f, 0));
        a.accept(0);
        b.accept(0);
        const auto w = softmax({2.0, -2.0, 1.0, 0.5});
        const auto pa = dist(a), pb = dist(b);
        for (int i = 0; i < 4; ++i) {
            EXPECT_NEAR(pa[i], w[i], 1e-7);
            EXPECT_NEAR(pb[i], w[i], 1e-7);
        }
    }
    {  // applies to greedy: 3 / 1.1 = 2.73 < 2.9
        Sampler g(make(0.0f, 0, 1.0f, 0.0f, 1.1f, 4));
        const std::vector<float> z = {3.0f, 2.9f};
        EXPECT_EQ(g.sample(z.data(), 2), 0);
        g.accept(0);
        EXPECT_EQ(g.sample(z.data(), 2), 1);
    }
}

TEST(Sampler, SameSeedSameSequenceAndResetRestarts) {
    Rng rng(77);
    std::vector<float> l(500);
    for (auto& x : l) x = rng.uniform(-2, 2);
    auto run = [&](Sampler& s) {
        std::vector<int32_t> out;
        for (int i = 0; i < 200; ++i) {
            out.push_back(s.sample(l.data(), 500));
            s.accept(out.back());
        }
        return out;
    };
    Sampler a(make(1.0f, 50, 0.95f, 0.01f, 1.1f, 16, 42)), b(make(1.0f, 50, 0.95f, 0.01f, 1.1f, 16, 42)),
        c(make(1.0f, 50, 0.95f, 0.01f, 1.1f, 16, 43));
    const auto sa = run(a);
    EXPECT_EQ(sa, run(b));
    EXPECT_NE(sa, run(c));
    EXPECT_GT(std::set<int32_t>(sa.begin(), sa.end()).size(), 20u);  // it really samples
    a.reset();
    EXPECT_EQ(run(a), sa);
}

TEST(Sampler, BadLogitsAndSettingsAreErrors) {
    Sampler s(make(1.0f, 0, 1.0f, 0.0f));
    Sampler g(make(0.0f, 0, 1.0f, 0.0f));
    std::vector<float> l = {0.5f, NAN, 1.0f};
    EXPECT_THROW(s.sample(l.data(), 3), moe::Error);
    EXPECT_THROW(g.sample(l.data(), 3), moe::Error);
    try {
        g.sample(l.data(), 3);
    } catch (const moe::Error& e) {
        EXPECT_NE(std::string(e.what()).find("[sampler] logit of token 1 is nan"), std::string::npos) << e.what();
    }
    l[1] = INFINITY;
    EXPECT_THROW(s.sample(l.data(), 3), moe::Error);
    const std::vector<float> none = {-INFINITY, -INFINITY};
    EXPECT_THROW(s.sample(none.data(), 2), moe::Error);
    // -inf tokens are never drawn
    const std::vector<float> some = {-INFINITY, 0.0f, -INFINITY, 0.0f};
    for (int i = 0; i < 100; ++i) {
        const int32_t t = s.sample(some.data(), 4);
        EXPECT_TRUE(t == 1 || t == 3) << t;
    }
    EXPECT_THROW(Sampler(make(1.0f, 0, 0.0f, 0.0f)), moe::Error);
    EXPECT_THROW(Sampler(make(1.0f, 0, 1.0f, -0.5f)), moe::Error);
    EXPECT_THROW(Sampler(make(1.0f, 0, 1.0f, 0.0f, 0.0f)), moe::Error);
    EXPECT_THROW(Sampler(make(1.0f, 0, 1.0f, 0.0f, 1.0f, -1)), moe::Error);
    EXPECT_THROW(Sampler(make(NAN, 0, 1.0f, 0.0f)), moe::Error);
}
