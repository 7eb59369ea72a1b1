#pragma once
// Eviction policies of the expert cache (expert_cache.h) and of `moe cache-sim`: one interface,
// one file per policy (policy_*.cpp), chosen by name.
//
// A cache has n_slots slots; a key is one expert of one layer (layer * n_expert + expert). The
// cache tells the policy about every access (insert on a miss, hit otherwise) with a tick that
// grows by one per access, and asks it for the slot to evict among the evictable ones (the
// experts of the current request are never evictable).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moe {

class CachePolicy {
public:
    virtual ~CachePolicy() = default;
    virtual const char* name() const = 0;
    virtual void reset(int n_slots) = 0;
    virtual void on_insert(int slot, int64_t key, int64_t tick) = 0;
    virtual void on_hit(int slot, int64_t key, int64_t tick) = 0;
    // Slot to evict: evictable[s] != 0 for the candidates (at least one). Ties: lowest slot.
    virtual int victim(const uint8_t* evictable, int64_t tick) const = 0;
    // Keys will be in [0, n_keys): a policy with per-key state allocates it here, not on a miss.
    virtual void reserve_keys(int64_t n_keys) {}
};

// Routing profile for the pinned policy: accesses per key (layer * n_expert + expert).
struct RoutingProfile {
    int n_layer = 0, n_expert = 0;
    std::vector<int64_t> counts;  // [n_layer * n_expert]
    bool empty() const { return counts.empty(); }
};

// A `moe run --routing-trace` TSV (layer, token, experts, weights) or a JSON of aggregate counts
// {"n_expert": E, "counts": [[layer 0: E counts], [layer 1], ...]}. Throws moe::Error naming the
// file and line on bad input.
RoutingProfile load_routing_profile(const std::string& path);
// The same on the file's text (`name` labels errors; fuzz/targets/routing_trace).
RoutingProfile parse_routing_profile(const std::string& text, const std::string& name);

// "lru" | "lfu" (LFU with exponential decay) | "pinned" (the hottest keys of `profile` hold up to
// half of the slots for good, the rest is LRU) | "lfu-history" (LFU with decay whose counts belong to
// the key and survive eviction). Throws moe::Error listing the names.
std::unique_ptr<CachePolicy> make_cache_policy(const std::string& name, const RoutingProfile& profile = {});
inline constexpr const char* kCachePolicies = "lru, lfu, lfu-history, pinned";

std::unique_ptr<CachePolicy> make_lru_policy();
std::unique_ptr<CachePolicy> make_lfu_policy();
std::unique_ptr<CachePolicy> make_lfu_history_policy();
std::unique_ptr<CachePolicy> make_pinned_policy(const RoutingProfile& profile);

}  // namespace moe
