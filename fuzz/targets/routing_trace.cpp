// The routing-file readers: the trace TSV of `moe run --routing-trace` as `moe cache-sim` reads it
// (moe/cache_sim.h, then the simulation itself) and as `moe place --trace` / `moe sim-ep` read it
// (dist/planner.h), the counts JSON of `moe place --counts`, and the routing profile of
// `--cache-profile` (moe/cache_policy.h: a trace or a counts JSON). Input: byte 0 picks the reader
// (mod 4) and, for the simulation, spare slots (bits 2-4); the rest is the file.
// Properties: only moe::Error escapes; what a reader accepts is consistent (ids below the reported
// sizes, count tables of the reported shape below the cell limit, counts equal to the records);
// the cache simulation counts every access once, hits <= accesses, and with room for every distinct
// key misses only on first use.
#include <cmath>
#include <set>
#include <string>

#include "dist/planner.h"
#include "fuzz/fuzz_target.h"
#include "moe/cache_policy.h"
#include "moe/cache_sim.h"

namespace moe::fuzz {

namespace {
void cache_sim(const std::string& text, int spare) {
    const RoutingTraceFile t = parse_routing_trace(text, "<fuzz>");
    MOE_FUZZ_CHECK(!t.records.empty() && int64_t(t.n_layer) * t.n_expert <= kMaxTraceCells, "trace shape");
    size_t max_req = 0;
    int64_t accesses = 0;
    std::set<int64_t> keys;
    for (const TraceRecord& r : t.records) {
        MOE_FUZZ_CHECK(r.layer >= 0 && r.layer < t.n_layer, "layer ", r.layer, " of ", t.n_layer);
        std::set<int32_t> seen;
        for (int32_t e : r.experts) {
            MOE_FUZZ_CHECK(e >= 0 && e < t.n_expert && seen.insert(e).second, "expert ", e, " of ", t.n_expert);
            keys.insert(int64_t(r.layer) * t.n_expert + e);
        }
        max_req = std::max(max_req, r.experts.size());
        accesses += static_cast<int64_t>(r.experts.size());
    }
    const int capacity = static_cast<int>(max_req) + spare;
    for (const char* policy : {"lru", "lfu", "pinned", "belady"}) {
        if (capacity < 1) break;
        const CacheSimResult res = simulate_cache(t, capacity, policy);
        MOE_FUZZ_CHECK(res.accesses == accesses && res.hits <= res.accesses && res.evictions <= res.accesses - res.hits,
                       policy, ": accesses ", res.accesses, " hits ", res.hits, " evictions ", res.evictions);
        if (static_cast<size_t>(capacity) >= keys.size())
            MOE_FUZZ_CHECK(res.accesses - res.hits == static_cast<int64_t>(keys.size()) && res.evictions == 0, policy,
                           ": misses beyond the compulsory ones with room for every key");
    }
}

void check_load(const dist::LoadInput& in, bool trace) {
    MOE_FUZZ_CHECK(in.n_layers >= 1 && in.n_experts >= (trace ? 0 : 1) &&
                       int64_t(in.n_layers) * in.n_experts <= dist::kMaxLoadCells,
                   "load shape ", in.n_layers, " x ", in.n_experts);
    MOE_FUZZ_CHECK(in.counts.size() == static_cast<size_t>(in.n_layers), "counts rows");
    for (size_t l = 0; l < in.counts.size(); ++l) {
        MOE_FUZZ_CHECK(in.counts[l].size() == static_cast<size_t>(in.n_experts), "counts row length");
        double sum = 0;
        for (double c : in.counts[l]) {
            MOE_FUZZ_CHECK(c >= 0 && std::isfinite(c), "count ", c);
            sum += c;
        }
        if (!trace) continue;
        double listed = 0;
        for (const auto& tok : in.tokens[l])
            for (int32_t e : tok) {
                MOE_FUZZ_CHECK(e >= 0 && e < in.n_experts, "trace expert ", e, " of ", in.n_experts);
                listed += 1;
            }
        MOE_FUZZ_CHECK(sum == listed, "layer ", l, ": counts ", sum, " != ", listed, " listed experts");
    }
    if (trace) (void)dist::slice_tokens(in, 0.25, 0.75);
}
}  // namespace

void routing_trace(const uint8_t* data, size_t size) {
    if (size == 0) return;
    const uint8_t sel = data[0];
    const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
    expect_clean([&] {
        switch (sel & 3) {
            case 0: cache_sim(text, (sel >> 2) & 7); break;
            case 1: check_load(dist::parse_trace_tsv(text, "<fuzz>", (sel >> 2) & 7), true); break;
            case 2: check_load(dist::parse_counts_json(text, "<fuzz>"), false); break;
            default: {
                const RoutingProfile p = parse_routing_profile(text, "<fuzz>");
                MOE_FUZZ_CHECK(p.n_layer >= 1 && p.n_expert >= 1 &&
                                   p.counts.size() == static_cast<size_t>(p.n_layer) * static_cast<size_t>(p.n_expert),
                               "profile shape");
                for (int64_t c : p.counts) MOE_FUZZ_CHECK(c >= 0, "profile count ", c);
                make_cache_policy("pinned", p)->reset(8);
            }
        }
    });
}

}  // namespace moe::fuzz
