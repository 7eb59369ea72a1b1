// Frequency-pinned: the keys a routing profile shows hottest keep up to half of the slots for
// good once loaded (never evicted); every other slot is LRU. Good when routing is skewed and
// stable (the profile comes from a previous run of similar text).
#include <algorithm>
#include <numeric>

#include "moe/cache_policy.h"

namespace moe {
namespace {

class Pinned final : public CachePolicy {
public:
    explicit Pinned(const RoutingProfile& p) : profile_(p) {}
    const char* name() const override { return "pinned"; }
    void reset(int n_slots) override {
        last_.assign(static_cast<size_t>(n_slots), -1);
        pinned_slot_.assign(static_cast<size_t>(n_slots), 0);
        // The n_slots / 2 hottest keys of the profile (ties: lower key).
        hot_.assign(profile_.counts.size(), 0);
        std::vector<int64_t> keys(profile_.counts.size());
        std::iota(keys.begin(), keys.end(), 0);
        const size_t n_pin = std::min(keys.size(), static_cast<size_t>(n_slots / 2));
        std::partial_sort(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(n_pin), keys.end(),
                          [&](int64_t a, int64_t b) {
                              const int64_t ca = profile_.counts[static_cast<size_t>(a)],
                                            cb = profile_.counts[static_cast<size_t>(b)];
                              return ca != cb ? ca > cb : a < b;
                          });
        for (size_t i = 0; i < n_pin; ++i)
            if (profile_.counts[static_cast<size_t>(keys[i])] > 0) hot_[static_cast<size_t>(keys[i])] = 1;
    }
    void on_insert(int slot, int64_t key, int64_t tick) override {
        const size_t s = static_cast<size_t>(slot);
        last_[s] = tick;
        pinned_slot_[s] = key >= 0 && static_cast<size_t>(key) < hot_.size() && hot_[static_cast<size_t>(key)];
    }
    void on_hit(int slot, int64_t, int64_t tick) override { last_[static_cast<size_t>(slot)] = tick; }
    int victim(const uint8_t* evictable, int64_t) const override {
        int best = -1, fallback = -1;
        for (int s = 0; s < static_cast<int>(last_.size()); ++s) {
            if (!evictable[s]) continue;
            const size_t i = static_cast<size_t>(s);
            if (fallback < 0 || last_[i] < last_[static_cast<size_t>(fallback)]) fallback = s;
            if (!pinned_slot_[i] && (best < 0 || last_[i] < last_[static_cast<size_t>(best)])) best = s;
        }
        return best >= 0 ? best : fallback;  // every candidate pinned: LRU among them
    }

private:
    RoutingProfile profile_;
    std::vector<int64_t> last_;
    std::vector<uint8_t> pinned_slot_, hot_;
};

}  // namespace

std::unique_ptr<CachePolicy> make_pinned_policy(const RoutingProfile& profile) {
    return std::make_unique<Pinned>(profile);
}

}  // namespace moe
