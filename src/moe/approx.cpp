#include "moe/approx.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace moe {

void MoeApprox::validate() const {
    if (!(temperature > 0.0f) || !std::isfinite(temperature))
        throw_error("moe", "approx: temperature = ", temperature, " must be > 0 (1 = off)");
    if (!(dynamic_topk_threshold >= 0.0f && dynamic_topk_threshold <= 1.0f))
        throw_error("moe", "approx: dynamic top-k threshold = ", dynamic_topk_threshold, " must be in [0, 1] (0 = off)");
    if (!(prune_threshold >= 0.0f && prune_threshold < 1.0f))
        throw_error("moe", "approx: prune threshold = ", prune_threshold, " must be in [0, 1) (0 = off)");
    if (!(capacity_factor >= 0.0f) || !std::isfinite(capacity_factor))
        throw_error("moe", "approx: capacity factor = ", capacity_factor, " must be >= 0 (0 = off)");
}

std::string MoeApprox::describe() const {
    if (!any()) return "exact";
    std::ostringstream os;
    const char* sep = "";
    if (temperature != 1.0f) { os << sep << "temperature=" << temperature; sep = " "; }
    if (dynamic_topk_threshold > 0.0f) { os << sep << "dynamic_topk=" << dynamic_topk_threshold; sep = " "; }
    if (prune_threshold > 0.0f) { os << sep << "prune=" << prune_threshold; sep = " "; }
    if (capacity_factor > 0.0f) { os << sep << "capacity=" << capacity_factor; }
    return os.str();
}

void ApproxReport::add(const ApproxReport& o) {
    tokens += o.tokens;
    temperature_changed += o.temperature_changed;
    dynamic_topk_changed += o.dynamic_topk_changed;
    prune_changed += o.prune_changed;
    capacity_changed += o.capacity_changed;
    slots_dropped += o.slots_dropped;
    slots_rerouted += o.slots_rerouted;
}

int valid_slots(const Routing& r, int64_t t) {
    int n = 0;
    while (n < r.k && r.ids[t * r.k + n] >= 0) ++n;
    return n;
}

namespace {
float sum_of(const float* w, int n) {
    float s = 0.0f;
    for (int j = 0; j < n; ++j) s += w[j];
    return s;
}
void rescale_to(float* w, int n, float target) {
    const float s = sum_of(w, n);
    if (s > 0.0f)
        for (int j = 0; j < n; ++j) w[j] *= target / s;
}
}  // namespace

void apply_dynamic_topk(float threshold, Routing& r, ApproxReport& rep) {
    for (int64_t t = 0; t < r.n_tokens; ++t) {
        int32_t* ids = r.ids + t * r.k;
        float* w = r.weights + t * r.k;
        const int n = valid_slots(r, t);
        const float total = sum_of(w, n);
        if (!(total > 0.0f)) continue;
        int m = 0;
        float cum = 0.0f;
        while (m < n) {
            cum += w[m] / total;
            ++m;
            if (cum >= threshold) break;
        }
        if (m == n) continue;
        for (int j = m; j < n; ++j) {
            ids[j] = -1;
            w[j] = 0.0f;
        }
        rescale_to(w, m, total);
        ++rep.dynamic_topk_changed;
        rep.slots_dropped += n - m;
    }
}

void apply_pruning(float threshold, Routing& r, ApproxReport& rep) {
    for (int64_t t = 0; t < r.n_tokens; ++t) {
        int32_t* ids = r.ids + t * r.k;
        float* w = r.weights + t * r.k;
        const int n = valid_slots(r, t);
        const float total = sum_of(w, n);
        if (!(total > 0.0f)) continue;
        int m = 1;  // the top-1 slot always stays
        for (int j = 1; j < n; ++j) {
            if (w[j] / total < threshold) continue;
            ids[m] = ids[j];
            w[m] = w[j];
            ++m;
        }
        if (m == n) continue;
        for (int j = m; j < n; ++j) {
            ids[j] = -1;
            w[j] = 0.0f;
        }
        rescale_to(w, m, total);
        ++rep.prune_changed;
        rep.slots_dropped += n - m;
    }
}

void apply_capacity(const MoeSpec& spec, float factor, bool rescale, Routing& r, int64_t* load, float* totals,
                    uint8_t* moved, ApproxReport& rep) {
    const int E = r.n_expert, k = r.k;
    const int64_t T = r.n_tokens;
    int64_t rows = 0;
    for (int64_t i = 0; i < T * k; ++i) rows += r.ids[i] >= 0;
    int64_t cap = static_cast<int64_t>(std::ceil(static_cast<double>(factor) * static_cast<double>(T * k) / E));
    cap = std::max<int64_t>(cap, (rows + E - 1) / E);
    std::fill(load, load + E, 0);
    for (int64_t t = 0; t < T; ++t) {
        totals[t] = sum_of(r.weights + t * k, valid_slots(r, t));
        moved[t] = 0;
    }
    for (int s = 0; s < k; ++s)
        for (int64_t t = 0; t < T; ++t) {
            int32_t* ids = r.ids + t * k;
            const int32_t e = ids[s];
            if (e < 0) continue;
            if (load[e] < cap) {
                ++load[e];
                continue;
            }
            // Next-best expert with room that the token does not already use.
            const float* sel = r.select + t * E;
            int best = -1;
            for (int c = 0; c < E; ++c) {
                if (load[c] >= cap) continue;
                bool used = false;
                for (int j = 0; j < k && !used; ++j) used = ids[j] == c;
                if (used) continue;
                if (best < 0 || sel[c] > sel[best]) best = c;  // strict: ties keep the lower index
            }
            MOE_ASSERT(best >= 0, "capacity: no expert with room (cap ", cap, ", rows ", rows, ")");
            ids[s] = best;
            ++load[best];
            ++rep.slots_rerouted;
            moved[t] = 1;
        }
    for (int64_t t = 0; t < T; ++t) {
        if (!moved[t]) continue;
        const int n = valid_slots(r, t);
        float* w = r.weights + t * k;
        routing_weights(spec, r.scores + t * E, r.ids + t * k, n, w);
        if (rescale) rescale_to(w, n, totals[t]);
        ++rep.capacity_changed;
    }
}

}  // namespace moe
