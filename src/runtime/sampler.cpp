#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace moe {

namespace {
constexpr const char* kComp = "sampler";

// Sort order: larger logit first, ties -> lower id first.
bool before(const Sampler::Candidate& a, const Sampler::Candidate& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
}

// p = softmax(logit) over c (double), in place.
void softmax(std::vector<Sampler::Candidate>& c) {
    const double mx = c.front().logit;  // c is sorted
    double sum = 0;
    for (auto& x : c) sum += (x.p = std::exp(static_cast<double>(x.logit) - mx));
    for (auto& x : c) x.p /= sum;
}
}  // namespace

Sampler::Sampler(const SamplerSpec& spec) : spec_(spec), rng_(spec.seed) {
    if (std::isnan(spec.temperature)) throw_error(kComp, "temperature is NaN");
    if (!(spec.top_p > 0.0f)) throw_error(kComp, "top_p is ", spec.top_p, " (must be in (0, 1]; 1 turns it off)");
    if (!(spec.min_p >= 0.0f && spec.min_p <= 1.0f)) throw_error(kComp, "min_p is ", spec.min_p, " (must be in [0, 1])");
    if (!(spec.repeat_penalty > 0.0f) || !std::isfinite(spec.repeat_penalty))
        throw_error(kComp, "repeat penalty is ", spec.repeat_penalty, " (must be > 0; 1 turns it off)");
    if (spec.repeat_last_n < 0) throw_error(kComp, "repeat_last_n is ", spec.repeat_last_n, " (must be >= 0)");
    history_.reserve(static_cast<size_t>(spec.repeat_last_n));
}

void Sampler::accept(int32_t token) {
    if (spec_.repeat_last_n == 0) return;
    if (history_.size() == static_cast<size_t>(spec_.repeat_last_n)) history_.erase(history_.begin());
    history_.push_back(token);
}

void Sampler::reset() {
    history_.clear();
    rng_ = Rng(spec_.seed);
}

void Sampler::build(const float* logits, int64_t n_vocab) {
    if (n_vocab <= 0) throw_error(kComp, "empty vocabulary");
    cand_.clear();
    cand_.reserve(static_cast<size_t>(n_vocab));
    for (int64_t i = 0; i < n_vocab; ++i) {
        const float l = logits[i];
        if (std::isnan(l) || l == INFINITY)
            throw_error(kComp, "logit of token ", i, " is ", l, " (the model produced non-finite values)");
        cand_.push_back({static_cast<int32_t>(i), l, 0.0});
    }
    // Repetition penalty: each distinct token in the window once.
    if (spec_.repeat_penalty != 1.0f && !history_.empty()) {
        penalised_.assign(history_.begin(), history_.end());
        std::sort(penalised_.begin(), penalised_.end());
        penalised_.erase(std::unique(penalised_.begin(), penalised_.end()), penalised_.end());
        for (int32_t t : penalised_) {
            if (t < 0 || t >= n_vocab) continue;
            float& l = cand_[static_cast<size_t>(t)].logit;
            l = l > 0 ? l / spec_.repeat_penalty : l * spec_.repeat_penalty;
        }
    }
    // -inf tokens can never be drawn.
    cand_.erase(std::remove_if(cand_.begin(), cand_.end(), [](const Candidate& c) { return c.logit == -INFINITY; }),
                cand_.end());
    if (cand_.empty()) throw_error(kComp, "every logit is -inf: no token can be sampled");
}

const std::vector<Sampler::Candidate>& Sampler::distribution(const float* logits, int64_t n_vocab) {
    build(logits, n_vocab);
    if (spec_.temperature <= 0.0f) {
        const auto best = std::min_element(cand_.begin(), cand_.end(), before);
        const Candidate c{best->id, best->logit, 1.0};
        cand_.assign(1, c);
        return cand_;
    }
    // top-k (partial sort is enough), else a full sort for the cumulative filters.
    const size_t n = cand_.size();
    if (spec_.top_k > 0 && static_cast<size_t>(spec_.top_k) < n) {
        std::partial_sort(cand_.begin(), cand_.begin() + spec_.top_k, cand_.end(), before);
        cand_.resize(static_cast<size_t>(spec_.top_k));
    } else {
        std::sort(cand_.begin(), cand_.end(), before);
    }
    if (spec_.top_p < 1.0f) {
        softmax(cand_);
        double cum = 0;
        size_t keep = cand_.size();
        for (size_t i = 0; i < cand_.size(); ++i) {
            cum += cand_[i].p;
            if (cum >= spec_.top_p) {
                keep = i + 1;
                break;
            }
        }
        cand_.resize(keep);
    }
    if (spec_.min_p > 0.0f) {
        // p_i / p_max = exp(l_i - l_max), independent of the normalisation.
        const double lmax = cand_.front().logit;
        size_t keep = 1;
        while (keep < cand_.size() && std::exp(static_cast<double>(cand_[keep].logit) - lmax) >= spec_.min_p) ++keep;
        cand_.resize(keep);
    }
    for (auto& c : cand_) c.logit /= spec_.temperature;
    softmax(cand_);
    return cand_;
}

int32_t Sampler::sample(const float* logits, int64_t n_vocab) {
    const auto& d = distribution(logits, n_vocab);
    if (d.size() == 1) return d.front().id;
    const double u = rng_.uniform();  // [0, 1)
    double cum = 0;
    for (const auto& c : d) {
        cum += c.p;
        if (u < cum) return c.id;
    }
    return d.back().id;  // u within rounding of 1
}

}  // namespace moe
