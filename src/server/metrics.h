#pragma once
// Server metrics: counters, latency histograms and the MoE expert-load view, rendered as the
// Prometheus text format (GET /metrics) and as JSON for the dashboard (GET /stats). Thread-safe:
// HTTP threads and the scheduler update it, one mutex (updates are a few per token).
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moe::server {

// Cumulative histogram with fixed upper bounds (seconds).
struct Histogram {
    std::vector<double> bounds;
    std::vector<uint64_t> counts;  // per bound (non-cumulative; rendered cumulatively) + one for +Inf
    double sum = 0;
    uint64_t n = 0;
    explicit Histogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
    void observe(double v);
    double quantile(double q) const;  // upper bound of the bucket holding quantile q (0 if empty)
};

struct SchedulerGauges {
    int64_t queue_depth = 0, busy_slots = 0, n_slots = 0;
    int64_t kv_used = 0, kv_capacity = 0;  // cache rows in use / total
    int current_k = 0, full_k = 0;
};

// The expert cache of --mem (moe/expert_cache.h), as counted since the server started.
struct ExpertCacheGauges {
    int slots = 0;
    int64_t hits = 0, misses = 0, evictions = 0, prefetch_issued = 0, prefetch_used = 0;
    uint64_t bytes_read = 0;
    double stall_s = 0;
    std::vector<std::pair<int64_t, int64_t>> layers;  // [n_layer] (hits, misses); dense layers 0
};

class Metrics {
public:
    Metrics();
    void request_started(const std::string& endpoint);
    void request_finished(const std::string& endpoint, int status);
    void rejected_busy();  // 503 because the queue was full or the server is draining
    void tokens(int64_t prompt, int64_t generated);
    void prefix_reused(int64_t tokens);
    void ttft(double s);
    void itl(double s);
    void step(int64_t rows, double seconds);
    void topk_change();
    void set_gauges(const SchedulerGauges& g);
    // Expert assignments per (layer, expert) since start; layers without experts have 0 columns.
    void set_expert_load(const std::vector<std::vector<uint64_t>>& counts);
    // Only with --mem: the series moe_expert_cache_* appear once this was called.
    void set_expert_cache(const ExpertCacheGauges& c);

    std::string prometheus() const;
    nlohmann::json snapshot() const;  // for the dashboard

private:
    mutable std::mutex mu_;
    double start_s_;
    std::vector<std::pair<std::string, uint64_t>> requests_;            // endpoint -> count
    std::vector<std::pair<std::pair<std::string, int>, uint64_t>> responses_;  // (endpoint, status) -> count
    uint64_t rejected_ = 0, prompt_tokens_ = 0, gen_tokens_ = 0, reused_ = 0, steps_ = 0, step_rows_ = 0,
             topk_changes_ = 0;
    double step_s_ = 0;
    Histogram ttft_, itl_;
    SchedulerGauges g_;
    std::vector<std::vector<uint64_t>> load_;
    bool cache_on_ = false;
    ExpertCacheGauges cache_;
};

}  // namespace moe::server
