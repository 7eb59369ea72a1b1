#include "moe/routing_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "moe/approx.h"

namespace moe {

void StageTimes::add(const StageTimes& o) {
    route += o.route;
    dispatch += o.dispatch;
    experts += o.experts;
    combine += o.combine;
    shared += o.shared;
    calls += o.calls;
}

void RoutingStats::reset(int n_expert) {
    counts_.assign(static_cast<size_t>(n_expert), 0);
    top1_.assign(static_cast<size_t>(n_expert), 0);
    tokens_ = assignments_ = 0;
    top1_share_sum_ = 0;
}

void RoutingStats::add(const Routing& r) {
    MOE_ASSERT(r.n_expert == n_expert(), "RoutingStats for ", n_expert(), " experts fed ", r.n_expert);
    for (int64_t t = 0; t < r.n_tokens; ++t) {
        const int n = valid_slots(r, t);
        const int32_t* ids = r.ids + t * r.k;
        const float* w = r.weights + t * r.k;
        double sum = 0;
        for (int j = 0; j < n; ++j) {
            ++counts_[static_cast<size_t>(ids[j])];
            sum += w[j];
        }
        assignments_ += n;
        if (n > 0) {
            ++top1_[static_cast<size_t>(ids[0])];
            top1_share_sum_ += sum > 0 ? w[0] / sum : 0.0;
        }
    }
    tokens_ += r.n_tokens;
}

double RoutingStats::imbalance() const {
    if (assignments_ == 0) return 0;
    const double mean = static_cast<double>(assignments_) / static_cast<double>(counts_.size());
    return static_cast<double>(*std::max_element(counts_.begin(), counts_.end())) / mean;
}

double RoutingStats::load_entropy() const {
    if (assignments_ == 0) return 0;
    double h = 0;
    for (int64_t c : counts_)
        if (c > 0) {
            const double p = static_cast<double>(c) / static_cast<double>(assignments_);
            h -= p * std::log(p);
        }
    return h;
}

double RoutingStats::load_entropy_norm() const {
    return counts_.size() > 1 ? load_entropy() / std::log(static_cast<double>(counts_.size())) : 1.0;
}

double RoutingStats::max_load_share() const {
    if (assignments_ == 0) return 0;
    return static_cast<double>(*std::max_element(counts_.begin(), counts_.end())) / static_cast<double>(assignments_);
}

double RoutingStats::top1_weight_share() const { return tokens_ ? top1_share_sum_ / static_cast<double>(tokens_) : 0; }

std::string RoutingStats::summary() const {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "tokens=%lld experts=%d imbalance=%.3f entropy=%.3f (norm %.3f) max_share=%.3f top1_weight=%.3f",
                  static_cast<long long>(tokens_), n_expert(), imbalance(), load_entropy(), load_entropy_norm(),
                  max_load_share(), top1_weight_share());
    return buf;
}

void RoutingTrace::add(int layer, const Routing& r, int64_t token_base) {
    for (int64_t t = 0; t < r.n_tokens; ++t) {
        layer_.push_back(layer);
        token_.push_back(token_base + t);
        begin_.push_back(ids_.size());
        const int n = valid_slots(r, t);
        for (int j = 0; j < n; ++j) {
            ids_.push_back(r.ids[t * r.k + j]);
            weights_.push_back(r.weights[t * r.k + j]);
        }
    }
}

void RoutingTrace::clear() {
    layer_.clear();
    token_.clear();
    begin_.clear();
    ids_.clear();
    weights_.clear();
}

std::string RoutingTrace::to_tsv() const {
    std::ostringstream os;
    os << "layer\ttoken\texperts\tweights\n";
    char buf[32];
    for (size_t i = 0; i < layer_.size(); ++i) {
        const size_t b = begin_[i], e = i + 1 < begin_.size() ? begin_[i + 1] : ids_.size();
        os << layer_[i] << '\t' << token_[i] << '\t';
        for (size_t j = b; j < e; ++j) os << (j > b ? "," : "") << ids_[j];
        os << '\t';
        for (size_t j = b; j < e; ++j) {
            std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(weights_[j]));
            os << (j > b ? "," : "") << buf;
        }
        os << '\n';
    }
    return os.str();
}

void RoutingTrace::write_tsv(const std::string& path) const {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw_error("moe", "cannot open routing trace file ", path, " for writing");
    const std::string s = to_tsv();
    const bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
    if (std::fclose(f) != 0 || !ok) throw_error("moe", "failed writing routing trace file ", path);
}

}  // namespace moe
