#include "moe/cache_sim.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "core/error.h"

namespace moe {

namespace {
bool parse_i64(const std::string& s, int64_t& v) {
    if (s.empty()) return false;
    errno = 0;
    char* end = nullptr;
    const long long x = std::strtoll(s.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE) return false;
    v = x;
    return true;
}
}  // namespace

RoutingTraceFile parse_routing_trace(const std::string& text, const std::string& name) {
    RoutingTraceFile t;
    std::istringstream in(text);
    std::string line;
    int64_t ln = 0;
    constexpr int64_t kMaxId = 1 << 20;  // far above any real layer / expert count
    while (std::getline(in, line)) {
        ++ln;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || (ln == 1 && line.rfind("layer\t", 0) == 0)) continue;
        std::vector<std::string> f;
        size_t p = 0;
        for (;;) {
            const size_t q = line.find('\t', p);
            f.push_back(line.substr(p, q == std::string::npos ? std::string::npos : q - p));
            if (q == std::string::npos) break;
            p = q + 1;
        }
        if (f.size() < 3)
            throw_error("cache-sim", name, ":", ln, ": expected 'layer<TAB>token<TAB>experts[<TAB>weights]', got '",
                        line, "' (write traces with moe run --routing-trace)");
        TraceRecord r;
        int64_t v = 0;
        if (!parse_i64(f[0], v) || v < 0 || v >= kMaxId)
            throw_error("cache-sim", name, ":", ln, ": layer '", f[0], "' is not an integer in [0, ", kMaxId, ")");
        r.layer = static_cast<int>(v);
        if (!parse_i64(f[1], r.token)) throw_error("cache-sim", name, ":", ln, ": token '", f[1], "' is not an integer");
        size_t a = 0;
        while (a <= f[2].size()) {
            size_t b = f[2].find(',', a);
            if (b == std::string::npos) b = f[2].size();
            const std::string e = f[2].substr(a, b - a);
            if (!parse_i64(e, v) || v < 0 || v >= kMaxId)
                throw_error("cache-sim", name, ":", ln, ": expert '", e, "' is not an integer in [0, ", kMaxId, ")");
            if (std::find(r.experts.begin(), r.experts.end(), static_cast<int32_t>(v)) == r.experts.end())
                r.experts.push_back(static_cast<int32_t>(v));
            a = b + 1;
        }
        t.n_layer = std::max(t.n_layer, r.layer + 1);
        for (int32_t e : r.experts) t.n_expert = std::max(t.n_expert, e + 1);
        t.records.push_back(std::move(r));
    }
    if (t.records.empty()) throw_error("cache-sim", name, ": the routing trace has no records");
    // profile_from_trace allocates n_layer x n_expert counts: refuse absurd ids before that.
    if (int64_t(t.n_layer) * t.n_expert > kMaxTraceCells)
        throw_error("cache-sim", name, ": layer ids up to ", t.n_layer - 1, " x expert ids up to ", t.n_expert - 1,
                    " is above the limit of ", kMaxTraceCells, " (layer, expert) pairs; is this a routing trace of a "
                    "real model?");
    return t;
}

RoutingTraceFile read_routing_trace(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw_error("cache-sim", "cannot open routing trace ", path, ": ", std::strerror(errno));
    return parse_routing_trace(std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()),
                               path);
}

RoutingProfile profile_from_trace(const RoutingTraceFile& t) {
    RoutingProfile p;
    p.n_layer = t.n_layer;
    p.n_expert = t.n_expert;
    p.counts.assign(static_cast<size_t>(t.n_layer) * static_cast<size_t>(t.n_expert), 0);
    for (const auto& r : t.records)
        for (int32_t e : r.experts) ++p.counts[static_cast<size_t>(r.layer) * t.n_expert + e];
    return p;
}

CacheSimResult simulate_cache(const RoutingTraceFile& t, int capacity, const std::string& policy,
                              const RoutingProfile& profile) {
    size_t max_req = 0;
    for (const auto& r : t.records) max_req = std::max(max_req, r.experts.size());
    if (capacity < static_cast<int>(max_req) || capacity < 1)
        throw_error("cache-sim", "capacity ", capacity, " is below the largest request of the trace (", max_req,
                    " experts of one layer); use --capacity >= ", max_req);
    const int64_t E = t.n_expert;
    // The access sequence and, for Belady, each access's next use of the same key.
    std::vector<int64_t> keys;
    std::vector<size_t> req_end;
    for (const auto& r : t.records) {
        for (int32_t e : r.experts) keys.push_back(r.layer * E + e);
        req_end.push_back(keys.size());
    }
    const bool belady = policy == "belady";
    std::vector<int64_t> next_use;
    if (belady) {
        next_use.assign(keys.size(), std::numeric_limits<int64_t>::max());
        std::unordered_map<int64_t, int64_t> seen;
        for (size_t i = keys.size(); i-- > 0;) {
            auto it = seen.find(keys[i]);
            if (it != seen.end()) next_use[i] = it->second;
            seen[keys[i]] = static_cast<int64_t>(i);
        }
    }
    RoutingProfile prof = profile;
    if (policy == "pinned" && prof.empty()) prof = profile_from_trace(t);
    std::unique_ptr<CachePolicy> pol = belady ? nullptr : make_cache_policy(policy, prof);
    if (pol) {
        pol->reset(capacity);
        pol->reserve_keys(static_cast<int64_t>(t.n_layer) * E);
    }

    CacheSimResult res;
    res.policy = policy;
    res.capacity = capacity;
    std::unordered_map<int64_t, int> where;                    // key -> slot
    std::vector<int64_t> slot_key(static_cast<size_t>(capacity), -1);
    std::vector<int64_t> slot_next(static_cast<size_t>(capacity), 0);  // Belady: next use of the slot's key
    std::vector<uint8_t> evictable(static_cast<size_t>(capacity), 1);
    std::vector<int> req_slots;
    std::vector<uint8_t> missed(max_req);  // per access of the current request
    int used = 0;
    size_t i = 0;
    for (size_t r = 0; r < req_end.size(); ++r) {
        req_slots.clear();
        // As ExpertCache::acquire_async: the request's resident keys are held before any miss
        // takes a slot, so a miss never evicts a key the same request uses later.
        const size_t i0 = i;
        auto hold = [&](size_t j, int slot) {
            if (belady) slot_next[static_cast<size_t>(slot)] = next_use[j];
            evictable[static_cast<size_t>(slot)] = 0;
            req_slots.push_back(slot);
        };
        for (size_t j = i0; j < req_end[r]; ++j)
            if (auto it = where.find(keys[j]); it != where.end()) {
                ++res.hits;
                if (pol) pol->on_hit(it->second, keys[j], static_cast<int64_t>(j));
                hold(j, it->second);
                missed[j - i0] = 0;
            } else {
                missed[j - i0] = 1;
            }
        for (; i < req_end[r]; ++i) {
            ++res.accesses;
            if (!missed[i - i0]) continue;
            const int64_t key = keys[i];
            int slot;
            if (auto it = where.find(key); it != where.end()) {  // repeated in this request
                slot = it->second;
                ++res.hits;
                if (pol) pol->on_hit(slot, key, static_cast<int64_t>(i));
            } else {
                if (used < capacity) {
                    slot = used++;
                } else {
                    if (belady) {
                        slot = -1;
                        for (int s = 0; s < capacity; ++s)
                            if (evictable[static_cast<size_t>(s)] &&
                                (slot < 0 || slot_next[static_cast<size_t>(s)] > slot_next[static_cast<size_t>(slot)]))
                                slot = s;
                    } else {
                        slot = pol->victim(evictable.data(), static_cast<int64_t>(i));
                    }
                    MOE_ASSERT(slot >= 0, "no evictable slot");
                    where.erase(slot_key[static_cast<size_t>(slot)]);
                    ++res.evictions;
                }
                slot_key[static_cast<size_t>(slot)] = key;
                where[key] = slot;
                if (pol) pol->on_insert(slot, key, static_cast<int64_t>(i));
            }
            hold(i, slot);
        }
        for (int s : req_slots) evictable[static_cast<size_t>(s)] = 1;
    }
    return res;
}

}  // namespace moe
