#include "moe/reference.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace moe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double rel_gap(double a, double b) {
    if (std::isinf(a) || std::isinf(b)) return kInf;
    return std::fabs(a - b) / std::max({std::fabs(a), std::fabs(b), 1e-3});
}

// Index of the largest v[i] among !taken[i]; ties -> lower index; -1 if none.
int argmax_free(const std::vector<double>& v, const std::vector<char>& taken) {
    int best = -1;
    for (int i = 0; i < static_cast<int>(v.size()); ++i)
        if (!taken[static_cast<size_t>(i)] && (best < 0 || v[static_cast<size_t>(i)] > v[static_cast<size_t>(best)])) best = i;
    return best;
}

double mat_row_dot(const TensorView& t, int64_t expert, int64_t row, const double* x, int64_t K) {
    const float* w = reinterpret_cast<const float*>(static_cast<const char*>(t.data) + expert * t.nb[2] + row * t.nb[1]);
    double s = 0;
    for (int64_t i = 0; i < K; ++i) s += static_cast<double>(w[i]) * x[i];
    return s;
}

double act(const MoeSpec& s, double g, double u) {
    if (s.act == Activation::SwiGLU) return g / (1.0 + std::exp(-g)) * u;
    const double L = s.clamp_limit;
    g = std::min(g, L);
    u = std::min(std::max(u, -L), L);
    return (u + 1.0) * g / (1.0 + std::exp(-static_cast<double>(s.glu_alpha) * g));
}

// out[D] = down(act(gate x) * up x) for expert e of the given stack.
// Biases gb/ub [E, F], db [E, D] (gpt-oss) or null.
void ffn(const MoeSpec& s, const TensorView& gate, const TensorView& up, const TensorView& down, int64_t e,
         int64_t F, const double* x, std::vector<double>& out, const float* gb = nullptr, const float* ub = nullptr,
         const float* db = nullptr) {
    const int64_t D = s.n_embd;
    std::vector<double> h(static_cast<size_t>(F));
    for (int64_t f = 0; f < F; ++f)
        h[static_cast<size_t>(f)] = act(s, mat_row_dot(gate, e, f, x, D) + (gb ? gb[e * F + f] : 0.0),
                                         mat_row_dot(up, e, f, x, D) + (ub ? ub[e * F + f] : 0.0));
    out.assign(static_cast<size_t>(D), 0.0);
    for (int64_t d = 0; d < D; ++d) out[static_cast<size_t>(d)] = mat_row_dot(down, e, d, h.data(), F) + (db ? db[e * D + d] : 0.0);
}

}  // namespace

RefOutput moe_reference(const MoeSpec& s, const MoeWeights& w, const float* x, int64_t T) {
    const int64_t D = s.n_embd;
    const int E = s.n_expert, k = s.top_k;
    RefOutput r;
    r.y.assign(static_cast<size_t>(T * D), 0.0);
    r.ids.assign(static_cast<size_t>(T * k), -1);
    r.weights.assign(static_cast<size_t>(T * k), 0.0);
    r.margin.assign(static_cast<size_t>(T), kInf);
    const float* bias_r = s.has_router_bias ? w.router_bias.as<const float>() : nullptr;
    const float* bias_s = s.has_selection_bias ? w.selection_bias.as<const float>() : nullptr;

    std::vector<double> xt(static_cast<size_t>(D)), logit(static_cast<size_t>(E)), score(static_cast<size_t>(E)),
        sel(static_cast<size_t>(E)), out;
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t d = 0; d < D; ++d) xt[static_cast<size_t>(d)] = x[t * D + d];
        for (int e = 0; e < E; ++e) {
            logit[static_cast<size_t>(e)] = mat_row_dot(w.router, 0, e, xt.data(), D) + (bias_r ? bias_r[e] : 0.0);
        }
        // gating scores
        if (s.gating == Gating::Softmax) {
            double m = -kInf, z = 0;
            for (double l : logit) m = std::max(m, l);
            for (int e = 0; e < E; ++e) z += std::exp(logit[static_cast<size_t>(e)] - m);
            for (int e = 0; e < E; ++e) score[static_cast<size_t>(e)] = std::exp(logit[static_cast<size_t>(e)] - m) / z;
        } else if (s.gating == Gating::Sigmoid) {
            for (int e = 0; e < E; ++e) score[static_cast<size_t>(e)] = 1.0 / (1.0 + std::exp(-logit[static_cast<size_t>(e)]));
        } else {
            score = logit;
        }
        for (int e = 0; e < E; ++e) sel[static_cast<size_t>(e)] = score[static_cast<size_t>(e)] + (bias_s ? bias_s[e] : 0.0);
        double margin = kInf;
        // Gaps are measured on log-probabilities for plain softmax selection (= logit gaps, which is
        // where f32 rounding happens), else on the selection scores themselves.
        const bool log_space = s.gating == Gating::Softmax && !bias_s;
        auto gap = [&](double a, double b) {
            if (log_space && a > 0 && b > 0) return rel_gap(std::log(a), std::log(b));
            return rel_gap(a, b);
        };
        // group limit
        if (s.n_group > 1) {
            const int G = s.n_group, per = E / G;
            std::vector<double> gs(static_cast<size_t>(G));
            for (int g = 0; g < G; ++g) {
                std::vector<double> v(sel.begin() + g * per, sel.begin() + (g + 1) * per);
                std::vector<char> tk(static_cast<size_t>(per), 0);
                const int a = argmax_free(v, tk);
                MOE_ASSERT(a >= 0, "empty expert group");  // validate() guarantees >= 2 per group
                double val = v[static_cast<size_t>(a)];
                if (s.group_score == GroupScore::Top2Sum) {
                    tk[static_cast<size_t>(a)] = 1;
                    val += v[static_cast<size_t>(argmax_free(v, tk))];
                }
                gs[static_cast<size_t>(g)] = val;
            }
            std::vector<char> kept(static_cast<size_t>(G), 0);
            for (int i = 0; i < s.topk_group; ++i) kept[static_cast<size_t>(argmax_free(gs, kept))] = 1;
            // boundary: worst kept group vs best dropped group
            double worst_kept = kInf, best_drop = -kInf;
            for (int g = 0; g < G; ++g) {
                if (kept[static_cast<size_t>(g)]) worst_kept = std::min(worst_kept, gs[static_cast<size_t>(g)]);
                else best_drop = std::max(best_drop, gs[static_cast<size_t>(g)]);
            }
            if (best_drop > -kInf) margin = std::min(margin, gap(worst_kept, best_drop));
            for (int g = 0; g < G; ++g)
                if (!kept[static_cast<size_t>(g)])
                    for (int i = 0; i < per; ++i) sel[static_cast<size_t>(g * per + i)] = -kInf;  // official DeepSeek masking
        }
        // top-k by repeated argmax
        std::vector<char> taken(static_cast<size_t>(E), 0);
        int* ids = &r.ids[static_cast<size_t>(t * k)];
        for (int j = 0; j < k; ++j) {
            ids[j] = argmax_free(sel, taken);
            taken[static_cast<size_t>(ids[j])] = 1;
        }
        const int next = argmax_free(sel, taken);
        if (next >= 0) margin = std::min(margin, gap(sel[static_cast<size_t>(ids[k - 1])], sel[static_cast<size_t>(next)]));
        r.margin[static_cast<size_t>(t)] = margin;
        // weights
        double* wt = &r.weights[static_cast<size_t>(t * k)];
        if (s.gating == Gating::SoftmaxSelected) {
            double m = -kInf, z = 0;
            for (int j = 0; j < k; ++j) m = std::max(m, logit[static_cast<size_t>(ids[j])]);
            for (int j = 0; j < k; ++j) z += std::exp(logit[static_cast<size_t>(ids[j])] - m);
            for (int j = 0; j < k; ++j) wt[j] = std::exp(logit[static_cast<size_t>(ids[j])] - m) / z;
        } else {
            for (int j = 0; j < k; ++j) wt[j] = score[static_cast<size_t>(ids[j])];
        }
        if (s.norm_topk) {
            double z = 0;
            for (int j = 0; j < k; ++j) z += wt[j];
            for (int j = 0; j < k; ++j) wt[j] /= z + s.norm_eps;
        }
        for (int j = 0; j < k; ++j) wt[j] *= s.scale;
        // experts + combine
        double* yt = &r.y[static_cast<size_t>(t * D)];
        for (int j = 0; j < k; ++j) {
            const bool eb = s.has_expert_bias;
            ffn(s, w.gate_exps, w.up_exps, w.down_exps, ids[j], s.n_ff, xt.data(), out,
                eb ? w.gate_exps_b.as<const float>() : nullptr, eb ? w.up_exps_b.as<const float>() : nullptr,
                eb ? w.down_exps_b.as<const float>() : nullptr);
            for (int64_t d = 0; d < D; ++d) yt[d] += wt[j] * out[static_cast<size_t>(d)];
        }
        if (s.n_shared > 0) {
            double g = 1.0;
            if (s.shared_gate_sigmoid) g = 1.0 / (1.0 + std::exp(-mat_row_dot(w.gate_inp_shexp, 0, 0, xt.data(), D)));
            ffn(s, w.gate_shexp, w.up_shexp, w.down_shexp, 0, s.n_ff_shared, xt.data(), out);
            for (int64_t d = 0; d < D; ++d) yt[d] += g * out[static_cast<size_t>(d)];
        }
    }
    return r;
}

}  // namespace moe
