// Registry of the architectures the forward pass runs, and the config -> MoeSpec / RopeSpec
// mapping they share (per-architecture choices live in spec_<arch>.cpp).
#include "model/arch_spec.h"

#include "core/error.h"

namespace moe::model {

const std::vector<std::string>& forward_archs() {
    static const std::vector<std::string> k = {kArchLlama, kArchQwen2Moe, kArchQwen3Moe, kArchOlmoe,
                                                kArchDeepseek2, kArchGptOss};
    return k;
}

std::string forward_archs_list() {
    std::string s;
    for (const auto& a : forward_archs()) s += (s.empty() ? "" : ", ") + a;
    return s;
}

namespace detail {

MoeSpec base_moe_spec(const ModelConfig& c) {
    MoeSpec s;
    if (!c.is_moe()) return s;
    s.n_embd = c.n_embd;
    s.n_ff = c.n_ff_exp;
    s.n_expert = static_cast<int>(c.n_expert);
    s.top_k = static_cast<int>(c.n_expert_used);
    switch (c.gating) {
        case GatingFunc::Softmax: s.gating = Gating::Softmax; break;
        case GatingFunc::Sigmoid: s.gating = Gating::Sigmoid; break;
        case GatingFunc::SoftmaxWeight: s.gating = Gating::SoftmaxSelected; break;
    }
    s.norm_topk = c.expert_weights_norm;
    s.scale = c.expert_weights_scale;
    if (c.n_ff_shexp > 0) {
        s.n_shared = static_cast<int>(c.n_shared_expert > 0 ? c.n_shared_expert : 1);
        s.n_ff_shared = c.n_ff_shexp;
    }
    return s;
}

RopeSpec base_rope_spec(const ModelConfig& c, RopeMode mode) {
    RopeSpec r;
    r.mode = mode;
    r.head_dim = c.head_dim_k;
    r.n_rot = c.n_rot;
    r.freq_base = c.rope_freq_base;
    switch (c.rope_scaling) {
        case model::RopeScaling::None: r.scaling = moe::RopeScaling::None; break;
        case model::RopeScaling::Linear: r.scaling = moe::RopeScaling::Linear; break;
        case model::RopeScaling::Yarn: r.scaling = moe::RopeScaling::Yarn; break;
    }
    r.factor = c.rope_scaling_factor;
    // llama.cpp: yarn_ext_factor defaults to 1 for YaRN models and 0 otherwise; attn_factor 1.
    r.ext_factor = c.rope_scaling == model::RopeScaling::Yarn ? 1.0f : 0.0f;
    r.n_ctx_orig = c.rope_orig_ctx > 0 ? c.rope_orig_ctx : c.n_ctx_train;
    return r;
}

}  // namespace detail

ArchDesc describe_arch(const ModelConfig& c) {
    auto unsupported = [&](const char* what) {
        throw_error("model", c.source, ": architecture '", c.arch, "' with ", what,
                    " is not supported by the forward pass (supported: ", forward_archs_list(),
                    "; expert groups, selection bias and MLA: deepseek2 only; sinks, sliding window and "
                    "router/expert biases: gpt-oss only)");
    };
    ArchDesc d;
    if (c.arch == kArchLlama) d = detail::describe_llama(c);
    else if (c.arch == kArchQwen2Moe) d = detail::describe_qwen2moe(c);
    else if (c.arch == kArchQwen3Moe) d = detail::describe_qwen3moe(c);
    else if (c.arch == kArchOlmoe) d = detail::describe_olmoe(c);
    else if (c.arch == kArchDeepseek2) d = detail::describe_deepseek2(c);
    else if (c.arch == kArchGptOss) d = detail::describe_gpt_oss(c);
    else
        throw_error("model", c.source, ": architecture '", c.arch, "' is not supported by the forward pass (supported: ",
                    forward_archs_list(), ")");
    d.arch = c.arch;
    const bool ds2 = c.arch == kArchDeepseek2, oss = c.arch == kArchGptOss;
    if (c.is_mla() && !ds2) unsupported("MLA attention");
    if (c.n_expert_groups > 1 && !ds2) unsupported("group-limited routing");
    if ((c.selection_bias && !ds2) || ((c.router_bias || c.expert_bias) && !oss)) unsupported("router/expert biases");
    if ((c.attn_sinks || c.sliding_window > 0) && !oss) unsupported("attention sinks / sliding window");
    if (c.n_layer_dense_lead > 0 && c.n_ff <= 0) unsupported("leading dense blocks without feed_forward_length");
    if (c.is_moe()) d.moe.validate();
    if (!d.layer.mla) d.kv = KvShape{c.n_head_kv, c.head_dim_k, c.head_dim_v};
    rope_validate(d.rope);
    return d;
}

}  // namespace moe::model
