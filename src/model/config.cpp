// ModelConfig: architecture registry and consistency checks (constructors live in config_gguf.cpp
// and config_hf.cpp).
#include "model/config.h"

#include <algorithm>

#include "core/error.h"

namespace moe::model {

const std::vector<std::string>& supported_archs() {
    static const std::vector<std::string> archs = {kArchLlama, kArchQwen2Moe, kArchQwen3Moe,
                                                   kArchOlmoe, kArchDeepseek2, kArchGptOss};
    return archs;
}

bool is_supported_arch(const std::string& arch) {
    const auto& a = supported_archs();
    return std::find(a.begin(), a.end(), arch) != a.end();
}

std::string supported_archs_list() {
    std::string s;
    for (const auto& a : supported_archs()) s += (s.empty() ? "" : ", ") + a;
    return s;
}

const char* gating_func_name(GatingFunc g) {
    switch (g) {
        case GatingFunc::Softmax: return "softmax";
        case GatingFunc::Sigmoid: return "sigmoid";
        case GatingFunc::SoftmaxWeight: return "softmax-after-topk";
    }
    return "?";
}

const char* qk_norm_name(QkNorm q) {
    switch (q) {
        case QkNorm::None: return "none";
        case QkNorm::PerHead: return "per-head";
        case QkNorm::Whole: return "whole-projection";
    }
    return "?";
}

const char* rope_scaling_name(RopeScaling r) {
    switch (r) {
        case RopeScaling::None: return "none";
        case RopeScaling::Linear: return "linear";
        case RopeScaling::Yarn: return "yarn";
    }
    return "?";
}

namespace {
// Upper bounds far above any real model; they keep every count well inside int64 and reject
// hostile values before any arithmetic.
constexpr int64_t kMaxDim = int64_t(1) << 24;     // embedding, ffn, vocab, head dims
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxExperts = int64_t(1) << 16;
}  // namespace

void ModelConfig::validate() const {
    const std::string where = source.empty() ? std::string("<config>") : source;
    auto fail = [&](const std::string& field, auto&&... what) {
        throw_error("config", where, ": ", field, " ", what...);
    };
    auto positive = [&](const char* field, int64_t v, int64_t max) {
        if (v <= 0) fail(field, "is ", v, " (must be > 0)");
        if (v > max) fail(field, "is ", v, " (larger than the supported maximum ", max, ")");
    };
    auto nonneg = [&](const char* field, int64_t v, int64_t max) {
        if (v < 0) fail(field, "is ", v, " (must be >= 0)");
        if (v > max) fail(field, "is ", v, " (larger than the supported maximum ", max, ")");
    };
    if (!is_supported_arch(arch))
        throw_error("config", where, ": unsupported architecture '", arch, "' (supported: ", supported_archs_list(), ")");
    positive("n_vocab", n_vocab, kMaxDim);
    positive("n_embd", n_embd, kMaxDim);
    positive("n_layer", n_layer, kMaxLayers);
    positive("n_head", n_head, kMaxDim);
    positive("n_head_kv", n_head_kv, kMaxDim);
    positive("head_dim_k", head_dim_k, kMaxDim);
    positive("head_dim_v", head_dim_v, kMaxDim);
    nonneg("n_ff", n_ff, kMaxDim);
    nonneg("n_ctx_train", n_ctx_train, int64_t(1) << 40);
    if (n_head % n_head_kv != 0) fail("n_head", n_head, " is not a multiple of n_head_kv ", n_head_kv);
    nonneg("n_rot", n_rot, head_dim_k);
    nonneg("n_expert", n_expert, kMaxExperts);
    nonneg("n_layer_dense_lead", n_layer_dense_lead, n_layer);
    nonneg("n_shared_expert", n_shared_expert, kMaxExperts);
    nonneg("n_ff_shexp", n_ff_shexp, kMaxDim);
    const bool moe_arch = arch != kArchLlama;
    if (moe_arch && n_expert == 0) fail("n_expert", "is 0, but architecture ", arch, " is a mixture of experts");
    if (n_expert > 0) {
        positive("n_expert_used", n_expert_used, n_expert);
        positive("n_ff_exp", n_ff_exp, kMaxDim);
        if (n_expert_groups > 1) {
            if (n_expert % n_expert_groups != 0)
                fail("n_expert_groups", n_expert_groups, " does not divide n_expert ", n_expert);
            positive("n_group_used", n_group_used, n_expert_groups);
        }
    } else {
        if (n_expert_used != 0) fail("n_expert_used", "is ", n_expert_used, " but n_expert is 0");
    }
    if (n_expert == 0 || n_layer_dense_lead > 0) positive("n_ff", n_ff, kMaxDim);
    if (n_shared_expert > 0) positive("n_ff_shexp", n_ff_shexp, kMaxDim);
    if (arch == kArchDeepseek2) {
        nonneg("q_lora_rank", q_lora_rank, kMaxDim);
        positive("kv_lora_rank", kv_lora_rank, kMaxDim);
        positive("qk_rope_head_dim", qk_rope_head_dim, kMaxDim);
        positive("qk_nope_head_dim", qk_nope_head_dim, kMaxDim);
        positive("v_head_dim", v_head_dim, kMaxDim);
        if (head_dim_k != qk_nope_head_dim + qk_rope_head_dim)
            fail("head_dim_k", head_dim_k, " != qk_nope_head_dim + qk_rope_head_dim (", qk_nope_head_dim, " + ",
                 qk_rope_head_dim, ")");
    }
    // llama.cpp's olmoe and qwen2moe create attn_q/attn_output (and olmoe's k norm) as n_embd wide.
    if ((arch == kArchOlmoe || arch == kArchQwen2Moe) && n_head * head_dim_k != n_embd)
        fail("n_head", "* head_dim (", n_head, " * ", head_dim_k, ") must equal n_embd ", n_embd, " for ", arch);
    if (arch == kArchOlmoe && n_head_kv != n_head)
        fail("n_head_kv", "is ", n_head_kv, "; llama.cpp's olmoe needs n_head_kv == n_head (", n_head, ")");
    if (arch == kArchGptOss) nonneg("sliding_window", sliding_window, int64_t(1) << 32);
    if (!(rms_eps > 0.0f) || rms_eps > 1.0f) fail("rms_eps", "is ", rms_eps, " (expected a small positive number)");
}

}  // namespace moe::model
