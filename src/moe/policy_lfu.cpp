// LFU with exponential decay: a slot's score is the sum over its accesses of 2^-(age / half_life),
// evict the lowest; old popularity fades, so a shift in routing is followed. The count lives with
// the slot (an evicted expert starts again from 1), like a hardware LFU.
#include <cmath>

#include "moe/cache_policy.h"

namespace moe {
namespace {

class LfuDecay final : public CachePolicy {
public:
    const char* name() const override { return "lfu"; }
    void reset(int n_slots) override {
        count_.assign(static_cast<size_t>(n_slots), 0.0);
        last_.assign(static_cast<size_t>(n_slots), 0);
        // Half-life of a few cache turnovers (in accesses): long enough to tell hot from cold,
        // short enough to follow drift.
        half_life_ = 4.0 * std::max(1, n_slots);
    }
    void on_insert(int slot, int64_t, int64_t tick) override {
        count_[static_cast<size_t>(slot)] = 1.0;
        last_[static_cast<size_t>(slot)] = tick;
    }
    void on_hit(int slot, int64_t, int64_t tick) override {
        const size_t s = static_cast<size_t>(slot);
        count_[s] = decayed(s, tick) + 1.0;
        last_[s] = tick;
    }
    int victim(const uint8_t* evictable, int64_t tick) const override {
        int best = -1;
        double best_score = 0;
        for (int s = 0; s < static_cast<int>(count_.size()); ++s) {
            if (!evictable[s]) continue;
            const double sc = decayed(static_cast<size_t>(s), tick);
            if (best < 0 || sc < best_score) best = s, best_score = sc;
        }
        return best;
    }

private:
    double decayed(size_t s, int64_t tick) const {
        return count_[s] * std::exp2(-static_cast<double>(tick - last_[s]) / half_life_);
    }
    std::vector<double> count_;
    std::vector<int64_t> last_;
    double half_life_ = 1;
};

}  // namespace

std::unique_ptr<CachePolicy> make_lfu_policy() { return std::make_unique<LfuDecay>(); }

}  // namespace moe
