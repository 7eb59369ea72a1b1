// fp64 reference forward for deepseek2 (MLA), in the decompressed form: every head gets its own
// key [k_nope_h = kv_b_k_h c, k_pe] and value v_h = kv_b_v_h c (plain multi-head attention), unlike
// the engine, which attends over the latent in the absorbed form. Rules from llama.cpp
// src/models/deepseek2.cpp, llama-context.cpp (YaRN attn factor) and llama-graph.cpp
// (build_moe_ffn); DeepSeek's Gate for the group score. Only the classic attn_kv_b layout.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "format/gguf.h"
#include "model/config.h"
#include "runtime/reference_detail.h"

namespace moe::testref {

using namespace detail;

namespace {
struct MlaLayer {
    Tensor attn_norm, wq, wq_a, q_a_norm, wq_b, wkv_a, kv_a_norm, wkv_b, wo, ffn_norm;
    Tensor router, sel_bias, gate_e, up_e, down_e, gate_s, up_s, down_s;
    std::vector<Vec> K, V;  // per position: [H * dq], [H * dv]
};
}  // namespace

std::vector<double> reference_forward_deepseek2(const gguf::File& f, const std::vector<int32_t>& tokens) {
    const model::ModelConfig c = model::config_from_gguf(f);
    if (c.mla_split_kv_b) throw std::runtime_error("reference: deepseek2 with attn_k_b/attn_v_b not supported");
    const int64_t D = c.n_embd, H = c.n_head, r = c.kv_lora_rank, nope = c.qk_nope_head_dim, nr = c.qk_rope_head_dim,
                  dq = nope + nr, dv = c.v_head_dim, E = c.n_expert, k_top = c.n_expert_used, V = c.n_vocab;
    const double eps = c.rms_eps;

    // YaRN (ggml rope_yarn): theta mixes interpolation (theta / factor) and extrapolation by a ramp
    // over the pair index; deepseek2 cancels the cos/sin magnitude (llama-context.cpp) and instead
    // scales the attention by mscale^2, mscale = 1 + 0.1 * mscale_all_dim * ln(factor) where the
    // file stores yarn_log_multiplier = 0.1 * mscale_all_dim.
    const bool yarn = c.rope_scaling == model::RopeScaling::Yarn;
    const double factor = yarn ? c.rope_scaling_factor : 1.0, base = c.rope_freq_base;
    double lo = 0, hi = 0;
    if (yarn) {
        const double orig = static_cast<double>(c.rope_orig_ctx > 0 ? c.rope_orig_ctx : c.n_ctx_train);
        auto corr = [&](double beta) { return nr * std::log(orig / (beta * 2 * M_PI)) / (2 * std::log(base)); };
        lo = std::max(0.0, std::floor(corr(32.0)));
        hi = std::min(static_cast<double>(nr - 1), std::ceil(corr(1.0)));
    }
    const double mscale = yarn && factor > 1.0 ? 1.0 + c.rope_yarn_log_mul * std::log(factor) : 1.0;
    const double kq_scale = mscale * mscale / std::sqrt(static_cast<double>(dq));
    auto rope = [&](double* v, int64_t pos) {  // nr dims, pairs (2i, 2i+1)
        for (int64_t i = 0; i < nr / 2; ++i) {
            const double extrap = static_cast<double>(pos) * std::pow(base, -2.0 * i / nr);
            double theta = extrap;
            if (yarn) {
                const double y = (static_cast<double>(i) - lo) / std::max(0.001, hi - lo);
                const double mix = 1.0 - std::min(1.0, std::max(0.0, y));  // ext_factor 1
                theta = extrap / factor * (1 - mix) + extrap * mix;
            }
            const double cs = std::cos(theta), sn = std::sin(theta), x0 = v[2 * i], x1 = v[2 * i + 1];
            v[2 * i] = x0 * cs - x1 * sn;
            v[2 * i + 1] = x0 * sn + x1 * cs;
        }
    };

    const Tensor embd = load(f, "token_embd.weight");
    const Tensor out_norm = load(f, "output_norm.weight");
    const Tensor out_w = load(f, "output.weight");
    std::vector<MlaLayer> L(static_cast<size_t>(c.n_layer));
    for (int64_t il = 0; il < c.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        MlaLayer& l = L[static_cast<size_t>(il)];
        l.attn_norm = load(f, p + "attn_norm.weight");
        l.wq = load(f, p + "attn_q.weight", false);
        if (!l.wq.present) {
            l.wq_a = load(f, p + "attn_q_a.weight");
            l.q_a_norm = load(f, p + "attn_q_a_norm.weight");
            l.wq_b = load(f, p + "attn_q_b.weight");
        }
        l.wkv_a = load(f, p + "attn_kv_a_mqa.weight");
        l.kv_a_norm = load(f, p + "attn_kv_a_norm.weight");
        l.wkv_b = load(f, p + "attn_kv_b.weight");
        l.wo = load(f, p + "attn_output.weight");
        l.ffn_norm = load(f, p + "ffn_norm.weight");
        l.router = load(f, p + "ffn_gate_inp.weight", false);
        if (l.router.present) {
            l.sel_bias = load(f, p + "exp_probs_b.bias", false);
            l.gate_e = load(f, p + "ffn_gate_exps.weight");
            l.up_e = load(f, p + "ffn_up_exps.weight");
            l.down_e = load(f, p + "ffn_down_exps.weight");
            l.gate_s = load(f, p + "ffn_gate_shexp.weight");
            l.up_s = load(f, p + "ffn_up_shexp.weight");
            l.down_s = load(f, p + "ffn_down_shexp.weight");
        } else {
            l.gate_e = load(f, p + "ffn_gate.weight");
            l.up_e = load(f, p + "ffn_up.weight");
            l.down_e = load(f, p + "ffn_down.weight");
        }
    }

    std::vector<double> logits;
    logits.reserve(tokens.size() * static_cast<size_t>(V));
    for (size_t t = 0; t < tokens.size(); ++t) {
        const int64_t pos = static_cast<int64_t>(t);
        Vec x(embd.data.begin() + tokens[t] * D, embd.data.begin() + (tokens[t] + 1) * D);
        for (int64_t il = 0; il < c.n_layer; ++il) {
            MlaLayer& l = L[static_cast<size_t>(il)];
            Vec h = x;
            rmsnorm_chunk(h, 0, D, l.attn_norm, eps);
            Vec q;
            if (l.wq.present) {
                q = matvec(l.wq, h, D, H * dq);
            } else {
                Vec qa = matvec(l.wq_a, h, D, c.q_lora_rank);
                rmsnorm_chunk(qa, 0, c.q_lora_rank, l.q_a_norm, eps);
                q = matvec(l.wq_b, qa, c.q_lora_rank, H * dq);
            }
            Vec kv = matvec(l.wkv_a, h, D, r + nr);
            rmsnorm_chunk(kv, 0, r, l.kv_a_norm, eps);
            rope(kv.data() + r, pos);
            Vec cl(kv.begin(), kv.begin() + r);
            const Vec kvb = matvec(l.wkv_b, cl, r, H * (nope + dv));  // per head: [k_nope, v]
            Vec K(static_cast<size_t>(H * dq)), Vv(static_cast<size_t>(H * dv));
            for (int64_t hh = 0; hh < H; ++hh) {
                rope(q.data() + hh * dq + nope, pos);
                for (int64_t i = 0; i < nope; ++i) K[hh * dq + i] = kvb[hh * (nope + dv) + i];
                for (int64_t i = 0; i < nr; ++i) K[hh * dq + nope + i] = kv[r + i];
                for (int64_t i = 0; i < dv; ++i) Vv[hh * dv + i] = kvb[hh * (nope + dv) + nope + i];
            }
            l.K.push_back(K);
            l.V.push_back(Vv);
            Vec att(static_cast<size_t>(H * dv), 0.0);
            for (int64_t hh = 0; hh < H; ++hh)
                attend_causal(q.data() + hh * dq, dq, dv, pos + 1, kq_scale,
                              [&](int64_t j) { return l.K[static_cast<size_t>(j)].data() + hh * dq; },
                              [&](int64_t j) { return l.V[static_cast<size_t>(j)].data() + hh * dv; }, att.data() + hh * dv);
            const Vec o = matvec(l.wo, att, H * dv, D);
            for (int64_t i = 0; i < D; ++i) x[i] += o[i];

            h = x;
            rmsnorm_chunk(h, 0, D, l.ffn_norm, eps);
            Vec y(static_cast<size_t>(D), 0.0);
            auto ffn = [&](const Tensor& g, const Tensor& u, const Tensor& dn, int64_t Fw, size_t e, double w) {
                const Vec gv = matvec(g, h, D, Fw, e * D * Fw), uv = matvec(u, h, D, Fw, e * D * Fw);
                Vec a(static_cast<size_t>(Fw));
                for (int64_t i = 0; i < Fw; ++i) a[i] = silu(gv[i]) * uv[i];
                const Vec dvv = matvec(dn, a, Fw, D, e * Fw * D);
                for (int64_t i = 0; i < D; ++i) y[i] += w * dvv[i];
            };
            if (!l.router.present) {
                ffn(l.gate_e, l.up_e, l.down_e, c.n_ff, 0, 1.0);
                for (int64_t i = 0; i < D; ++i) x[i] += y[i];
                continue;
            }
            // Router: probs (softmax or sigmoid), selection = probs + bias, group-limited top-k.
            Vec pr = matvec(l.router, h, D, E);
            if (c.gating == model::GatingFunc::Sigmoid) {
                for (auto& v : pr) v = 1.0 / (1.0 + std::exp(-v));
            } else {
                const double m = *std::max_element(pr.begin(), pr.end());
                double z = 0;
                for (auto& v : pr) z += (v = std::exp(v - m));
                for (auto& v : pr) v /= z;
            }
            Vec sel = pr;
            if (l.sel_bias.present)
                for (int64_t e = 0; e < E; ++e) sel[e] += l.sel_bias.data[e];
            if (c.n_expert_groups > 1) {
                const int64_t G = c.n_expert_groups, per = E / G;
                Vec gs(static_cast<size_t>(G));
                for (int64_t g = 0; g < G; ++g) {
                    Vec m(sel.begin() + g * per, sel.begin() + (g + 1) * per);
                    std::sort(m.begin(), m.end(), std::greater<>());
                    gs[g] = l.sel_bias.present ? m[0] + m[1] : m[0];
                }
                std::vector<int64_t> go(static_cast<size_t>(G));
                std::iota(go.begin(), go.end(), 0);
                std::stable_sort(go.begin(), go.end(), [&](int64_t a, int64_t b) { return gs[a] > gs[b]; });
                for (int64_t j = c.n_group_used; j < G; ++j)
                    for (int64_t e = go[j] * per; e < (go[j] + 1) * per; ++e) sel[e] = -INFINITY;
            }
            std::vector<int64_t> order(static_cast<size_t>(E));
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return sel[a] > sel[b]; });
            double wsum = 0;
            for (int64_t j = 0; j < k_top; ++j) wsum += pr[order[j]];
            for (int64_t j = 0; j < k_top; ++j) {
                const int64_t e = order[j];
                double w = c.expert_weights_norm ? pr[e] / wsum : pr[e];
                w *= c.expert_weights_scale;
                ffn(l.gate_e, l.up_e, l.down_e, c.n_ff_exp, static_cast<size_t>(e), w);
            }
            ffn(l.gate_s, l.up_s, l.down_s, c.n_ff_shexp, 0, 1.0);
            for (int64_t i = 0; i < D; ++i) x[i] += y[i];
        }
        rmsnorm_chunk(x, 0, D, out_norm, eps);
        const Vec lg = matvec(out_w, x, D, V);
        logits.insert(logits.end(), lg.begin(), lg.end());
    }
    return logits;
}

}  // namespace moe::testref
