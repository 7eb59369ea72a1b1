#pragma once
// Observability objects passed into MoeBlock::forward (null = off; no globals):
//  StageTimes   - wall time per stage, accumulated over calls (one object per layer);
//  RoutingStats - expert load of one layer: tokens per expert, imbalance, load entropy, top-1;
//  RoutingTrace - optional per-token (layer, token, experts, weights) records, writable to a file.
#include <cstdint>
#include <string>
#include <vector>

#include "moe/router.h"

namespace moe {

struct StageTimes {
    // seconds; the shared experts run in the routed experts' run (experts) except with an expert
    // cache, EP or batches beyond the fused schedule (shared)
    double route = 0, dispatch = 0, experts = 0, combine = 0, shared = 0;
    int64_t calls = 0;
    double total() const { return route + dispatch + experts + combine + shared; }
    void add(const StageTimes& o);
};

class RoutingStats {
public:
    RoutingStats() = default;
    explicit RoutingStats(int n_expert) { reset(n_expert); }
    void reset(int n_expert);  // allocates here, never in add()
    void add(const Routing& r);

    int n_expert() const { return static_cast<int>(counts_.size()); }
    int64_t tokens() const { return tokens_; }
    int64_t assignments() const { return assignments_; }               // (token, expert) pairs
    const std::vector<int64_t>& counts() const { return counts_; }      // tokens per expert
    const std::vector<int64_t>& top1_counts() const { return top1_; }   // tokens whose slot 0 is e
    double imbalance() const;          // max count / mean count (1 = perfectly balanced)
    double load_entropy() const;       // entropy of counts / assignments, in nats
    double load_entropy_norm() const;  // load_entropy / ln(E), in [0, 1]
    double max_load_share() const;     // share of all assignments taken by the busiest expert
    double top1_weight_share() const;  // mean over tokens of w(slot 0) / sum of the token's weights
    std::string summary() const;       // one line

private:
    std::vector<int64_t> counts_, top1_;
    int64_t tokens_ = 0, assignments_ = 0;
    double top1_share_sum_ = 0;
};

class RoutingTrace {
public:
    // Appends one record per token (allocates: tracing is a debugging aid, off by default).
    void add(int layer, const Routing& r, int64_t token_base = 0);
    size_t size() const { return layer_.size(); }
    void clear();
    // TSV: "layer\ttoken\texperts\tweights" with comma-separated experts / weights (%.9g).
    void write_tsv(const std::string& path) const;
    std::string to_tsv() const;

private:
    std::vector<int32_t> layer_;
    std::vector<int64_t> token_;
    std::vector<size_t> begin_;
    std::vector<int32_t> ids_;
    std::vector<float> weights_;
};

}  // namespace moe
