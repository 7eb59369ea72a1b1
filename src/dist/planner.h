#pragma once
// Expert placement planners (`moe place`, docs/EP.md). Input: per-layer expert loads (token
// counts) and, optionally, the per-token expert sets of a routing trace (for co-activation).
// Every planner puts S = (E + K) / R expert slots on each rank (K = extra replica slots per layer).
//
//  - contiguous: expert e on rank e * R / E, no replicas (the default of --ep).
//  - eplb: replicate the heaviest experts (each extra slot goes to the expert with the largest
//    load per replica), then balanced packing: replicas to nodes, then to the ranks of each node,
//    heaviest first onto the lightest bin with room (no two replicas of an expert on one rank),
//    then pairwise swaps that lower the heaviest rank until none helps.
//  - coact: the same replication; experts are assigned to nodes heaviest first, each to the node
//    whose experts it is most often chosen together with (trace co-occurrence), within a node load
//    cap of 1.1 x mean, all replicas of an expert on its node; then balanced packing inside nodes.
#include <cstdint>
#include <string>
#include <vector>

#include "dist/placement.h"

namespace moe::dist {

struct LoadInput {
    int n_layers = 0, n_experts = 0;
    std::vector<std::vector<double>> counts;                // [layer][expert] tokens
    std::vector<std::vector<std::vector<int32_t>>> tokens;  // [layer][token] expert set (trace); may be empty
};

// domain -> "layerN" -> [E] counts (tests/data/routing_stats layout); domains are summed.
LoadInput read_counts_json(const std::string& path);
// TSV of `moe run --routing-trace`: layer, token, experts (comma list), weights.
LoadInput read_trace_tsv(const std::string& path, int n_experts_hint = 0);
// The same readers on text already in memory (`name` labels the errors; fuzz/targets/routing_trace).
// Both refuse n_layers x n_experts above kMaxLoadCells before allocating the count table.
LoadInput parse_counts_json(const std::string& text, const std::string& name);
LoadInput parse_trace_tsv(const std::string& text, const std::string& name, int n_experts_hint = 0);
// 4M (layer, expert) cells: 250x DeepSeek-V3's 61 x 256; a claim above it is an error, not 32 MB+.
inline constexpr int64_t kMaxLoadCells = int64_t(1) << 22;
// Tokens [begin, end) of every layer (fraction of each layer's tokens), counts recomputed.
LoadInput slice_tokens(const LoadInput& in, double begin, double end);

struct PlanSpec {
    int ranks = 1;
    int nodes = 1;     // ranks are split evenly: rank r on node r * nodes / ranks
    int replicas = 0;  // K extra slots per layer; (E + K) % ranks must be 0, K <= E * (ranks - 1)
};

Placement plan_contiguous(const LoadInput& in, const PlanSpec& s);
Placement plan_eplb(const LoadInput& in, const PlanSpec& s);
Placement plan_coact(const LoadInput& in, const PlanSpec& s);

struct PlacementScore {
    double max_over_mean = 0;     // max rank load / mean rank load, averaged over layers with load
    double cross_node_copies = 0; // per token and layer: distinct nodes its experts live on, times
                                  // (N - 1) / N (its home node is uniform over the nodes)
};
// Rank loads use each replica's share of its expert's counts; copies need in.tokens (else 0).
PlacementScore score(const Placement& p, const LoadInput& in, int nodes);
// Max / mean rank load of one layer from explicit per-rank loads.
double max_over_mean(const std::vector<double>& rank_load);

}  // namespace moe::dist
