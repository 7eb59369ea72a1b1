#include "moe/cache_policy.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "moe/cache_sim.h"

namespace moe {

std::unique_ptr<CachePolicy> make_cache_policy(const std::string& name, const RoutingProfile& profile) {
    if (name == "lru") return make_lru_policy();
    if (name == "lfu") return make_lfu_policy();
    if (name == "lfu-history") return make_lfu_history_policy();
    if (name == "pinned") {
        if (profile.empty())
            throw_error("experts", "policy 'pinned' needs a routing profile (--cache-profile FILE: a moe run "
                        "--routing-trace TSV or a counts JSON)");
        return make_pinned_policy(profile);
    }
    throw_error("experts", "unknown cache policy '", name, "' (known: ", kCachePolicies, ")");
}

RoutingProfile load_routing_profile(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw_error("experts", "cannot open routing profile ", path, ": ", std::strerror(errno));
    return parse_routing_profile(std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()), path);
}

RoutingProfile parse_routing_profile(const std::string& text, const std::string& path) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos || text[first] != '{') return profile_from_trace(parse_routing_trace(text, path));
    const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    auto bad = [&](const char* what) {
        throw_error("experts", path, ": ", what, " (expected {\"n_expert\": E, \"counts\": [[E counts of layer 0], ...]})");
    };
    if (j.is_discarded() || !j.is_object()) bad("not valid JSON");
    if (!j.contains("n_expert") || !j["n_expert"].is_number_integer() || j["n_expert"].get<int64_t>() < 1 ||
        j["n_expert"].get<int64_t>() > (1 << 20))
        bad("missing or bad n_expert");
    if (!j.contains("counts") || !j["counts"].is_array() || j["counts"].empty()) bad("missing or empty counts");
    RoutingProfile p;
    p.n_expert = static_cast<int>(j["n_expert"].get<int64_t>());
    p.n_layer = static_cast<int>(j["counts"].size());
    for (const auto& row : j["counts"]) {
        if (!row.is_array() || static_cast<int64_t>(row.size()) != p.n_expert) bad("a counts row is not n_expert long");
        for (const auto& c : row) {
            if (!c.is_number_integer() || c.get<int64_t>() < 0) bad("a count is not a non-negative integer");
            p.counts.push_back(c.get<int64_t>());
        }
    }
    return p;
}

}  // namespace moe
