// Least recently used: evict the slot whose last access is oldest.
#include "moe/cache_policy.h"

namespace moe {
namespace {

class Lru final : public CachePolicy {
public:
    const char* name() const override { return "lru"; }
    void reset(int n_slots) override { last_.assign(static_cast<size_t>(n_slots), -1); }
    void on_insert(int slot, int64_t, int64_t tick) override { last_[static_cast<size_t>(slot)] = tick; }
    void on_hit(int slot, int64_t, int64_t tick) override { last_[static_cast<size_t>(slot)] = tick; }
    int victim(const uint8_t* evictable, int64_t) const override {
        int best = -1;
        for (int s = 0; s < static_cast<int>(last_.size()); ++s)
            if (evictable[s] && (best < 0 || last_[static_cast<size_t>(s)] < last_[static_cast<size_t>(best)]))
                best = s;
        return best;
    }

private:
    std::vector<int64_t> last_;  // [n_slots] tick of the last access
};

}  // namespace

std::unique_ptr<CachePolicy> make_lru_policy() { return std::make_unique<Lru>(); }

}  // namespace moe
