// `moe cache-sim`: replays a routing trace against expert caches of given capacities and policies
// and prints each policy's hit rate next to Belady's offline optimum (moe/cache_sim.h).
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "moe/cache_sim.h"
#include "tools/lib/commands.h"
#include "tools/lib/infer_args.h"

namespace moe::tools {
namespace {

void cache_sim_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe cache-sim --trace FILE [--capacity LIST] [--policy LIST] [--profile FILE] [-o md|json]\n"
                 "  Replays a routing trace (moe run --routing-trace TSV) against an expert cache and prints\n"
                 "  each policy's hit rate next to Belady's optimum (offline, farthest next use).\n"
                 "  --capacity LIST  slots, comma-separated; N%% = share of the trace's layers x experts\n"
                 "                   (default 25%%,50%%,75%%)\n"
                 "  --policy LIST    online policies (default lru,lfu,lfu-history,pinned; known: %s)\n"
                 "  --profile FILE   routing profile for pinned (default: the trace itself, i.e. an oracle\n"
                 "                   of the whole run's frequencies)\n"
                 "  -o md|json       output format (default md)\n",
                 kCachePolicies);
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string x;
    while (std::getline(ss, x, ','))
        if (!x.empty()) out.push_back(x);
    return out;
}

}  // namespace

int cmd_cache_sim(int argc, char** argv) {
    const char* cmd = "cache-sim";
    std::string trace_path, caps = "25%,50%,75%", pols = "lru,lfu,lfu-history,pinned", profile_path, fmt = "md";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            cache_sim_usage(stdout);
            return 0;
        } else if (a == "--trace") {
            trace_path = arg_value(argc, argv, i, cmd);
        } else if (a == "--capacity") {
            caps = arg_value(argc, argv, i, cmd);
        } else if (a == "--policy") {
            pols = arg_value(argc, argv, i, cmd);
        } else if (a == "--profile") {
            profile_path = arg_value(argc, argv, i, cmd);
        } else if (a == "-o") {
            fmt = arg_value(argc, argv, i, cmd);
            if (fmt != "md" && fmt != "json") throw_error(cmd, "-o '", fmt, "' is not one of md, json");
        } else {
            std::fprintf(stderr, "moe cache-sim: unknown option '%s'\n", a.c_str());
            cache_sim_usage(stderr);
            return 2;
        }
    }
    if (trace_path.empty()) {
        std::fprintf(stderr, "moe cache-sim: need --trace FILE\n");
        cache_sim_usage(stderr);
        return 2;
    }
    const RoutingTraceFile trace = read_routing_trace(trace_path);
    const int64_t keys = static_cast<int64_t>(trace.n_layer) * trace.n_expert;
    RoutingProfile profile = profile_path.empty() ? profile_from_trace(trace) : load_routing_profile(profile_path);
    std::vector<int> capacities;
    for (const std::string& c : split(caps)) {
        if (c.back() == '%') {
            const double pct = parse_double(c.substr(0, c.size() - 1), "--capacity", cmd);
            if (!(pct > 0 && pct <= 100)) throw_error(cmd, "--capacity '", c, "' must be a share in (0%, 100%]");
            capacities.push_back(std::max(1, static_cast<int>(static_cast<double>(keys) * pct / 100.0 + 0.5)));
        } else {
            capacities.push_back(static_cast<int>(parse_int(c, "--capacity", cmd, 1, 1 << 30)));
        }
    }
    const std::vector<std::string> policies = split(pols);
    if (capacities.empty() || policies.empty()) throw_error(cmd, "--capacity and --policy need at least one entry");
    for (const auto& p : policies) make_cache_policy(p, profile);  // unknown names fail before any work

    int64_t accesses = 0;
    for (const auto& r : trace.records) accesses += static_cast<int64_t>(r.experts.size());
    if (fmt == "md") {
        std::printf("trace %s: %zu records, %d layers x %d experts = %lld keys, %lld accesses\n\n", trace_path.c_str(),
                    trace.records.size(), trace.n_layer, trace.n_expert, static_cast<long long>(keys),
                    static_cast<long long>(accesses));
        std::printf("| capacity | share |");
        for (const auto& p : policies) std::printf(" %s |", p.c_str());
        std::printf(" belady | best online / belady |\n| ---: | ---: |");
        for (size_t i = 0; i < policies.size(); ++i) std::printf(" ---: |");
        std::printf(" ---: | ---: |\n");
    } else {
        std::printf("{\"trace\": \"%s\", \"records\": %zu, \"keys\": %lld, \"accesses\": %lld, \"rows\": [", trace_path.c_str(),
                    trace.records.size(), static_cast<long long>(keys), static_cast<long long>(accesses));
    }
    for (size_t ci = 0; ci < capacities.size(); ++ci) {
        const int cap = capacities[ci];
        const CacheSimResult opt = simulate_cache(trace, cap, "belady");
        double best = 0;
        std::vector<double> rates;
        for (const auto& p : policies) {
            rates.push_back(simulate_cache(trace, cap, p, profile).hit_rate());
            best = std::max(best, rates.back());
        }
        const double ratio = opt.hit_rate() > 0 ? best / opt.hit_rate() : 1.0;
        if (fmt == "md") {
            std::printf("| %d | %.1f%% |", cap, 100.0 * cap / static_cast<double>(keys));
            for (double r : rates) std::printf(" %.2f%% |", 100.0 * r);
            std::printf(" %.2f%% | %.3f |\n", 100.0 * opt.hit_rate(), ratio);
        } else {
            std::printf("%s{\"capacity\": %d, \"hit_rate\": {", ci ? ", " : "", cap);
            for (size_t i = 0; i < policies.size(); ++i)
                std::printf("%s\"%s\": %.6f", i ? ", " : "", policies[i].c_str(), rates[i]);
            std::printf(", \"belady\": %.6f}, \"best_online_over_belady\": %.6f}", opt.hit_rate(), ratio);
        }
    }
    if (fmt == "json") std::printf("]}\n");
    return 0;
}

}  // namespace moe::tools
