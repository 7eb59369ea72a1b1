// fp64 reference forward (see reference_forward_util.h). Deliberately simple and slow.
#include "runtime/reference_forward_util.h"
#include "runtime/reference_detail.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "core/fp16.h"
#include "format/gguf.h"
#include "kernels/ref/dequant_row.h"
#include "model/config.h"

namespace moe::testref {

namespace detail {

Tensor load(const gguf::File& f, const std::string& name, bool required) {
    Tensor t;
    const gguf::TensorInfo* info = f.find_tensor(name);
    if (!info) {
        if (required) throw std::runtime_error("reference: missing tensor " + name);
        return t;
    }
    const TensorView v = f.view(*info);
    const int64_t n = v.nelements();
    t.data.resize(static_cast<size_t>(n));
    for (int d = 0; d < 4; ++d) t.ne[d] = v.ne[d];
    if (v.type == DType::F32 || v.type == DType::F16 || v.type == DType::BF16) {
        for (int64_t i = 0; i < n; ++i) {
            if (v.type == DType::F32) t.data[i] = static_cast<const float*>(v.data)[i];
            else if (v.type == DType::F16) t.data[i] = fp16_to_fp32(static_cast<const uint16_t*>(v.data)[i]);
            else t.data[i] = bf16_to_fp32(static_cast<const uint16_t*>(v.data)[i]);
        }
    } else {
        // Quantized weights: the reference dequantizer (kernels/ref), row by row; the reference
        // forward then runs in double on exactly the values the file encodes.
        if (!ref::dequant_row_supported(v.type)) throw std::runtime_error("reference: unsupported type of " + name);
        std::vector<float> row(static_cast<size_t>(v.ne[0]));
        for (int64_t r = 0; r < v.nrows(); ++r) {
            ref::dequant_row(v.type, static_cast<const char*>(v.data) + r * v.nb[1], row.data(), v.ne[0]);
            for (int64_t i = 0; i < v.ne[0]; ++i) t.data[static_cast<size_t>(r * v.ne[0] + i)] = row[static_cast<size_t>(i)];
        }
    }
    t.present = true;
    return t;
}

// y[n] = sum_i W[off + n*K + i] x[i], n < N.
Vec matvec(const Tensor& W, const Vec& x, int64_t K, int64_t N, size_t off) {
    Vec y(static_cast<size_t>(N), 0.0);
    for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        const double* w = W.data.data() + off + static_cast<size_t>(n * K);
        for (int64_t i = 0; i < K; ++i) s += w[i] * x[static_cast<size_t>(i)];
        y[static_cast<size_t>(n)] = s;
    }
    return y;
}

// RMSNorm of x[off .. off+len) with weight w (shared for every chunk).
void rmsnorm_chunk(Vec& x, size_t off, int64_t len, const Tensor& w, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < len; ++i) ss += x[off + i] * x[off + i];
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(len) + eps);
    for (int64_t i = 0; i < len; ++i) x[off + i] = x[off + i] * r * w.data[static_cast<size_t>(i)];
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

}  // namespace detail

namespace {
using namespace detail;

struct Layer {
    Tensor attn_norm, wq, wk, wv, bq, bk, bv, wo, q_norm, k_norm, ffn_norm;
    Tensor router, gate_e, up_e, down_e, gate_s, up_s, down_s, gate_inp_s;
    std::vector<Vec> K, V;  // per position: [Hkv * dk], [Hkv * dv]
};

}  // namespace

std::vector<double> reference_forward(const gguf::File& f, const std::vector<int32_t>& tokens) {
    const model::ModelConfig c = model::config_from_gguf(f);
    const std::string arch = c.arch;
    if (arch == "deepseek2") return reference_forward_deepseek2(f, tokens);
    if (arch == "gpt-oss") return reference_forward_gpt_oss(f, tokens);
    if (arch != "llama" && arch != "qwen2moe" && arch != "qwen3moe" && arch != "olmoe")
        throw std::runtime_error("reference: no reference for " + arch);
    // Architecture rules, from llama.cpp's graph builders (src/models/<arch>.cpp):
    const bool neox = arch != "llama";                      // llama: rotate pairs; others: halves
    const bool per_head_qk_norm = arch == "qwen3moe";
    const bool whole_qk_norm = arch == "olmoe";
    const bool renorm = arch == "llama" || arch == "qwen3moe";
    const int64_t D = c.n_embd, Hq = c.n_head, Hkv = c.n_head_kv, dk = c.head_dim_k, dv = c.head_dim_v;
    const int64_t E = c.n_expert, k_top = c.n_expert_used, V = c.n_vocab, n_rot = c.n_rot;
    const double eps = c.rms_eps;

    const Tensor embd = load(f, "token_embd.weight");
    const Tensor out_norm = load(f, "output_norm.weight");
    Tensor out_w = load(f, "output.weight", false);
    const Tensor& head = out_w.present ? out_w : embd;
    std::vector<Layer> L(static_cast<size_t>(c.n_layer));
    for (int64_t il = 0; il < c.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        Layer& l = L[static_cast<size_t>(il)];
        l.attn_norm = load(f, p + "attn_norm.weight");
        l.wq = load(f, p + "attn_q.weight");
        l.wk = load(f, p + "attn_k.weight");
        l.wv = load(f, p + "attn_v.weight");
        l.bq = load(f, p + "attn_q.bias", false);
        l.bk = load(f, p + "attn_k.bias", false);
        l.bv = load(f, p + "attn_v.bias", false);
        l.wo = load(f, p + "attn_output.weight");
        l.q_norm = load(f, p + "attn_q_norm.weight", false);
        l.k_norm = load(f, p + "attn_k_norm.weight", false);
        l.ffn_norm = load(f, p + "ffn_norm.weight");
        l.router = load(f, p + "ffn_gate_inp.weight", false);
        if (l.router.present) {
            l.gate_e = load(f, p + "ffn_gate_exps.weight");
            l.up_e = load(f, p + "ffn_up_exps.weight");
            l.down_e = load(f, p + "ffn_down_exps.weight");
        } else {  // dense block (llama without experts): one "expert" with weight 1
            l.gate_e = load(f, p + "ffn_gate.weight");
            l.up_e = load(f, p + "ffn_up.weight");
            l.down_e = load(f, p + "ffn_down.weight");
        }
        l.gate_s = load(f, p + "ffn_gate_shexp.weight", false);
        l.up_s = load(f, p + "ffn_up_shexp.weight", false);
        l.down_s = load(f, p + "ffn_down_shexp.weight", false);
        l.gate_inp_s = load(f, p + "ffn_gate_inp_shexp.weight", false);
    }

    auto rope = [&](Vec& x, int64_t n_heads, int64_t pos) {
        double p = static_cast<double>(pos);
        if (c.rope_scaling == model::RopeScaling::Linear) p /= c.rope_scaling_factor;
        for (int64_t h = 0; h < n_heads; ++h) {
            double* v = x.data() + h * dk;
            for (int64_t i = 0; i < n_rot / 2; ++i) {
                const double theta = p * std::pow(static_cast<double>(c.rope_freq_base), -2.0 * i / n_rot);
                const double cs = std::cos(theta), sn = std::sin(theta);
                const int64_t a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
                const double x0 = v[a], x1 = v[b];
                v[a] = x0 * cs - x1 * sn;
                v[b] = x0 * sn + x1 * cs;
            }
        }
    };

    std::vector<double> logits;
    logits.reserve(tokens.size() * static_cast<size_t>(V));
    for (size_t t = 0; t < tokens.size(); ++t) {
        const int64_t pos = static_cast<int64_t>(t);
        Vec x(embd.data.begin() + tokens[t] * D, embd.data.begin() + (tokens[t] + 1) * D);
        for (int64_t il = 0; il < c.n_layer; ++il) {
            Layer& l = L[static_cast<size_t>(il)];
            // ---- attention
            Vec h = x;
            rmsnorm_chunk(h, 0, D, l.attn_norm, eps);
            Vec q = matvec(l.wq, h, D, Hq * dk), kk = matvec(l.wk, h, D, Hkv * dk), vv = matvec(l.wv, h, D, Hkv * dv);
            if (l.bq.present)
                for (int64_t i = 0; i < Hq * dk; ++i) q[i] += l.bq.data[i];
            if (l.bk.present)
                for (int64_t i = 0; i < Hkv * dk; ++i) kk[i] += l.bk.data[i];
            if (l.bv.present)
                for (int64_t i = 0; i < Hkv * dv; ++i) vv[i] += l.bv.data[i];
            if (per_head_qk_norm) {
                for (int64_t hh = 0; hh < Hq; ++hh) rmsnorm_chunk(q, hh * dk, dk, l.q_norm, eps);
                for (int64_t hh = 0; hh < Hkv; ++hh) rmsnorm_chunk(kk, hh * dk, dk, l.k_norm, eps);
            } else if (whole_qk_norm) {
                rmsnorm_chunk(q, 0, Hq * dk, l.q_norm, eps);
                rmsnorm_chunk(kk, 0, Hkv * dk, l.k_norm, eps);
            }
            rope(q, Hq, pos);
            rope(kk, Hkv, pos);
            l.K.push_back(kk);
            l.V.push_back(vv);
            Vec att(static_cast<size_t>(Hq * dv), 0.0);
            const int64_t group = Hq / Hkv;
            for (int64_t hh = 0; hh < Hq; ++hh) {
                const int64_t g = hh / group;  // the KV head this query head shares (GQA)
                attend_causal(q.data() + hh * dk, dk, dv, pos + 1, 1.0 / std::sqrt(static_cast<double>(dk)),
                              [&](int64_t j) { return l.K[static_cast<size_t>(j)].data() + g * dk; },
                              [&](int64_t j) { return l.V[static_cast<size_t>(j)].data() + g * dv; }, att.data() + hh * dv);
            }
            const Vec o = matvec(l.wo, att, Hq * dv, D);
            for (int64_t i = 0; i < D; ++i) x[i] += o[i];

            // ---- MoE FFN (or dense FFN)
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
            Vec rl = matvec(l.router, h, D, E);
            const double rmx = *std::max_element(rl.begin(), rl.end());
            double rsum = 0;
            for (auto& v : rl) rsum += (v = std::exp(v - rmx));
            for (auto& v : rl) v /= rsum;
            std::vector<int64_t> order(static_cast<size_t>(E));
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return rl[a] > rl[b]; });
            double wsum = 0;
            for (int64_t j = 0; j < k_top; ++j) wsum += rl[order[j]];
            const int64_t F = c.n_ff_exp;
            for (int64_t j = 0; j < k_top; ++j) {
                const int64_t e = order[j];
                ffn(l.gate_e, l.up_e, l.down_e, F, static_cast<size_t>(e), renorm ? rl[e] / wsum : rl[e]);
            }
            if (l.gate_s.present) {
                double sg = 1.0;
                if (l.gate_inp_s.present) {
                    double d = 0;
                    for (int64_t i = 0; i < D; ++i) d += l.gate_inp_s.data[i] * h[i];
                    sg = 1.0 / (1.0 + std::exp(-d));
                }
                ffn(l.gate_s, l.up_s, l.down_s, l.gate_s.ne[1], 0, sg);
            }
            for (int64_t i = 0; i < D; ++i) x[i] += y[i];
        }
        rmsnorm_chunk(x, 0, D, out_norm, eps);
        const Vec lg = matvec(head, x, D, V);
        logits.insert(logits.end(), lg.begin(), lg.end());
    }
    return logits;
}

double nmse(const float* got, const double* ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(got[i]) - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

double nmse(const float* got, const float* ref, size_t n) {
    std::vector<double> r(ref, ref + n);
    return nmse(got, r.data(), n);
}

}  // namespace moe::testref
