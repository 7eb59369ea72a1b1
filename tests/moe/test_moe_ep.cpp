// Expert parallelism of the MoE block over R in-process ranks (dist::ThreadGroup): bitwise equal
// to the single-process block for every router variant, R = 1..4, contiguous and replicated
// placements; bounded NMSE with bf16 / int8 dispatch; traffic counters; errors.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/rng.h"
#include "dist/thread_group.h"
#include "moe_test_util.h"

using namespace moe;
using namespace moe::test;

namespace {

struct Case {
    MoeSpec spec;
    TestModel model;
    std::vector<float> x;
    int64_t T;
};

std::vector<float> single(Case& c) {
    kernels::CpuKernels k = kernels::CpuKernels::from_env();
    MoeBlock b(c.spec, c.model.views(0), k, c.T, 2);
    ThreadPool pool(2);
    std::vector<float> y(static_cast<size_t>(c.T * c.spec.n_embd));
    b.forward(pool, c.x.data(), c.T, y.data());
    return y;
}

// Runs the EP block on R thread-ranks; returns each rank's y and its EP times.
std::vector<std::vector<float>> run_ep(Case& c, int R, const dist::Placement& pl, EpCompress cz,
                                       std::vector<EpStageTimes>* times = nullptr, bool overlap = false) {
    dist::ThreadHub hub(R);
    std::vector<std::vector<float>> ys(static_cast<size_t>(R));
    if (times) times->assign(static_cast<size_t>(R), {});
    std::vector<std::thread> th;
    for (int r = 0; r < R; ++r)
        th.emplace_back([&, r] {
            dist::ThreadGroup g(hub, r);
            kernels::CpuKernels k = kernels::CpuKernels::from_env();
            MoeBlock b(c.spec, c.model.views(0), k, c.T, 1);
            b.use_ep(EpConfig{&g, &pl, cz, overlap});
            ThreadPool pool(1);
            auto& y = ys[static_cast<size_t>(r)];
            y.assign(static_cast<size_t>(c.T * c.spec.n_embd), -1.0f);
            b.forward(pool, c.x.data(), c.T, y.data());
            if (times) (*times)[static_cast<size_t>(r)] = *b.ep_times();
        });
    for (auto& t : th) t.join();
    return ys;
}

// Random placement with replicas: every expert on 1..R distinct ranks with random shares.
dist::Placement random_placement(int L, int E, int R, uint64_t seed) {
    Rng rng(seed);
    dist::Placement p = dist::Placement::contiguous(L, E, R);
    p.algorithm = "random";
    for (auto& layer : p.layers)
        for (auto& reps : layer) {
            reps.clear();
            const int n = 1 + static_cast<int>(rng.next() % static_cast<uint64_t>(R));
            const int first = static_cast<int>(rng.next() % static_cast<uint64_t>(R));
            double sum = 0;
            for (int i = 0; i < n; ++i) {
                const double w = 0.1 + rng.uniform();
                reps.push_back({(first + i) % R, w});
                sum += w;
            }
            for (auto& r : reps) r.share /= sum;
        }
    return p;
}

Case make_case(Variant v, int64_t T, uint64_t seed) {
    Case c;
    c.spec = make_spec(v, 16, 4, 48, 40);
    c.model = make_model(c.spec, seed);
    c.x = random_x(T, c.spec.n_embd, seed + 1);
    c.T = T;
    return c;
}

class EpBitwise : public testing::TestWithParam<Variant> {};

TEST_P(EpBitwise, EveryRankCountAndPlacement) {
    Case c = make_case(GetParam(), 23, 31);
    const std::vector<float> ref = single(c);
    for (int R = 1; R <= 4; ++R)
        for (int which = 0; which < 2; ++which) {
            const dist::Placement pl = which == 0 ? dist::Placement::contiguous(1, 16, R)
                                                  : random_placement(1, 16, R, 100 + static_cast<uint64_t>(R));
            for (bool overlap : {false, true}) {
                const auto ys = run_ep(c, R, pl, EpCompress::None, nullptr, overlap);
                for (int r = 0; r < R; ++r)
                    EXPECT_EQ(std::memcmp(ys[static_cast<size_t>(r)].data(), ref.data(), ref.size() * 4), 0)
                        << "R=" << R << " rank " << r << " placement " << pl.algorithm << " overlap " << overlap;
            }
        }
}

INSTANTIATE_TEST_SUITE_P(Moe, EpBitwise, testing::ValuesIn(all_variants()),
                         [](const testing::TestParamInfo<Variant>& i) { return std::string(variant_name(i.param)); });

// A batch smaller than R (decode): ranks with no tokens still take part in every collective.
TEST(Ep, FewerTokensThanRanks) {
    Case c = make_case(Variant::Qwen2Shared, 2, 41);
    const std::vector<float> ref = single(c);
    for (bool overlap : {false, true}) {
        const auto ys = run_ep(c, 4, dist::Placement::contiguous(1, 16, 4), EpCompress::None, nullptr, overlap);
        for (const auto& y : ys) EXPECT_EQ(std::memcmp(y.data(), ref.data(), ref.size() * 4), 0);
    }
}

double nmse_f(const std::vector<float>& a, const std::vector<float>& ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
        den += double(ref[i]) * ref[i];
    }
    return num / den;
}

// With overlap the traffic is the same: the counters add up over the two micro-batches.
TEST(Ep, OverlapSameTraffic) {
    Case c = make_case(Variant::DeepSeekV3, 31, 91);
    std::vector<EpStageTimes> a, b;
    run_ep(c, 3, dist::Placement::contiguous(1, 16, 3), EpCompress::None, &a, false);
    run_ep(c, 3, dist::Placement::contiguous(1, 16, 3), EpCompress::None, &b, true);
    for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(a[static_cast<size_t>(r)].rows_sent, b[static_cast<size_t>(r)].rows_sent);
        EXPECT_EQ(a[static_cast<size_t>(r)].bytes_sent, b[static_cast<size_t>(r)].bytes_sent);
        EXPECT_GT(a[static_cast<size_t>(r)].rows_sent, 0);
    }
}

// bf16 keeps 8 significant bits (relative error <= 2^-9 per value, NMSE of the inputs ~ 2^-18 / 3
// ~ 1.3e-6); int8 with a per-row scale max|x| / 127 has an error of at most half a step (NMSE of
// Gaussian inputs ~ (3 / 127)^2 / 12 ~ 5e-5). The FFN passes that relative error on with a small
// gain; the bounds leave a factor of ~10. A wrong row or scale gives NMSE ~ 1.
TEST(Ep, CompressionNmseBounded) {
    for (Variant v : all_variants()) {
        Case c = make_case(v, 29, 51);
        const std::vector<float> ref = single(c);
        const dist::Placement pl = dist::Placement::contiguous(1, 16, 3);
        const double e_bf16 = nmse_f(run_ep(c, 3, pl, EpCompress::BF16)[1], ref);
        const double e_int8 = nmse_f(run_ep(c, 3, pl, EpCompress::Int8)[2], ref);
        EXPECT_GT(e_bf16, 0.0) << variant_name(v);  // it did compress
        EXPECT_LT(e_bf16, 3e-5) << variant_name(v);
        EXPECT_GT(e_int8, e_bf16) << variant_name(v);
        EXPECT_LT(e_int8, 1e-3) << variant_name(v);
    }
}

TEST(Ep, RecordCodecRoundTrip) {
    const int64_t D = 37;
    const std::vector<float> x = random_x(1, D, 61);
    for (EpCompress c : {EpCompress::None, EpCompress::BF16, EpCompress::Int8}) {
        std::vector<char> rec(ep_record_bytes(D, c));
        std::vector<float> y(static_cast<size_t>(D));
        ep_encode_row(x.data(), D, c, rec.data() + 4);
        ep_decode_row(rec.data() + 4, D, c, y.data());
        float amax = 0;
        for (float v : x) amax = std::max(amax, std::fabs(v));
        for (int64_t i = 0; i < D; ++i) {
            const double tol = c == EpCompress::None ? 0.0 : c == EpCompress::BF16 ? std::fabs(x[i]) / 256.0 : amax / 254.0 * 1.0001;
            EXPECT_LE(std::fabs(double(y[i]) - x[i]), tol) << ep_compress_name(c) << " " << i;
        }
    }
    EXPECT_EQ(ep_record_bytes(D, EpCompress::None), 4u + 4 * 37);
    EXPECT_EQ(ep_record_bytes(D, EpCompress::Int8), 8u + 40);
}

// Counters: rows sent to other ranks = (token, slot) pairs whose expert lives elsewhere, counted
// independently from the single-process routing and the contiguous placement.
TEST(Ep, TrafficCounters) {
    Case c = make_case(Variant::SoftmaxNorm, 17, 71);
    kernels::CpuKernels k = kernels::CpuKernels::from_env();
    MoeBlock b(c.spec, c.model.views(0), k, c.T, 1);
    ThreadPool pool(1);
    std::vector<float> y(static_cast<size_t>(c.T * c.spec.n_embd));
    b.forward(pool, c.x.data(), c.T, y.data());
    const int R = 3, kk = c.spec.top_k;
    int64_t expect_rows = 0;
    for (int64_t t = 0; t < c.T; ++t) {
        int o = 0;  // owner: slices are [T * r / R, T * (r + 1) / R)
        while (!(t >= c.T * o / R && t < c.T * (o + 1) / R)) ++o;
        for (int s = 0; s < kk; ++s) {
            const int e = b.last_routing().ids[t * kk + s];
            if (e * R / 16 != o) ++expect_rows;
        }
    }
    std::vector<EpStageTimes> times;
    run_ep(c, R, dist::Placement::contiguous(1, 16, R), EpCompress::None, &times);
    int64_t rows = 0, bytes = 0;
    for (const auto& t : times) {
        rows += t.rows_sent;
        bytes += t.bytes_sent;
        EXPECT_EQ(t.calls, 1);
    }
    EXPECT_EQ(rows, expect_rows);
    EXPECT_EQ(bytes, expect_rows * static_cast<int64_t>(ep_record_bytes(48, EpCompress::None) + 48 * 4));
}

TEST(Ep, Errors) {
    Case c = make_case(Variant::SoftmaxNorm, 4, 81);
    kernels::CpuKernels k = kernels::CpuKernels::from_env();
    dist::LocalGroup g;
    const dist::Placement wrong_e = dist::Placement::contiguous(1, 8, 1);
    const dist::Placement wrong_r = dist::Placement::contiguous(1, 16, 2);
    MoeBlock b(c.spec, c.model.views(0), k, c.T, 1);
    EXPECT_THROW(b.use_ep(EpConfig{&g, &wrong_e, EpCompress::None}), moe::Error);
    EXPECT_THROW(b.use_ep(EpConfig{&g, &wrong_r, EpCompress::None}), moe::Error);
    MoeApprox ap;
    ap.prune_threshold = 0.1f;
    MoeBlock ba(c.spec, c.model.views(0), k, c.T, 1, ap);
    const dist::Placement ok = dist::Placement::contiguous(1, 16, 1);
    EXPECT_THROW(ba.use_ep(EpConfig{&g, &ok, EpCompress::None}), moe::Error);
    EXPECT_THROW(parse_ep_compress("fp8"), moe::Error);
}

// Data-parallel attention (EpConfig::dp): every rank brings its own tokens (a different count per
// rank and step, 0 = ep_idle), and each rank's y must be bitwise the single-process block's output
// for that rank's tokens alone. With a "hot" placement (13 of 16 experts on rank 0) rank 0 receives
// more rows than one grouped-FFN call holds, so the chunked path runs too.
class EpDataParallel : public testing::TestWithParam<Variant> {};

TEST_P(EpDataParallel, OwnTokensPerRankBitwise) {
    constexpr int64_t kMax = 9;  // max tokens per rank and step
    Case c = make_case(GetParam(), kMax, 57);
    const int64_t D = c.spec.n_embd;
    kernels::CpuKernels kk = kernels::CpuKernels::from_env();
    MoeBlock one(c.spec, c.model.views(0), kk, kMax, 2);
    ThreadPool pool2(2);
    constexpr int kSteps = 3;
    for (int R = 1; R <= 4; ++R) {
        // tokens of rank r in step s (0..kMax; 0 -> idle) and their inputs
        auto count = [&](int r, int s) { return static_cast<int64_t>((r * 5 + s * 7 + R) % (kMax + 1)); };
        std::vector<std::vector<float>> xs(static_cast<size_t>(R * kSteps)), want(xs.size());
        for (int r = 0; r < R; ++r)
            for (int s = 0; s < kSteps; ++s) {
                const int64_t T = count(r, s);
                const size_t i = static_cast<size_t>(r * kSteps + s);
                if (T == 0) continue;
                xs[i] = random_x(T, D, 700 + i + 10 * static_cast<uint64_t>(R));
                want[i].assign(static_cast<size_t>(T * D), 0.0f);
                one.forward(pool2, xs[i].data(), T, want[i].data());
            }
        dist::Placement hot = dist::Placement::contiguous(1, 16, R);
        for (int e = 0; e < 16; ++e) hot.layers[0][static_cast<size_t>(e)] = {{e < 13 ? 0 : (e - 13) % R, 1.0}};
        hot.algorithm = "hot";
        for (const dist::Placement& pl : {hot, random_placement(1, 16, R, 300 + static_cast<uint64_t>(R))})
            for (bool overlap : {false, true}) {
                dist::ThreadHub hub(R);
                std::vector<std::vector<float>> got(xs.size());
                std::vector<EpStageTimes> times(static_cast<size_t>(R));
                std::vector<std::thread> th;
                for (int r = 0; r < R; ++r)
                    th.emplace_back([&, r] {
                        dist::ThreadGroup g(hub, r);
                        kernels::CpuKernels k = kernels::CpuKernels::from_env();
                        MoeBlock b(c.spec, c.model.views(0), k, kMax, 1);
                        EpConfig cfg{&g, &pl, EpCompress::None, overlap};
                        cfg.dp = true;
                        b.use_ep(cfg);
                        ThreadPool pool(1);
                        for (int s = 0; s < kSteps; ++s) {
                            const size_t i = static_cast<size_t>(r * kSteps + s);
                            const int64_t T = count(r, s);
                            if (T == 0) {
                                b.ep_idle(pool);
                                continue;
                            }
                            got[i].assign(static_cast<size_t>(T * D), -1.0f);
                            b.forward(pool, xs[i].data(), T, got[i].data());
                        }
                        times[static_cast<size_t>(r)] = *b.ep_times();
                    });
                for (auto& t : th) t.join();
                for (size_t i = 0; i < xs.size(); ++i) {
                    ASSERT_EQ(got[i].size(), want[i].size());
                    if (want[i].empty()) continue;  // a step with no tokens on this rank (memcmp on null is UB)
                    EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), want[i].size() * 4), 0)
                        << "R=" << R << " rank " << i / kSteps << " step " << i % kSteps << " placement "
                        << pl.algorithm << " overlap " << overlap;
                }
                EXPECT_EQ(times[0].gather_bytes, 0);
                if (R == 4 && pl.algorithm == "hot") {
                    EXPECT_GT(times[0].max_rows_recv, kMax * c.spec.top_k) << "the chunked path did not run";
                }
            }
    }
}

INSTANTIATE_TEST_SUITE_P(Moe, EpDataParallel, testing::ValuesIn(all_variants()),
                         [](const testing::TestParamInfo<Variant>& i) { return std::string(variant_name(i.param)); });

TEST(Ep, IdleNeedsDataParallel) {
    Case c = make_case(Variant::Qwen2Shared, 4, 43);
    kernels::CpuKernels k = kernels::CpuKernels::from_env();
    MoeBlock b(c.spec, c.model.views(0), k, c.T, 1);
    ThreadPool pool(1);
    EXPECT_THROW(b.ep_idle(pool), Error);
    dist::LocalGroup g;
    const dist::Placement pl = dist::Placement::contiguous(1, 16, 1);
    b.use_ep(EpConfig{&g, &pl, EpCompress::None, false});
    try {
        b.ep_idle(pool);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--ep-dp"), std::string::npos) << e.what();
    }
}

}  // namespace
