// Server metrics (metrics.h): Prometheus text and the dashboard's JSON.
#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

#include "core/timer.h"

namespace moe::server {

namespace {
double now_s() { return static_cast<double>(Timer::now_ns()) * 1e-9; }
std::string num(double v) {
    char b[48];
    std::snprintf(b, sizeof b, "%.9g", v);
    return b;
}
// max/mean of one layer's counts (1 when balanced, 0 when nothing was routed).
double imbalance(const std::vector<uint64_t>& c) {
    if (c.empty()) return 0;
    uint64_t sum = 0, mx = 0;
    for (uint64_t v : c) sum += v, mx = std::max(mx, v);
    return sum == 0 ? 0 : static_cast<double>(mx) * static_cast<double>(c.size()) / static_cast<double>(sum);
}
double hit_rate(int64_t hits, int64_t misses) {
    return hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0;
}
}  // namespace

void Histogram::observe(double v) {
    size_t i = 0;
    while (i < bounds.size() && v > bounds[i]) ++i;
    ++counts[i];
    sum += v;
    ++n;
}

double Histogram::quantile(double q) const {
    if (n == 0) return 0;
    const double want = q * static_cast<double>(n);
    uint64_t c = 0;
    for (size_t i = 0; i < bounds.size(); ++i) {
        c += counts[i];
        if (static_cast<double>(c) >= want) return bounds[i];
    }
    return bounds.empty() ? 0 : bounds.back();
}

Metrics::Metrics()
    : start_s_(now_s()),
      ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56}) {}

void Metrics::request_started(const std::string& ep) {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [k, v] : requests_)
        if (k == ep) return void(++v);
    requests_.push_back({ep, 1});
}
void Metrics::request_finished(const std::string& ep, int status) {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [k, v] : responses_)
        if (k.first == ep && k.second == status) return void(++v);
    responses_.push_back({{ep, status}, 1});
}
void Metrics::rejected_busy() {
    std::lock_guard<std::mutex> l(mu_);
    ++rejected_;
}
void Metrics::tokens(int64_t p, int64_t g) {
    std::lock_guard<std::mutex> l(mu_);
    prompt_tokens_ += static_cast<uint64_t>(p);
    gen_tokens_ += static_cast<uint64_t>(g);
}
void Metrics::prefix_reused(int64_t t) {
    std::lock_guard<std::mutex> l(mu_);
    reused_ += static_cast<uint64_t>(t);
}
void Metrics::ttft(double s) {
    std::lock_guard<std::mutex> l(mu_);
    ttft_.observe(s);
}
void Metrics::itl(double s) {
    std::lock_guard<std::mutex> l(mu_);
    itl_.observe(s);
}
void Metrics::step(int64_t rows, double s) {
    std::lock_guard<std::mutex> l(mu_);
    ++steps_;
    step_rows_ += static_cast<uint64_t>(rows);
    step_s_ += s;
}
void Metrics::topk_change() {
    std::lock_guard<std::mutex> l(mu_);
    ++topk_changes_;
}
void Metrics::set_gauges(const SchedulerGauges& g) {
    std::lock_guard<std::mutex> l(mu_);
    g_ = g;
}
void Metrics::set_expert_load(const std::vector<std::vector<uint64_t>>& c) {
    std::lock_guard<std::mutex> l(mu_);
    load_ = c;
}
void Metrics::set_expert_cache(const ExpertCacheGauges& c) {
    std::lock_guard<std::mutex> l(mu_);
    cache_on_ = true;
    cache_ = c;
}

std::string Metrics::prometheus() const {
    std::lock_guard<std::mutex> l(mu_);
    std::string o;
    auto head = [&](const char* name, const char* type, const char* help) {
        o += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    };
    auto line = [&](const std::string& name, double v) { o += name + " " + num(v) + "\n"; };
    head("moe_requests_total", "counter", "HTTP requests received, by endpoint");
    for (const auto& [ep, v] : requests_) line("moe_requests_total{endpoint=\"" + ep + "\"}", static_cast<double>(v));
    head("moe_responses_total", "counter", "HTTP responses sent, by endpoint and status");
    for (const auto& [k, v] : responses_)
        line("moe_responses_total{endpoint=\"" + k.first + "\",status=\"" + std::to_string(k.second) + "\"}",
             static_cast<double>(v));
    head("moe_rejected_total", "counter", "requests refused with 503 (queue full or shutting down)");
    line("moe_rejected_total", static_cast<double>(rejected_));
    head("moe_prompt_tokens_total", "counter", "prompt tokens received");
    line("moe_prompt_tokens_total", static_cast<double>(prompt_tokens_));
    head("moe_generated_tokens_total", "counter", "tokens generated");
    line("moe_generated_tokens_total", static_cast<double>(gen_tokens_));
    head("moe_prefix_reused_tokens_total", "counter", "prompt tokens served from a slot's cached prefix");
    line("moe_prefix_reused_tokens_total", static_cast<double>(reused_));
    head("moe_steps_total", "counter", "scheduler steps (one forward each)");
    line("moe_steps_total", static_cast<double>(steps_));
    head("moe_step_rows_total", "counter", "rows (tokens) over all scheduler steps");
    line("moe_step_rows_total", static_cast<double>(step_rows_));
    head("moe_step_seconds_total", "counter", "time spent in forward passes");
    line("moe_step_seconds_total", step_s_);
    auto hist = [&](const char* name, const char* help, const Histogram& h) {
        head(name, "histogram", help);
        uint64_t c = 0;
        for (size_t i = 0; i < h.bounds.size(); ++i) {
            c += h.counts[i];
            line(std::string(name) + "_bucket{le=\"" + num(h.bounds[i]) + "\"}", static_cast<double>(c));
        }
        line(std::string(name) + "_bucket{le=\"+Inf\"}", static_cast<double>(h.n));
        line(std::string(name) + "_sum", h.sum);
        line(std::string(name) + "_count", static_cast<double>(h.n));
    };
    hist("moe_time_to_first_token_seconds", "time from request arrival to its first generated token", ttft_);
    hist("moe_inter_token_latency_seconds", "time between consecutive tokens of one request", itl_);
    head("moe_queue_depth", "gauge", "requests waiting for a slot");
    line("moe_queue_depth", static_cast<double>(g_.queue_depth));
    head("moe_busy_slots", "gauge", "slots running a request");
    line("moe_busy_slots", static_cast<double>(g_.busy_slots));
    head("moe_slots", "gauge", "slots (--parallel)");
    line("moe_slots", static_cast<double>(g_.n_slots));
    head("moe_kv_used_ratio", "gauge", "KV cache rows in use / capacity (all slots)");
    line("moe_kv_used_ratio", g_.kv_capacity ? static_cast<double>(g_.kv_used) / static_cast<double>(g_.kv_capacity) : 0);
    head("moe_kv_used_tokens", "gauge", "KV cache rows in use (all slots)");
    line("moe_kv_used_tokens", static_cast<double>(g_.kv_used));
    head("moe_topk_current", "gauge", "experts per token the router uses now");
    line("moe_topk_current", g_.current_k);
    head("moe_topk_changes_total", "counter", "changes of k by --adaptive-topk");
    line("moe_topk_changes_total", static_cast<double>(topk_changes_));
    head("moe_expert_tokens_total", "counter", "tokens routed to each expert, by layer");
    for (size_t il = 0; il < load_.size(); ++il)
        for (size_t e = 0; e < load_[il].size(); ++e)
            line("moe_expert_tokens_total{layer=\"" + std::to_string(il) + "\",expert=\"" + std::to_string(e) + "\"}",
                 static_cast<double>(load_[il][e]));
    head("moe_expert_imbalance", "gauge", "max/mean tokens per expert of a layer since start (1 = balanced)");
    for (size_t il = 0; il < load_.size(); ++il)
        if (!load_[il].empty()) line("moe_expert_imbalance{layer=\"" + std::to_string(il) + "\"}", imbalance(load_[il]));
    if (cache_on_) {
        const ExpertCacheGauges& c = cache_;
        head("moe_expert_cache_slots", "gauge", "experts the --mem cache holds at once");
        line("moe_expert_cache_slots", c.slots);
        head("moe_expert_cache_hits_total", "counter", "expert acquisitions served from the cache (prefetched ones included)");
        line("moe_expert_cache_hits_total", static_cast<double>(c.hits));
        head("moe_expert_cache_misses_total", "counter", "expert acquisitions that waited for a read from the file");
        line("moe_expert_cache_misses_total", static_cast<double>(c.misses));
        head("moe_expert_cache_hit_rate", "gauge", "hits / (hits + misses) since start, all layers and by layer");
        line("moe_expert_cache_hit_rate", hit_rate(c.hits, c.misses));
        for (size_t il = 0; il < c.layers.size(); ++il)
            if (c.layers[il].first + c.layers[il].second > 0)
                line("moe_expert_cache_hit_rate{layer=\"" + std::to_string(il) + "\"}",
                     hit_rate(c.layers[il].first, c.layers[il].second));
        head("moe_expert_cache_evictions_total", "counter", "experts evicted to make room");
        line("moe_expert_cache_evictions_total", static_cast<double>(c.evictions));
        head("moe_expert_cache_read_bytes_total", "counter", "bytes read from the model file into the cache");
        line("moe_expert_cache_read_bytes_total", static_cast<double>(c.bytes_read));
        head("moe_expert_cache_stall_seconds_total", "counter", "time the forward pass waited for expert reads");
        line("moe_expert_cache_stall_seconds_total", c.stall_s);
        head("moe_expert_cache_prefetch_issued_total", "counter", "expert loads started by router-lookahead prefetch");
        line("moe_expert_cache_prefetch_issued_total", static_cast<double>(c.prefetch_issued));
        head("moe_expert_cache_prefetch_used_total", "counter", "prefetched experts acquired before eviction");
        line("moe_expert_cache_prefetch_used_total", static_cast<double>(c.prefetch_used));
    }
    return o;
}

nlohmann::json Metrics::snapshot() const {
    std::lock_guard<std::mutex> l(mu_);
    nlohmann::json j;
    j["uptime_s"] = now_s() - start_s_;
    j["prompt_tokens"] = prompt_tokens_;
    j["generated_tokens"] = gen_tokens_;
    j["rejected"] = rejected_;
    j["queue_depth"] = g_.queue_depth;
    j["busy_slots"] = g_.busy_slots;
    j["slots"] = g_.n_slots;
    j["kv_used"] = g_.kv_used;
    j["kv_capacity"] = g_.kv_capacity;
    j["current_k"] = g_.current_k;
    j["full_k"] = g_.full_k;
    j["ttft_p50"] = ttft_.quantile(0.5);
    j["ttft_p99"] = ttft_.quantile(0.99);
    j["itl_p50"] = itl_.quantile(0.5);
    j["itl_p99"] = itl_.quantile(0.99);
    j["expert_load"] = load_;
    std::vector<double> imb;
    for (const auto& c : load_) imb.push_back(imbalance(c));
    j["imbalance"] = imb;
    j["expert_cache"] = nullptr;
    if (cache_on_)
        j["expert_cache"] = {{"slots", cache_.slots},
                             {"hits", cache_.hits},
                             {"misses", cache_.misses},
                             {"hit_rate", hit_rate(cache_.hits, cache_.misses)},
                             {"bytes_read", cache_.bytes_read},
                             {"stall_s", cache_.stall_s}};
    return j;
}

}  // namespace moe::server
