// Out-of-order expert execution (MoeBlock::run_from_store with ExpertStore::acquire_async /
// wait_ready): whatever order and batches the store reports experts ready in, the block's output
// is bitwise the one of the all-resident block. A scripted store hands out the experts of each
// acquire in a fresh random order, in random batch sizes (one at a time included), at capacities
// from top_k (prefill in many groups) to all experts, for every router variant.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>

#include "core/thread_pool.h"
#include "moe/expert_store.h"
#include "moe_test_util.h"

using namespace moe;
using namespace moe::test;

namespace {

// Experts in place in the test weights, reported ready in a random order.
class ScrambledStore final : public ExpertStore {
public:
    ScrambledStore(const MoeWeights& w, int capacity, uint32_t seed) : w_(w), cap_(capacity), rng_(seed) {}
    void acquire(int, const int32_t* ids, int n, ExpertSlices* out) override {
        EXPECT_LE(n, cap_);
        EXPECT_EQ(held_, 0) << "acquire before release";
        held_ = n;
        for (int i = 0; i < n; ++i) {
            const size_t e = static_cast<size_t>(ids[i]);
            out[i] = {static_cast<const char*>(w_.gate_exps.data) + e * w_.gate_exps.nb[2],
                      static_cast<const char*>(w_.up_exps.data) + e * w_.up_exps.nb[2],
                      static_cast<const char*>(w_.down_exps.data) + e * w_.down_exps.nb[2]};
        }
        ++acquires;
    }
    int wait_ready(uint8_t* ready, int n) override {
        EXPECT_EQ(n, held_);
        std::vector<int> left;
        for (int i = 0; i < n; ++i)
            if (!ready[i]) left.push_back(i);
        if (left.empty()) return 0;
        std::shuffle(left.begin(), left.end(), rng_);
        // Never all of several at once: at least two batches whenever n > 1.
        const size_t most = left.size() > 1 ? left.size() - 1 : 1;
        const int take = 1 + static_cast<int>(rng_() % most);
        for (int j = 0; j < take; ++j) ready[left[static_cast<size_t>(j)]] = 1;
        ++batches;
        return take;
    }
    void release(int) override { held_ = 0; }
    int capacity() const override { return cap_; }
    int acquires = 0, batches = 0;

private:
    MoeWeights w_;
    int cap_, held_ = 0;
    std::mt19937 rng_;
};

class OutOfOrder : public testing::TestWithParam<Variant> {};

TEST_P(OutOfOrder, BitwiseEqualToResidentInAnyReadyOrder) {
    const uint32_t seed = std::random_device{}();
    std::printf("[ out of order ] seed %u\n", seed);
    const int E = 16, k = 4;
    const int64_t D = 64, F = 48;
    const MoeSpec s = make_spec(GetParam(), E, k, D, F);
    TestModel m = make_model(s, seed);
    const MoeWeights w = m.views(1);
    kernels::CpuKernels kern(kernels::supported_isas().back());
    ThreadPool pool(2);
    for (int64_t T : {1, 3, 29}) {
        const std::vector<float> x = random_x(T, D, seed + static_cast<uint64_t>(T));
        MoeBlock ref(s, w, kern, T, 2);
        std::vector<float> y0(static_cast<size_t>(T * D)), y1(y0.size());
        ref.forward(pool, x.data(), T, y0.data(), {});
        for (int cap : {k, k + 3, E}) {
            MoeBlock b(s, w, kern, T, 2);
            ScrambledStore store(w, cap, seed ^ static_cast<uint32_t>(cap * 131 + T));
            b.set_expert_store(&store);
            for (int rep = 0; rep < 3; ++rep) {
                std::fill(y1.begin(), y1.end(), 0.0f);
                b.forward(pool, x.data(), T, y1.data(), {});
                EXPECT_EQ(0, std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float)))
                    << variant_name(GetParam()) << " T " << T << " capacity " << cap << " rep " << rep;
            }
            EXPECT_GT(store.acquires, 0);
            // More ready batches than acquires: the experts really were computed in pieces.
            EXPECT_GT(store.batches, store.acquires) << "T " << T << " capacity " << cap;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Moe, OutOfOrder, testing::ValuesIn(all_variants()),
                         [](const testing::TestParamInfo<Variant>& i) { return std::string(variant_name(i.param)); });

}  // namespace
