#include "moe_test_util.h"

#include <cmath>

#include "core/rng.h"

namespace moe::test {

MoeWeights TestModel::views(int layer) {
    const MoeSpec& s = spec;
    const int64_t D = s.n_embd, F = s.n_ff, E = s.n_expert, Fs = s.n_ff_shared;
    const std::string p = "blk." + std::to_string(layer) + ".";
    MoeWeights w;
    w.layer = layer;
    w.router = make_view(p + "ffn_gate_inp.weight", DType::F32, {D, E}, router.data());
    if (s.has_router_bias) w.router_bias = make_view(p + "ffn_gate_inp.bias", DType::F32, {E}, router_bias.data());
    if (s.has_selection_bias) w.selection_bias = make_view(p + "exp_probs_b.bias", DType::F32, {E}, sel_bias.data());
    w.gate_exps = make_view(p + "ffn_gate_exps.weight", DType::F32, {D, F, E}, gate.data());
    w.up_exps = make_view(p + "ffn_up_exps.weight", DType::F32, {D, F, E}, up.data());
    w.down_exps = make_view(p + "ffn_down_exps.weight", DType::F32, {F, D, E}, down.data());
    if (s.has_expert_bias) {
        w.gate_exps_b = make_view(p + "ffn_gate_exps.bias", DType::F32, {F, E}, gate_b.data());
        w.up_exps_b = make_view(p + "ffn_up_exps.bias", DType::F32, {F, E}, up_b.data());
        w.down_exps_b = make_view(p + "ffn_down_exps.bias", DType::F32, {D, E}, down_b.data());
    }
    if (s.n_shared > 0) {
        w.gate_shexp = make_view(p + "ffn_gate_shexp.weight", DType::F32, {D, Fs}, gate_sh.data());
        w.up_shexp = make_view(p + "ffn_up_shexp.weight", DType::F32, {D, Fs}, up_sh.data());
        w.down_shexp = make_view(p + "ffn_down_shexp.weight", DType::F32, {Fs, D}, down_sh.data());
    }
    if (s.shared_gate_sigmoid) w.gate_inp_shexp = make_view(p + "ffn_gate_inp_shexp.weight", DType::F32, {D}, gate_inp_sh.data());
    return w;
}

const char* variant_name(Variant v) {
    switch (v) {
        case Variant::SoftmaxNorm: return "softmax_norm";
        case Variant::SoftmaxNoNorm: return "softmax_nonorm";
        case Variant::Qwen2Shared: return "qwen2_shared";
        case Variant::GptOss: return "gptoss";
        case Variant::Granite: return "granite";
        case Variant::DeepSeekV3: return "dsv3";
        case Variant::DeepSeekV2: return "dsv2";
    }
    return "?";
}

std::vector<Variant> all_variants() {
    return {Variant::SoftmaxNorm, Variant::SoftmaxNoNorm, Variant::Qwen2Shared, Variant::GptOss,
            Variant::Granite,     Variant::DeepSeekV3,    Variant::DeepSeekV2};
}

namespace {
// Largest group count in {8, 4, 2} dividing E with >= 2 experts per group, else 1.
int pick_groups(int E) {
    for (int g : {8, 4, 2})
        if (E % g == 0 && E / g >= 2) return g;
    return 1;
}
}  // namespace

MoeSpec make_spec(Variant v, int E, int k, int64_t D, int64_t F) {
    MoeSpec s;
    s.n_embd = D;
    s.n_ff = F;
    s.n_expert = E;
    s.top_k = k;
    switch (v) {
        case Variant::SoftmaxNorm: s.norm_topk = true; break;
        case Variant::SoftmaxNoNorm: break;
        case Variant::Qwen2Shared:
            s.n_shared = 1;
            s.n_ff_shared = F + 8;
            s.shared_gate_sigmoid = true;
            break;
        case Variant::GptOss:
            s.gating = Gating::SoftmaxSelected;
            s.has_router_bias = true;
            s.has_expert_bias = true;
            s.act = Activation::SwiGLUClamped;
            s.clamp_limit = 1.5f;  // small, so the clamp is active on random data
            break;
        case Variant::Granite: s.gating = Gating::SoftmaxSelected; break;
        case Variant::DeepSeekV3:
        case Variant::DeepSeekV2: {
            const bool v3 = v == Variant::DeepSeekV3;
            s.gating = v3 ? Gating::Sigmoid : Gating::Softmax;
            s.norm_topk = v3;
            s.norm_eps = v3 ? 1e-20f : 0.0f;
            s.scale = v3 ? 2.5f : 16.0f;
            s.has_selection_bias = v3;
            s.n_group = pick_groups(E);
            s.group_score = v3 ? GroupScore::Top2Sum : GroupScore::Max;
            const int per = E / s.n_group;
            s.topk_group = std::min(s.n_group, std::max(s.n_group / 2, (k + per - 1) / per));
            s.n_shared = v3 ? 1 : 2;
            s.n_ff_shared = v3 ? F : 2 * F;
            break;
        }
    }
    return s;
}

namespace {
void fill_normal(std::vector<float>& v, size_t n, Rng& rng, double sd) {
    v.resize(n);
    for (auto& x : v) x = static_cast<float>(rng.normal() * sd);
}
}  // namespace

TestModel make_model(const MoeSpec& spec, uint64_t seed, float router_scale, int hot) {
    TestModel m;
    m.spec = spec;
    Rng rng(seed);
    const size_t D = static_cast<size_t>(spec.n_embd), F = static_cast<size_t>(spec.n_ff),
                 E = static_cast<size_t>(spec.n_expert), Fs = static_cast<size_t>(spec.n_ff_shared);
    fill_normal(m.router, D * E, rng, router_scale / std::sqrt(static_cast<double>(D)));
    if (hot >= 0)  // with x > 0 (random_x positive), expert `hot` gets logit ~ D/2 >> the others
        for (size_t i = 0; i < D; ++i) m.router[static_cast<size_t>(hot) * D + i] = 1.0f;
    fill_normal(m.router_bias, E, rng, 0.5);
    fill_normal(m.sel_bias, E, rng, 0.05);
    fill_normal(m.gate, D * F * E, rng, 1.0 / std::sqrt(static_cast<double>(D)));
    fill_normal(m.up, D * F * E, rng, 1.0 / std::sqrt(static_cast<double>(D)));
    fill_normal(m.down, F * D * E, rng, 1.0 / std::sqrt(static_cast<double>(F)));
    if (spec.n_shared > 0) {
        fill_normal(m.gate_sh, D * Fs, rng, 1.0 / std::sqrt(static_cast<double>(D)));
        fill_normal(m.up_sh, D * Fs, rng, 1.0 / std::sqrt(static_cast<double>(D)));
        fill_normal(m.down_sh, Fs * D, rng, 1.0 / std::sqrt(static_cast<double>(Fs)));
    }
    fill_normal(m.gate_inp_sh, D, rng, 1.0 / std::sqrt(static_cast<double>(D)));
    if (spec.has_expert_bias) {  // last, so the other variants keep their random streams
        fill_normal(m.gate_b, F * E, rng, 0.5);
        fill_normal(m.up_b, F * E, rng, 0.5);
        fill_normal(m.down_b, D * E, rng, 0.5);
    }
    return m;
}

std::vector<float> random_x(int64_t T, int64_t D, uint64_t seed, bool positive) {
    Rng rng(seed);
    std::vector<float> x(static_cast<size_t>(T * D));
    for (auto& v : x) v = positive ? rng.uniform(0.0f, 1.0f) : rng.normal();
    return x;
}

double nmse(const float* a, const double* ref, int64_t T, int64_t D, const std::vector<char>& use) {
    double num = 0, den = 0;
    for (int64_t t = 0; t < T; ++t) {
        if (!use[static_cast<size_t>(t)]) continue;
        for (int64_t d = 0; d < D; ++d) {
            const double r = ref[t * D + d], e = static_cast<double>(a[t * D + d]) - r;
            num += e * e;
            den += r * r;
        }
    }
    return den > 0 ? num / den : num;
}

double nmse_threshold(int64_t D, int64_t F, int k) {
    const double u = std::ldexp(1.0, -24);
    return 64.0 * u * u * static_cast<double>(2 * D + F + k + 32);
}

}  // namespace moe::test
