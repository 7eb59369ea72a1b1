// GGUF metadata -> ModelConfig, reading `<arch>.*` keys with llama.cpp's names and defaults
// (llama.cpp src/llama-model.cpp load_hparams + src/models/<arch>.cpp load_arch_hparams).
#include <algorithm>

#include "core/error.h"
#include "format/gguf.h"
#include "model/config.h"

namespace moe::model {
namespace {

class Reader {
public:
    Reader(const gguf::File& f, std::string arch) : f_(f), p_(std::move(arch) + ".") {}
    std::string key(const char* k) const { return p_ + k; }
    std::optional<int64_t> opt(const char* k) const { return f_.get_int(key(k)); }
    int64_t req(const char* k) const {
        auto v = f_.get_int(key(k));
        if (!v) throw_error("config", f_.path(), ": required key '", key(k), "' is missing");
        return *v;
    }
    // A key llama.cpp reads with get_key_or_arr: one integer, or one per layer (we keep the max,
    // which is what sizes tensors and buffers; per-layer variation is reported by inspect's table).
    std::optional<int64_t> int_or_array(const char* k) const {
        const gguf::Value* v = f_.find(key(k));
        if (!v) return std::nullopt;
        if (v->type != gguf::ValueType::ARRAY) return f_.get_int(key(k));
        auto arr = f_.get_i32_array(key(k));
        if (!arr || arr->empty()) throw_error("config", f_.path(), ": key '", key(k), "' is an empty array");
        return *std::max_element(arr->begin(), arr->end());
    }
    std::optional<double> opt_f(const char* k) const { return f_.get_float(key(k)); }
    std::optional<bool> opt_b(const char* k) const { return f_.get_bool(key(k)); }
    std::optional<std::string> opt_s(const char* k) const { return f_.get_string(key(k)); }

private:
    const gguf::File& f_;
    std::string p_;
};

}  // namespace

ModelConfig config_from_gguf(const gguf::File& f) {
    ModelConfig c;
    c.source = f.path();
    auto arch = f.get_string("general.architecture");
    if (!arch) throw_error("config", f.path(), ": required key 'general.architecture' is missing");
    if (!is_supported_arch(*arch))
        throw_error("config", f.path(), ": unsupported architecture '", *arch, "' (supported: ", supported_archs_list(), ")");
    c.arch = *arch;
    c.name = f.get_string("general.name").value_or(c.arch);
    const Reader r(f, c.arch);

    c.n_ctx_train = r.req("context_length");
    c.n_embd = r.req("embedding_length");
    c.n_layer = r.req("block_count");
    c.n_expert = r.opt("expert_count").value_or(0);
    c.n_expert_used = r.opt("expert_used_count").value_or(0);
    c.n_expert_groups = r.opt("expert_group_count").value_or(0);
    c.n_group_used = r.opt("expert_group_used_count").value_or(0);
    c.n_ff = r.int_or_array("feed_forward_length").value_or(0);
    c.n_head = r.int_or_array("attention.head_count").value_or(0);
    c.n_head_kv = r.int_or_array("attention.head_count_kv").value_or(c.n_head);
    if (c.n_head <= 0) throw_error("config", f.path(), ": key '", r.key("attention.head_count"), "' is missing or 0");
    c.head_dim_k = r.opt("attention.key_length").value_or(c.n_embd / c.n_head);
    c.head_dim_v = r.opt("attention.value_length").value_or(c.n_embd / c.n_head);
    c.n_rot = r.opt("rope.dimension_count").value_or(c.head_dim_k);
    c.rope_freq_base = static_cast<float>(r.opt_f("rope.freq_base").value_or(10000.0));
    const std::string scaling = r.opt_s("rope.scaling.type").value_or("none");
    const double factor = r.opt_f("rope.scaling.factor").value_or(0.0);
    if (scaling == "yarn") c.rope_scaling = RopeScaling::Yarn;
    else if (scaling == "linear" && factor != 0.0 && factor != 1.0) c.rope_scaling = RopeScaling::Linear;
    c.rope_scaling_factor = factor == 0.0 ? 1.0f : static_cast<float>(factor);
    c.rope_orig_ctx = r.opt("rope.scaling.original_context_length").value_or(0);
    auto eps = r.opt_f("attention.layer_norm_rms_epsilon");
    if (!eps) throw_error("config", f.path(), ": required key '", r.key("attention.layer_norm_rms_epsilon"), "' is missing");
    c.rms_eps = static_cast<float>(*eps);
    c.expert_weights_scale = static_cast<float>(r.opt_f("expert_weights_scale").value_or(1.0));
    if (c.expert_weights_scale == 0.0f) c.expert_weights_scale = 1.0f;
    if (auto g = r.opt("expert_gating_func"); g && *g >= 1 && *g <= 3) c.gating = static_cast<GatingFunc>(*g);

    const bool has_q_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
    c.tied_embeddings = f.find_tensor("output.weight") == nullptr;

    if (c.arch == kArchLlama) {
        if (c.n_expert > 0) c.n_ff_exp = c.n_ff;
        c.n_ff_shexp = r.opt("expert_shared_feed_forward_length").value_or(0);
        c.n_shared_expert = c.n_ff_shexp > 0 ? 1 : 0;
        c.expert_weights_norm = true;
        c.qkv_bias = has_q_bias;
    } else if (c.arch == kArchQwen2Moe) {
        c.n_ff_exp = r.opt("expert_feed_forward_length").value_or(c.n_expert_used > 0 ? c.n_ff / c.n_expert_used : 0);
        c.n_ff_shexp = r.opt("expert_shared_feed_forward_length").value_or(c.n_ff);
        c.n_shared_expert = 1;
        c.shexp_gate = true;
        c.qkv_bias = has_q_bias;
    } else if (c.arch == kArchQwen3Moe) {
        c.n_ff_exp = r.opt("expert_feed_forward_length").value_or(c.n_expert_used > 0 ? c.n_ff / c.n_expert_used : 0);
        c.expert_weights_norm = true;
        c.qk_norm = QkNorm::PerHead;
        c.qkv_bias = has_q_bias;
    } else if (c.arch == kArchOlmoe) {
        c.n_ff_exp = c.n_ff;
        c.qk_norm = QkNorm::Whole;
        c.qkv_bias = has_q_bias;
    } else if (c.arch == kArchDeepseek2) {
        c.n_layer_dense_lead = r.opt("leading_dense_block_count").value_or(0);
        c.q_lora_rank = r.opt("attention.q_lora_rank").value_or(0);
        c.kv_lora_rank = r.req("attention.kv_lora_rank");
        c.n_ff_exp = r.req("expert_feed_forward_length");
        c.n_shared_expert = r.req("expert_shared_count");
        c.n_ff_shexp = c.n_ff_exp * c.n_shared_expert;
        c.expert_weights_norm = r.opt_b("expert_weights_norm").value_or(false);
        c.n_layer_nextn = r.opt("nextn_predict_layers").value_or(0);
        // Newer converters store the MLA head sizes separately (key_length is then the latent) and
        // split attn_kv_b into attn_k_b / attn_v_b (llama.cpp: is_mla() when both *_mla keys exist).
        c.mla_split_kv_b = r.opt("attention.key_length_mla").has_value() && r.opt("attention.value_length_mla").has_value();
        c.rope_yarn_log_mul = static_cast<float>(r.opt_f("rope.scaling.yarn_log_multiplier").value_or(0.0));
        c.head_dim_k = r.opt("attention.key_length_mla").value_or(c.head_dim_k);
        c.head_dim_v = r.opt("attention.value_length_mla").value_or(c.head_dim_v);
        c.qk_rope_head_dim = c.n_rot;
        c.qk_nope_head_dim = c.head_dim_k - c.n_rot;
        c.v_head_dim = c.head_dim_v;
        c.selection_bias = f.find_tensor("blk." + std::to_string(c.n_layer_dense_lead) + ".exp_probs_b.bias") != nullptr;
    } else if (c.arch == kArchGptOss) {
        c.n_ff_exp = r.req("expert_feed_forward_length");
        c.sliding_window = r.req("attention.sliding_window");
        c.swa_pattern = r.opt("attention.sliding_window_pattern").value_or(2);
        c.gating = GatingFunc::SoftmaxWeight;
        c.router_bias = c.expert_bias = c.attn_sinks = true;
        c.qkv_bias = has_q_bias;
        c.attn_out_bias = true;  // llama.cpp requires attn_output.bias for gpt-oss
    }
    if (auto nv = r.opt("vocab_size")) {
        c.n_vocab = *nv;
    } else if (const gguf::Value* toks = f.find("tokenizer.ggml.tokens"); toks && toks->type == gguf::ValueType::ARRAY) {
        c.n_vocab = static_cast<int64_t>(toks->arr.size());
    } else if (const gguf::TensorInfo* t = f.find_tensor("token_embd.weight"); t && t->n_dims >= 2) {
        c.n_vocab = t->ne[1];
    }
    c.validate();
    return c;
}

}  // namespace moe::model
