// fp64 reference forward of gpt-oss, in plain loops, from llama.cpp's reading of the format
// (src/models/openai-moe.cpp, llama-graph.cpp build_moe_ffn / swiglu_oai, llama-hparams.cpp SWA
// pattern, llama-context.cpp YaRN factors) and the model card: nothing from src/model.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "format/gguf.h"
#include "model/config.h"
#include "runtime/reference_detail.h"

namespace moe::testref {

namespace {
using namespace detail;

struct OssLayer {
    Tensor attn_norm, wq, wk, wv, bq, bk, bv, wo, bo, sinks, post_norm;
    Tensor router, router_b, gate, up, down, gate_b, up_b, down_b;
    std::vector<Vec> K, V;
};
}  // namespace

std::vector<double> reference_forward_gpt_oss(const gguf::File& f, const std::vector<int32_t>& tokens) {
    const model::ModelConfig c = model::config_from_gguf(f);
    const int64_t D = c.n_embd, Hq = c.n_head, Hkv = c.n_head_kv, dh = c.head_dim_k, nr = c.n_rot;
    const int64_t E = c.n_expert, k_top = c.n_expert_used, F = c.n_ff_exp, V = c.n_vocab;
    const double eps = c.rms_eps;
    const int64_t W = c.sliding_window, pattern = c.swa_pattern > 0 ? c.swa_pattern : 2;

    // YaRN as llama.cpp runs gpt-oss (no yarn_log_multiplier in the file): theta mixes
    // interpolation (theta / factor) and extrapolation over a ramp of pair indices, and cos/sin get
    // the magnitude 1 + 0.1 ln(factor) (ggml rope_yarn's mscale; llama-context.cpp leaves
    // attn_factor at 1 for these files).
    const bool yarn = c.rope_scaling == model::RopeScaling::Yarn;
    const double factor = yarn ? c.rope_scaling_factor : 1.0, base = c.rope_freq_base;
    double lo = 0, hi = 0;
    if (yarn) {
        const double orig = static_cast<double>(c.rope_orig_ctx > 0 ? c.rope_orig_ctx : c.n_ctx_train);
        auto corr = [&](double beta) { return nr * std::log(orig / (beta * 2 * M_PI)) / (2 * std::log(base)); };
        lo = std::max(0.0, std::floor(corr(32.0)));
        hi = std::min(static_cast<double>(nr - 1), std::ceil(corr(1.0)));
    }
    const double mag = yarn && factor > 1.0 ? 1.0 + 0.1 * std::log(factor) : 1.0;
    auto rope = [&](Vec& x, int64_t n_heads, int64_t pos) {  // neox: pairs (i, i + nr/2)
        for (int64_t h = 0; h < n_heads; ++h) {
            double* v = x.data() + h * dh;
            for (int64_t i = 0; i < nr / 2; ++i) {
                const double extrap = static_cast<double>(pos) * std::pow(base, -2.0 * i / nr);
                double theta = extrap;
                if (yarn) {
                    const double y = (static_cast<double>(i) - lo) / std::max(0.001, hi - lo);
                    const double mix = 1.0 - std::min(1.0, std::max(0.0, y));
                    theta = extrap / factor * (1 - mix) + extrap * mix;
                }
                const double cs = std::cos(theta) * mag, sn = std::sin(theta) * mag;
                const double x0 = v[i], x1 = v[i + nr / 2];
                v[i] = x0 * cs - x1 * sn;
                v[i + nr / 2] = x0 * sn + x1 * cs;
            }
        }
    };

    const Tensor embd = load(f, "token_embd.weight");
    const Tensor out_norm = load(f, "output_norm.weight");
    const Tensor out_w = load(f, "output.weight");
    std::vector<OssLayer> L(static_cast<size_t>(c.n_layer));
    for (int64_t il = 0; il < c.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        OssLayer& l = L[static_cast<size_t>(il)];
        l.attn_norm = load(f, p + "attn_norm.weight");
        l.wq = load(f, p + "attn_q.weight");
        l.wk = load(f, p + "attn_k.weight");
        l.wv = load(f, p + "attn_v.weight");
        l.bq = load(f, p + "attn_q.bias");
        l.bk = load(f, p + "attn_k.bias");
        l.bv = load(f, p + "attn_v.bias");
        l.wo = load(f, p + "attn_output.weight");
        l.bo = load(f, p + "attn_output.bias");
        l.sinks = load(f, p + "attn_sinks.weight");
        l.post_norm = load(f, p + "post_attention_norm.weight");
        l.router = load(f, p + "ffn_gate_inp.weight");
        l.router_b = load(f, p + "ffn_gate_inp.bias");
        l.gate = load(f, p + "ffn_gate_exps.weight");
        l.up = load(f, p + "ffn_up_exps.weight");
        l.down = load(f, p + "ffn_down_exps.weight");
        l.gate_b = load(f, p + "ffn_gate_exps.bias");
        l.up_b = load(f, p + "ffn_up_exps.bias");
        l.down_b = load(f, p + "ffn_down_exps.bias");
    }
    auto add = [](Vec& y, const Tensor& b, size_t off = 0) {
        for (size_t i = 0; i < y.size(); ++i) y[i] += b.data[off + i];
    };

    std::vector<double> logits;
    logits.reserve(tokens.size() * static_cast<size_t>(V));
    for (size_t t = 0; t < tokens.size(); ++t) {
        const int64_t pos = static_cast<int64_t>(t);
        Vec x(embd.data.begin() + tokens[t] * D, embd.data.begin() + (tokens[t] + 1) * D);
        for (int64_t il = 0; il < c.n_layer; ++il) {
            OssLayer& l = L[static_cast<size_t>(il)];
            // ---- attention: biases, rope, sliding window on layers il % pattern < pattern - 1, sinks
            Vec h = x;
            rmsnorm_chunk(h, 0, D, l.attn_norm, eps);
            Vec q = matvec(l.wq, h, D, Hq * dh), kk = matvec(l.wk, h, D, Hkv * dh), vv = matvec(l.wv, h, D, Hkv * dh);
            add(q, l.bq);
            add(kk, l.bk);
            add(vv, l.bv);
            rope(q, Hq, pos);
            rope(kk, Hkv, pos);
            l.K.push_back(kk);
            l.V.push_back(vv);
            const bool swa = W > 0 && il % pattern < pattern - 1;
            const int64_t j0 = swa ? std::max<int64_t>(0, pos - W + 1) : 0;
            Vec att(static_cast<size_t>(Hq * dh), 0.0);
            for (int64_t hh = 0; hh < Hq; ++hh) {
                const int64_t g = hh / (Hq / Hkv);
                const double sink = l.sinks.data[static_cast<size_t>(hh)];
                Vec s;
                double mx = sink;
                for (int64_t j = j0; j <= pos; ++j) {
                    double d = 0;
                    for (int64_t i = 0; i < dh; ++i) d += q[hh * dh + i] * l.K[j][g * dh + i];
                    s.push_back(d / std::sqrt(static_cast<double>(dh)));
                    mx = std::max(mx, s.back());
                }
                double sum = std::exp(sink - mx);
                for (auto& v : s) sum += (v = std::exp(v - mx));
                for (int64_t j = j0; j <= pos; ++j)
                    for (int64_t i = 0; i < dh; ++i) att[hh * dh + i] += s[j - j0] / sum * l.V[j][g * dh + i];
            }
            Vec o = matvec(l.wo, att, Hq * dh, D);
            add(o, l.bo);
            for (int64_t i = 0; i < D; ++i) x[i] += o[i];

            // ---- MoE: logits + bias, top-k of the raw logits, softmax over the k selected
            h = x;
            rmsnorm_chunk(h, 0, D, l.post_norm, eps);
            Vec rl = matvec(l.router, h, D, E);
            add(rl, l.router_b);
            std::vector<int64_t> order(static_cast<size_t>(E));
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return rl[a] > rl[b]; });
            double wsum = 0;
            for (int64_t j = 0; j < k_top; ++j) wsum += std::exp(rl[order[j]] - rl[order[0]]);
            Vec y(static_cast<size_t>(D), 0.0);
            for (int64_t j = 0; j < k_top; ++j) {
                const int64_t e = order[j];
                const double w = std::exp(rl[e] - rl[order[0]]) / wsum;
                Vec gv = matvec(l.gate, h, D, F, static_cast<size_t>(e * D * F));
                Vec uv = matvec(l.up, h, D, F, static_cast<size_t>(e * D * F));
                add(gv, l.gate_b, static_cast<size_t>(e * F));
                add(uv, l.up_b, static_cast<size_t>(e * F));
                Vec a(static_cast<size_t>(F));
                for (int64_t i = 0; i < F; ++i) {  // swiglu_oai: alpha 1.702, limit 7
                    const double g = std::min(gv[i], 7.0), u = std::clamp(uv[i], -7.0, 7.0);
                    a[i] = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
                }
                Vec dn = matvec(l.down, a, F, D, static_cast<size_t>(e * F * D));
                add(dn, l.down_b, static_cast<size_t>(e * D));
                for (int64_t i = 0; i < D; ++i) y[i] += w * dn[i];
            }
            for (int64_t i = 0; i < D; ++i) x[i] += y[i];
        }
        rmsnorm_chunk(x, 0, D, out_norm, eps);
        const Vec lg = matvec(out_w, x, D, V);
        logits.insert(logits.end(), lg.begin(), lg.end());
    }
    return logits;
}

}  // namespace moe::testref
