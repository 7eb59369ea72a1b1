// GroupedFfn's two schedules (experts.h): the fused decode schedule (gate/up and down tiles in one
// pool region, per-expert ready flags) must give exactly the bytes of the two-phase schedule, for
// every pool size, weight type mix and row distribution (including empty experts and a group that
// starts at a nonzero row, as the expert cache's runs of ready experts do), and both must match an
// fp64 reference on the dequantized weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/thread_pool.h"
#include "kernels/ref/quant_formats.h"
#include "moe/experts.h"

using namespace moe;

namespace {

constexpr int kE = 6;
constexpr int64_t kD = 256, kF = 512;

// One [K, N, E] stack of random weights ~ N(0, 1/K) at type t; deq holds the dequantized values.
struct Stack {
    std::vector<uint8_t> bytes;
    std::vector<float> deq;
    size_t row_bytes = 0;
};

Stack make_stack(DType t, int64_t K, int64_t N, Rng& rng) {
    Stack s;
    const int64_t rows = N * kE;
    s.deq.resize(static_cast<size_t>(rows * K));
    const float sd = 1.0f / std::sqrt(static_cast<float>(K));
    for (float& v : s.deq) v = rng.normal() * sd;
    s.row_bytes = row_bytes(t, static_cast<uint64_t>(K));
    s.bytes.resize(s.row_bytes * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
        float* row = s.deq.data() + r * K;
        uint8_t* q = s.bytes.data() + static_cast<size_t>(r) * s.row_bytes;
        if (t == DType::F32) {
            std::memcpy(q, row, sizeof(float) * static_cast<size_t>(K));
            continue;
        }
        EXPECT_TRUE(ref::quantize_row(t, row, q, K));
        ref::dequantize_row(t, q, row, K);
    }
    return s;
}

ExpertMatrix view(const Stack& s, int64_t N, DType t, const kernels::CpuKernels& k) {
    ExpertMatrix m;
    m.data = reinterpret_cast<const char*>(s.bytes.data());
    m.row_stride = s.row_bytes;
    m.expert_stride = s.row_bytes * static_cast<size_t>(N);
    m.kernel = &k.matmul(t, "test");
    return m;
}

struct Types {
    DType gate_up, down;
};

// Random gate / up / down stacks of the types (kE experts of F rows) and the ExpertFfn viewing
// them (not copyable: f points into the stacks).
struct Experts {
    Stack gate, up, down;
    ExpertFfn f;
    Experts(const Types& ty, const kernels::CpuKernels& kern, Rng& rng, int64_t F = kF)
        : gate(make_stack(ty.gate_up, kD, F, rng)), up(make_stack(ty.gate_up, kD, F, rng)),
          down(make_stack(ty.down, F, kD, rng)) {
        f.gate = view(gate, F, ty.gate_up, kern);
        f.up = view(up, F, ty.gate_up, kern);
        f.down = view(down, kD, ty.down, kern);
        f.n_embd = kD;
        f.n_ff = F;
    }
    Experts(const Experts&) = delete;
    Experts& operator=(const Experts&) = delete;
};

// Random seeds of a case: n, or at most MOE_TEST_SEEDS. `make test-tsan` sets 2: under ThreadSanitizer
// (~40x slower) what is checked is the pool's interleavings, which every seed drives alike; the
// Release and ASan runs take every seed.
uint64_t seeds(uint64_t n) {
    const char* e = std::getenv("MOE_TEST_SEEDS");
    const long cap = e ? std::strtol(e, nullptr, 10) : 0;
    return cap > 0 ? std::min(n, static_cast<uint64_t>(cap)) : n;
}

class GroupedFfnSchedule : public testing::TestWithParam<Types> {};

TEST_P(GroupedFfnSchedule, FusedEqualsTwoPhaseAndReference) {
    const Types ty = GetParam();
    const kernels::CpuKernels kern = kernels::CpuKernels::from_env();
    for (uint64_t seed = 1; seed <= seeds(6); ++seed) {
        SCOPED_TRACE(seed);
        Rng rng(0x5eed00 + seed);
        const Experts ex(ty, kern, rng);
        const ExpertFfn& f = ex.f;
        // 0..3 rows per expert (some experts empty), at most kE * 3 = 18 rows: the fused schedule
        // takes up to kFuseRows rows, so cap the total there.
        int64_t offsets[kE + 1] = {0};
        for (int e = 0; e < kE; ++e) {
            const int64_t want = static_cast<int64_t>(rng.below(4));
            offsets[e + 1] = std::min<int64_t>(offsets[e] + want, GroupedFfn::kFuseRows);
        }
        if (offsets[kE] == 0) offsets[kE] = 1;  // at least one row
        const int64_t rows = offsets[kE];
        std::vector<float> xp(static_cast<size_t>(rows * kD));
        for (float& v : xp) v = rng.normal();

        // fp64 reference on the dequantized weights.
        std::vector<double> ref(static_cast<size_t>(rows * kD));
        for (int e = 0; e < kE; ++e)
            for (int64_t p = offsets[e]; p < offsets[e + 1]; ++p) {
                std::vector<double> h(static_cast<size_t>(kF));
                for (int64_t j = 0; j < kF; ++j) {
                    double g = 0, u = 0;
                    const float* gr = ex.gate.deq.data() + (e * kF + j) * kD;
                    const float* ur = ex.up.deq.data() + (e * kF + j) * kD;
                    for (int64_t i = 0; i < kD; ++i) {
                        g += double(gr[i]) * xp[static_cast<size_t>(p * kD + i)];
                        u += double(ur[i]) * xp[static_cast<size_t>(p * kD + i)];
                    }
                    h[static_cast<size_t>(j)] = g / (1.0 + std::exp(-g)) * u;
                }
                for (int64_t d = 0; d < kD; ++d) {
                    double y = 0;
                    const float* dr = ex.down.deq.data() + (e * kD + d) * kF;
                    for (int64_t j = 0; j < kF; ++j) y += double(dr[j]) * h[static_cast<size_t>(j)];
                    ref[static_cast<size_t>(p * kD + d)] = y;
                }
            }

        for (int threads : {1, 2, 3}) {
            SCOPED_TRACE(threads);
            ThreadPool pool(threads);
            std::vector<char> scratch(GroupedFfn::scratch_bytes(kE, threads) + 64);
            std::vector<char> act(GroupedFfn::act_scratch_bytes(rows, std::max(kD, kF)));
            auto run = [&](GroupedFfn::Schedule s, int e0, std::vector<float>& out) {
                std::vector<float> h(static_cast<size_t>(rows * kF), std::nanf(""));
                out.assign(static_cast<size_t>(rows * kD), std::nanf(""));
                ExpertFfn fs = f;  // experts [e0, kE): the expert cache's calls over a run of experts
                fs.gate.data += static_cast<size_t>(e0) * f.gate.expert_stride;
                fs.up.data += static_cast<size_t>(e0) * f.up.expert_stride;
                fs.down.data += static_cast<size_t>(e0) * f.down.expert_stride;
                GroupedFfn::run(pool, fs, kE - e0, offsets + e0, xp.data(), h.data(), out.data(), scratch.data(),
                                act.data(), s);
            };
            std::vector<float> two, fused, autod;
            run(GroupedFfn::Schedule::TwoPhase, 0, two);
            run(GroupedFfn::Schedule::Fused, 0, fused);
            run(GroupedFfn::Schedule::Auto, 0, autod);
            ASSERT_EQ(0, std::memcmp(two.data(), fused.data(), sizeof(float) * two.size()));
            ASSERT_EQ(0, std::memcmp(two.data(), autod.data(), sizeof(float) * two.size()));
            // A group starting at a nonzero row (experts 2..): its rows are bitwise the same.
            std::vector<float> part_two, part_fused;
            run(GroupedFfn::Schedule::TwoPhase, 2, part_two);
            run(GroupedFfn::Schedule::Fused, 2, part_fused);
            const size_t b = static_cast<size_t>(offsets[2] * kD), e = static_cast<size_t>(rows * kD);
            ASSERT_EQ(0, std::memcmp(part_fused.data() + b, two.data() + b, sizeof(float) * (e - b)));
            ASSERT_EQ(0, std::memcmp(part_two.data() + b, two.data() + b, sizeof(float) * (e - b)));

            // Against the reference: f32 to rounding, int8 activations to their quantization error
            // (see test_moe_quant.cpp: NMSE <= 1e-3 for two quantized stages).
            double num = 0, den = 0;
            for (size_t i = 0; i < ref.size(); ++i) {
                const double d = fused[i] - ref[i];
                num += d * d;
                den += ref[i] * ref[i];
            }
            const double tol = ty.gate_up == DType::F32 && ty.down == DType::F32 ? 1e-9 : 1e-3;
            EXPECT_LT(num / den, tol);
        }
    }
}

// Prefill-sized groups: experts of more rows than kRowTile are cut into evened-out row tiles
// (row_tile_of in experts.cpp); every row must come out exactly as when its expert runs it alone
// (one row per call: the decode kernel), whatever the tiles and the pool size.
TEST_P(GroupedFfnSchedule, TallExpertsRowTilesEqualRowsAlone) {
    const Types ty = GetParam();
    const kernels::CpuKernels kern = kernels::CpuKernels::from_env();
    Rng rng(0x7a11);
    const Experts ex(ty, kern, rng);
    const ExpertFfn& f = ex.f;
    const int64_t want[kE] = {GroupedFfn::kRowTile + 2, 0, 2 * GroupedFfn::kRowTile + 1, 5, GroupedFfn::kRowTile + 1, 66};
    int64_t offsets[kE + 1] = {0};
    for (int e = 0; e < kE; ++e) offsets[e + 1] = offsets[e] + want[e];
    const int64_t rows = offsets[kE];
    std::vector<float> xp(static_cast<size_t>(rows * kD));
    for (float& v : xp) v = rng.normal();
    for (int threads : {1, 2, 3}) {
        SCOPED_TRACE(threads);
        ThreadPool pool(threads);
        std::vector<char> scratch(GroupedFfn::scratch_bytes(kE, threads) + 64);
        std::vector<char> act(GroupedFfn::act_scratch_bytes(rows, std::max(kD, kF)));
        std::vector<float> h(static_cast<size_t>(rows * kF)), out(static_cast<size_t>(rows * kD), std::nanf(""));
        GroupedFfn::run(pool, f, kE, offsets, xp.data(), h.data(), out.data(), scratch.data(), act.data(),
                        GroupedFfn::Schedule::TwoPhase);
        std::vector<float> h1(static_cast<size_t>(kF)), one(static_cast<size_t>(kD));
        for (int e = 0; e < kE; ++e) {
            ExpertFfn fe = f;
            fe.gate.data += static_cast<size_t>(e) * f.gate.expert_stride;
            fe.up.data += static_cast<size_t>(e) * f.up.expert_stride;
            fe.down.data += static_cast<size_t>(e) * f.down.expert_stride;
            const int64_t off1[2] = {0, 1};
            for (int64_t p = offsets[e]; p < offsets[e + 1]; ++p) {
                SCOPED_TRACE(p);
                one.assign(one.size(), std::nanf(""));
                GroupedFfn::run(pool, fe, 1, off1, xp.data() + p * kD, h1.data(), one.data(), scratch.data(), act.data(),
                                GroupedFfn::Schedule::TwoPhase);
                ASSERT_EQ(0, std::memcmp(one.data(), out.data() + p * kD, sizeof(float) * kD));
            }
        }
    }
}

// The shared expert as a second part of the routed experts' run (GroupedFfn::Part, another F and
// its own rows): each part's output is bitwise what its own run gives, fused (decode-sized) and
// two-phase, with tall row tiles too, for every pool size; the h and act scratch of the parts
// must not overlap.
TEST_P(GroupedFfnSchedule, TwoPartsEqualEachPartAlone) {
    const Types ty = GetParam();
    const kernels::CpuKernels kern = kernels::CpuKernels::from_env();
    constexpr int64_t kFs = 768;  // the shared expert's F (DeepSeek: 2 x the routed F)
    for (uint64_t seed = 1; seed <= seeds(5); ++seed) {
        SCOPED_TRACE(seed);
        Rng rng(0x5a4ed0 + seed);
        const Experts routed(ty, kern, rng), shared(ty, kern, rng, kFs);
        const bool tall = seed == 5;  // prefill-sized: row tiles of kRowTile, two-phase only
        int64_t offsets[kE + 1] = {0};
        for (int e = 0; e < kE; ++e)
            offsets[e + 1] = offsets[e] + (tall ? (e == 2 ? GroupedFfn::kRowTile + 3 : 7 * e)
                                                : static_cast<int64_t>(rng.below(3)));
        const int64_t rows = offsets[kE];
        const int64_t T = tall ? GroupedFfn::kRowTile + 5 : 1 + static_cast<int64_t>(rng.below(3));  // shared rows
        const int64_t soff[2] = {0, T};
        std::vector<float> xp(static_cast<size_t>(std::max<int64_t>(rows, 1) * kD)), xs(static_cast<size_t>(T * kD));
        for (float& v : xp) v = rng.normal();
        for (float& v : xs) v = rng.normal();
        for (int threads : {1, 2, 3}) {
            SCOPED_TRACE(threads);
            ThreadPool pool(threads);
            std::vector<char> scratch(GroupedFfn::scratch_bytes(kE + 1, threads) + 64);
            std::vector<char> act(GroupedFfn::act_scratch_bytes(rows + T, std::max(kD, kFs)));
            std::vector<float> h, hs, y, ys, y1, ys1;
            auto reset = [](std::vector<float>& v, int64_t n) { v.assign(static_cast<size_t>(std::max<int64_t>(n, 1)), std::nanf("")); };
            for (GroupedFfn::Schedule s : {GroupedFfn::Schedule::TwoPhase, GroupedFfn::Schedule::Fused, GroupedFfn::Schedule::Auto}) {
                if (tall && s == GroupedFfn::Schedule::Fused) continue;
                SCOPED_TRACE(static_cast<int>(s));
                reset(h, rows * kF), reset(hs, T * kFs), reset(y, rows * kD), reset(ys, T * kD);
                const GroupedFfn::Part parts[2] = {{&routed.f, kE, offsets, xp.data(), h.data(), y.data()},
                                                   {&shared.f, 1, soff, xs.data(), hs.data(), ys.data()}};
                GroupedFfn::run(pool, parts, 2, scratch.data(), act.data(), s);
                reset(h, rows * kF), reset(hs, T * kFs), reset(y1, rows * kD), reset(ys1, T * kD);
                GroupedFfn::run(pool, routed.f, kE, offsets, xp.data(), h.data(), y1.data(), scratch.data(), act.data(), s);
                GroupedFfn::run(pool, shared.f, 1, soff, xs.data(), hs.data(), ys1.data(), scratch.data(), act.data(), s);
                ASSERT_EQ(0, std::memcmp(y.data(), y1.data(), sizeof(float) * static_cast<size_t>(rows * kD)));
                ASSERT_EQ(0, std::memcmp(ys.data(), ys1.data(), sizeof(float) * ys.size()));
            }
        }
    }
}

// Token rows (GroupedFfn::Part::row_token, as MoeBlock passes them): each token's int8 row made
// once and copied to its experts' rows must give bitwise what the gathered float rows give, for
// decode- and prefill-sized batches, every schedule and pool size, a run starting at a nonzero row
// (experts 2..) and the two-part run beside a shared expert; kernels without int8 rows (F32 gate /
// up) read xp, and without xp such a part is one clear error.
TEST_P(GroupedFfnSchedule, TokenRowsEqualGatheredRows) {
    const Types ty = GetParam();
    const kernels::CpuKernels kern = kernels::CpuKernels::from_env();
    for (uint64_t seed = 1; seed <= seeds(4); ++seed) {
        SCOPED_TRACE(seed);
        Rng rng(0x70c0 + seed);
        const Experts ex(ty, kern, rng), shared(ty, kern, rng);
        const bool tall = seed >= 3;  // prefill-sized: row tiles of kRowTile, two-phase
        const int k = tall ? 3 : 2;
        const int64_t T = tall ? GroupedFfn::kRowTile + 9 : 1 + static_cast<int64_t>(rng.below(4));
        std::vector<float> x(static_cast<size_t>(T * kD));
        for (float& v : x) v = rng.normal();
        // Each token routes to k distinct experts; rows grouped by expert, tokens in order within
        // each (build_dispatch's layout).
        std::vector<std::vector<int32_t>> by_e(kE);
        for (int64_t t = 0; t < T; ++t) {
            int picked[kE] = {0};
            for (int s = 0; s < k;) {
                const int e = static_cast<int>(rng.below(kE));
                if (picked[e]++) continue;
                by_e[static_cast<size_t>(e)].push_back(static_cast<int32_t>(t));
                ++s;
            }
        }
        int64_t offsets[kE + 1] = {0};
        std::vector<int32_t> row_token;
        for (int e = 0; e < kE; ++e) {
            for (int32_t t : by_e[static_cast<size_t>(e)]) row_token.push_back(t);
            offsets[e + 1] = static_cast<int64_t>(row_token.size());
        }
        const int64_t rows = offsets[kE];
        std::vector<float> xp(static_cast<size_t>(rows * kD));
        for (int64_t p = 0; p < rows; ++p)
            std::memcpy(xp.data() + p * kD, x.data() + static_cast<int64_t>(row_token[static_cast<size_t>(p)]) * kD, sizeof(float) * kD);
        const int64_t soff[2] = {0, T};
        const bool int8 = GroupedFfn::int8_inputs(ex.f);
        EXPECT_EQ(int8, ty.gate_up != DType::F32);
        for (int threads : {1, 2, 3}) {
            SCOPED_TRACE(threads);
            ThreadPool pool(threads);
            std::vector<char> scratch(GroupedFfn::scratch_bytes(kE + 1, threads) + 64);
            std::vector<char> act(GroupedFfn::act_scratch_bytes(rows + T, std::max(kD, kF), T));
            std::vector<float> h(static_cast<size_t>((rows + 1) * kF)), hs(static_cast<size_t>(T * kF));
            for (GroupedFfn::Schedule s : {GroupedFfn::Schedule::TwoPhase, GroupedFfn::Schedule::Fused, GroupedFfn::Schedule::Auto}) {
                if (tall && s == GroupedFfn::Schedule::Fused) continue;
                SCOPED_TRACE(static_cast<int>(s));
                for (int e0 : {0, 2}) {
                    SCOPED_TRACE(e0);
                    ExpertFfn fs = ex.f;  // experts [e0, kE)
                    fs.gate.data += static_cast<size_t>(e0) * ex.f.gate.expert_stride;
                    fs.up.data += static_cast<size_t>(e0) * ex.f.up.expert_stride;
                    fs.down.data += static_cast<size_t>(e0) * ex.f.down.expert_stride;
                    std::vector<float> want(static_cast<size_t>(rows * kD), std::nanf("")), got = want;
                    GroupedFfn::run(pool, fs, kE - e0, offsets + e0, xp.data(), h.data(), want.data(), scratch.data(), act.data(), s);
                    GroupedFfn::Part part{&fs, kE - e0, offsets + e0, int8 ? nullptr : xp.data(), h.data(), got.data()};
                    part.x = x.data();
                    part.row_token = row_token.data();
                    part.n_tokens = T;
                    GroupedFfn::run(pool, &part, 1, scratch.data(), act.data(), s);
                    const size_t b = static_cast<size_t>(offsets[e0] * kD);
                    ASSERT_EQ(0, std::memcmp(want.data() + b, got.data() + b, sizeof(float) * (want.size() - b)));
                }
                // Beside a shared expert over x (the decode layer's two-part run).
                std::vector<float> want(static_cast<size_t>(rows * kD), std::nanf("")), got = want;
                std::vector<float> ys_want(static_cast<size_t>(T * kD), std::nanf("")), ys_got = ys_want;
                const GroupedFfn::Part gathered[2] = {{&ex.f, kE, offsets, xp.data(), h.data(), want.data()},
                                                      {&shared.f, 1, soff, x.data(), hs.data(), ys_want.data()}};
                GroupedFfn::run(pool, gathered, 2, scratch.data(), act.data(), s);
                GroupedFfn::Part tok[2] = {{&ex.f, kE, offsets, int8 ? nullptr : xp.data(), h.data(), got.data()},
                                           {&shared.f, 1, soff, x.data(), hs.data(), ys_got.data()}};
                tok[0].x = x.data();
                tok[0].row_token = row_token.data();
                tok[0].n_tokens = T;
                GroupedFfn::run(pool, tok, 2, scratch.data(), act.data(), s);
                ASSERT_EQ(0, std::memcmp(want.data(), got.data(), sizeof(float) * want.size()));
                ASSERT_EQ(0, std::memcmp(ys_want.data(), ys_got.data(), sizeof(float) * ys_want.size()));
            }
            if (!int8) {  // no int8 rows and no xp: the caller's error, named
                std::vector<float> out(static_cast<size_t>(rows * kD));
                GroupedFfn::Part part{&ex.f, kE, offsets, nullptr, h.data(), out.data()};
                part.x = x.data();
                part.row_token = row_token.data();
                part.n_tokens = T;
                try {
                    GroupedFfn::run(pool, &part, 1, scratch.data(), act.data());
                    ADD_FAILURE() << "no error";
                } catch (const std::exception& e) {
                    EXPECT_NE(std::string(e.what()).find("no xp rows"), std::string::npos) << e.what();
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, GroupedFfnSchedule,
                         testing::Values(Types{DType::F32, DType::F32}, Types{DType::Q8_0, DType::Q8_0},
                                         Types{DType::Q4_K, DType::Q6_K}, Types{DType::F32, DType::Q8_0}),
                         [](const testing::TestParamInfo<Types>& i) {
                             return std::string(dtype_name(i.param.gate_up)) + "_" + dtype_name(i.param.down);
                         });

}  // namespace
