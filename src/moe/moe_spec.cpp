#include "moe/moe_spec.h"

#include <sstream>

#include "core/error.h"

namespace moe {

void MoeSpec::validate() const {
    auto bad = [](auto&&... a) { throw_error("moe", "invalid MoeSpec: ", a...); };
    if (n_embd <= 0) bad("n_embd = ", n_embd, " must be > 0");
    if (n_ff <= 0) bad("n_ff = ", n_ff, " must be > 0");
    if (n_expert <= 0) bad("n_expert = ", n_expert, " must be > 0");
    if (top_k <= 0 || top_k > n_expert) bad("top_k = ", top_k, " must be in [1, n_expert = ", n_expert, "]");
    if (n_group < 1 || n_expert % n_group != 0)
        bad("n_group = ", n_group, " must be >= 1 and divide n_expert = ", n_expert);
    if (n_group > 1) {
        if (topk_group < 1 || topk_group > n_group) bad("topk_group = ", topk_group, " must be in [1, n_group]");
        if (static_cast<int64_t>(topk_group) * (n_expert / n_group) < top_k)
            bad("topk_group * experts per group = ", topk_group * (n_expert / n_group), " < top_k = ", top_k);
        if (group_score == GroupScore::Top2Sum && n_expert / n_group < 2)
            bad("group score top-2 sum needs at least 2 experts per group");
    }
    if (n_shared < 0) bad("n_shared = ", n_shared);
    if (n_shared > 0 && n_ff_shared <= 0) bad("n_ff_shared = ", n_ff_shared, " must be > 0 with shared experts");
    if (shared_gate_sigmoid && n_shared == 0) bad("shared_gate_sigmoid without shared experts");
    if (!(scale > 0.0f)) bad("scale = ", scale, " must be > 0");
    if (!(norm_eps >= 0.0f)) bad("norm_eps = ", norm_eps);
    if (act == Activation::SwiGLUClamped && !(clamp_limit > 0.0f)) bad("clamp_limit = ", clamp_limit);
}

std::string MoeSpec::describe() const {
    std::ostringstream os;
    os << "D=" << n_embd << " F=" << n_ff << " E=" << n_expert << " k=" << top_k << " "
       << (gating == Gating::Softmax ? "softmax" : gating == Gating::Sigmoid ? "sigmoid" : "softmax_selected")
       << (norm_topk ? " norm" : " no_norm");
    if (scale != 1.0f) os << " scale=" << scale;
    if (n_group > 1)
        os << " groups=" << n_group << "/" << topk_group << (group_score == GroupScore::Max ? "(max)" : "(top2sum)");
    if (has_selection_bias) os << " sel_bias";
    if (has_router_bias) os << " router_bias";
    if (has_expert_bias) os << " expert_bias";
    if (n_shared > 0) os << " shared=" << n_shared << "x(Fs=" << n_ff_shared << ")" << (shared_gate_sigmoid ? " sigmoid_gate" : "");
    if (act == Activation::SwiGLUClamped) os << " swiglu_clamped(" << clamp_limit << ")";
    return os.str();
}

namespace {
void check_shape(const TensorView& t, const char* role, std::initializer_list<int64_t> want, int layer) {
    if (!t.data) throw_error("moe", "layer ", layer, ": tensor ", role, " is missing");
    int d = 0;
    bool ok = true;
    for (int64_t w : want) ok = ok && t.ne[d++] == w;
    for (; d < kMaxDims; ++d) ok = ok && t.ne[d] == 1;
    if (!ok) {
        std::ostringstream os;
        os << "[";
        int i = 0;
        for (int64_t w : want) os << (i++ ? ", " : "") << w;
        os << "]";
        throw_error("moe", "layer ", layer, ": tensor ", t.name.empty() ? role : t.name.c_str(), " has shape ",
                    t.shape_string(), ", expected ", os.str());
    }
    if (t.nb[0] != dtype_info(t.type).bytes || t.nb[1] < t.row_bytes())
        throw_error("moe", "layer ", layer, ": tensor ", t.name, " rows are not contiguous");
}
void check_f32(const TensorView& t, const char* role, int layer) {
    if (t.type != DType::F32)
        throw_error("moe", "layer ", layer, ": tensor ", t.name.empty() ? role : t.name.c_str(), " has type ",
                    dtype_name(t.type), "; only f32 is supported for ", role);
    if (!t.contiguous()) throw_error("moe", "layer ", layer, ": tensor ", t.name, " must be contiguous");
}
}  // namespace

void MoeWeights::validate(const MoeSpec& s) const {
    const int64_t D = s.n_embd, F = s.n_ff, E = s.n_expert;
    check_shape(router, "ffn_gate_inp", {D, E}, layer);
    check_f32(router, "ffn_gate_inp", layer);
    if (s.has_router_bias) {
        check_shape(router_bias, "ffn_gate_inp.bias", {E}, layer);
        check_f32(router_bias, "ffn_gate_inp.bias", layer);
    }
    if (s.has_selection_bias) {
        check_shape(selection_bias, "exp_probs_b", {E}, layer);
        check_f32(selection_bias, "exp_probs_b", layer);
    }
    check_shape(gate_exps, "ffn_gate_exps", {D, F, E}, layer);
    check_shape(up_exps, "ffn_up_exps", {D, F, E}, layer);
    check_shape(down_exps, "ffn_down_exps", {F, D, E}, layer);
    if (s.has_expert_bias) {
        check_shape(gate_exps_b, "ffn_gate_exps.bias", {F, E}, layer);
        check_shape(up_exps_b, "ffn_up_exps.bias", {F, E}, layer);
        check_shape(down_exps_b, "ffn_down_exps.bias", {D, E}, layer);
        check_f32(gate_exps_b, "ffn_gate_exps.bias", layer);
        check_f32(up_exps_b, "ffn_up_exps.bias", layer);
        check_f32(down_exps_b, "ffn_down_exps.bias", layer);
    }
    if (s.n_shared > 0) {
        const int64_t Fs = s.n_ff_shared;
        check_shape(gate_shexp, "ffn_gate_shexp", {D, Fs}, layer);
        check_shape(up_shexp, "ffn_up_shexp", {D, Fs}, layer);
        check_shape(down_shexp, "ffn_down_shexp", {Fs, D}, layer);
    }
    if (s.shared_gate_sigmoid) {
        check_shape(gate_inp_shexp, "ffn_gate_inp_shexp", {D}, layer);
        check_f32(gate_inp_shexp, "ffn_gate_inp_shexp", layer);
    }
}

}  // namespace moe
