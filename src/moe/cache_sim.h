#pragma once
// Expert-cache simulation on a routing trace (`moe run --routing-trace` TSV): replays the
// records in file order (the order the engine executed them: per forward call, layer by layer)
// against a cache of `capacity` slots, with an online policy (cache_policy.h) or Belady's offline
// optimum (evict the expert whose next use is farthest away). One record = one request: its
// experts must be resident together, so they never evict each other.
#include <cstdint>
#include <string>
#include <vector>

#include "moe/cache_policy.h"

namespace moe {

struct TraceRecord {
    int layer = 0;
    int64_t token = 0;
    std::vector<int32_t> experts;
};

struct RoutingTraceFile {
    std::vector<TraceRecord> records;
    int n_layer = 0;   // max layer + 1
    int n_expert = 0;  // max expert id + 1
};

// Parses the TSV (header "layer\ttoken\texperts\tweights", then one record a line). Throws
// moe::Error("[cache-sim] FILE:LINE: ...") on malformed lines; an empty trace is an error too, and
// so is one whose (max layer + 1) x (max expert + 1) exceeds kMaxTraceCells (4M; DeepSeek-V3: 16K).
inline constexpr int64_t kMaxTraceCells = int64_t(1) << 22;
RoutingTraceFile read_routing_trace(const std::string& path);
RoutingTraceFile parse_routing_trace(const std::string& text, const std::string& name = "<memory>");

struct CacheSimResult {
    std::string policy;
    int capacity = 0;
    int64_t accesses = 0, hits = 0, evictions = 0;
    double hit_rate() const { return accesses ? static_cast<double>(hits) / static_cast<double>(accesses) : 0.0; }
};

// capacity must be >= the largest request (throws moe::Error otherwise). n_expert: key stride
// (>= the trace's). "belady" as policy name runs the offline optimum.
CacheSimResult simulate_cache(const RoutingTraceFile& trace, int capacity, const std::string& policy,
                              const RoutingProfile& profile = {});

// Accesses per (layer, expert) of a trace, as a pinned-policy profile.
RoutingProfile profile_from_trace(const RoutingTraceFile& trace);

}  // namespace moe
