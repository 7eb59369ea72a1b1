// config.json -> ModelConfig: maps each Hugging Face model_type (and DeepSeek's own inference
// config format) to the llama.cpp architecture and fields the engine uses. The JSON itself is
// parsed by format/hf_config (hostile-input parser); this file only interprets fields.
#include <string>

#include "core/error.h"
#include "format/hf_config.h"
#include "model/config.h"

namespace moe::model {
namespace {

constexpr const char* kSupportedModelTypes =
    "mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2, deepseek_v3, gpt_oss, llama "
    "(or a DeepSeek inference config with dim/n_layers/moe_inter_dim)";

// Fields shared by every transformers config.
void read_common(const hf::Config& j, ModelConfig& c) {
    c.n_vocab = j.require_int("vocab_size");
    c.n_embd = j.require_int("hidden_size");
    c.n_layer = j.require_int("num_hidden_layers");
    c.n_head = j.require_int("num_attention_heads");
    c.n_head_kv = j.get_int("num_key_value_heads").value_or(c.n_head);
    if (c.n_head <= 0) j.fail("num_attention_heads", "must be > 0");
    const int64_t hd = j.get_int("head_dim").value_or(c.n_embd / c.n_head);
    c.head_dim_k = hd;
    c.head_dim_v = hd;
    c.n_rot = hd;
    c.n_ctx_train = j.get_int("max_position_embeddings").value_or(0);
    c.rms_eps = static_cast<float>(j.get_number("rms_norm_eps").value_or(1e-6));
    c.rope_freq_base = static_cast<float>(j.get_number("rope_theta").value_or(10000.0));
    c.tied_embeddings = j.get_bool("tie_word_embeddings").value_or(false);
    if (auto rs = j.get_object("rope_scaling")) {
        std::string type = rs->get_string("type").value_or(rs->get_string("rope_type").value_or(""));
        if (type == "yarn") c.rope_scaling = RopeScaling::Yarn;
        else if (type == "linear") c.rope_scaling = RopeScaling::Linear;
        c.rope_scaling_factor = static_cast<float>(rs->get_number("factor").value_or(1.0));
        c.rope_orig_ctx = rs->get_int("original_max_position_embeddings").value_or(0);
    }
}

// Only every-layer MoE is supported (what llama.cpp supports for these archs too).
void require_every_layer_moe(const hf::Config& j) {
    if (auto step = j.get_int("decoder_sparse_step"); step && *step != 1)
        j.fail("decoder_sparse_step", "is " + std::to_string(*step) + "; only 1 (every layer MoE) is supported");
    if (auto mlp_only = j.get_int_array("mlp_only_layers"); mlp_only && !mlp_only->empty())
        j.fail("mlp_only_layers", "is not empty; dense layers inside a qwen MoE model are not supported");
}

void map_mixtral(const hf::Config& j, ModelConfig& c) {
    read_common(j, c);
    c.arch = kArchLlama;
    c.n_expert = j.require_int("num_local_experts");
    c.n_expert_used = j.require_int("num_experts_per_tok");
    c.n_ff = j.require_int("intermediate_size");
    c.n_ff_exp = c.n_ff;  // llama arch: experts are {n_embd, feed_forward_length, n_expert}
    c.expert_weights_norm = true;
}

void map_llama(const hf::Config& j, ModelConfig& c) {
    read_common(j, c);
    c.arch = kArchLlama;
    c.n_ff = j.require_int("intermediate_size");
    c.qkv_bias = j.get_bool("attention_bias").value_or(false);
}

void map_qwen2_moe(const hf::Config& j, ModelConfig& c) {
    read_common(j, c);
    require_every_layer_moe(j);
    c.arch = kArchQwen2Moe;
    c.n_expert = j.require_int("num_experts");
    c.n_expert_used = j.require_int("num_experts_per_tok");
    c.n_ff = j.get_int("intermediate_size").value_or(0);
    c.n_ff_exp = j.require_int("moe_intermediate_size");
    c.n_ff_shexp = j.require_int("shared_expert_intermediate_size");
    c.n_shared_expert = c.n_ff_shexp > 0 ? 1 : 0;
    c.shexp_gate = c.n_shared_expert > 0;
    c.expert_weights_norm = j.get_bool("norm_topk_prob").value_or(false);
    c.qkv_bias = true;  // Qwen2 attention always has q/k/v biases
}

void map_qwen3_moe(const hf::Config& j, ModelConfig& c) {
    read_common(j, c);
    require_every_layer_moe(j);
    c.arch = kArchQwen3Moe;
    c.n_expert = j.require_int("num_experts");
    c.n_expert_used = j.require_int("num_experts_per_tok");
    c.n_ff = j.get_int("intermediate_size").value_or(0);
    c.n_ff_exp = j.require_int("moe_intermediate_size");
    c.expert_weights_norm = j.get_bool("norm_topk_prob").value_or(true);
    c.qk_norm = QkNorm::PerHead;
    c.qkv_bias = j.get_bool("attention_bias").value_or(false);
}

void map_olmoe(const hf::Config& j, ModelConfig& c) {
    read_common(j, c);
    c.arch = kArchOlmoe;
    c.n_expert = j.require_int("num_experts");
    c.n_expert_used = j.require_int("num_experts_per_tok");
    c.n_ff_exp = j.require_int("intermediate_size");
    c.n_ff = c.n_ff_exp;  // llama.cpp's olmoe reads the expert width from feed_forward_length
    c.expert_weights_norm = j.get_bool("norm_topk_prob").value_or(false);
    c.qk_norm = QkNorm::Whole;
}

void finish_mla(ModelConfig& c) {
    c.head_dim_k = c.qk_nope_head_dim + c.qk_rope_head_dim;
    c.head_dim_v = c.v_head_dim;
    c.n_rot = c.qk_rope_head_dim;
    c.n_ff_shexp = c.n_ff_exp * c.n_shared_expert;
}

void map_deepseek_hf(const hf::Config& j, ModelConfig& c) {
    read_common(j, c);
    c.arch = kArchDeepseek2;
    if (auto freq = j.get_int("moe_layer_freq"); freq && *freq != 1)
        j.fail("moe_layer_freq", "is " + std::to_string(*freq) + "; only 1 is supported");
    c.n_ff = j.require_int("intermediate_size");
    c.n_ff_exp = j.require_int("moe_intermediate_size");
    c.n_expert = j.require_int("n_routed_experts");
    c.n_expert_used = j.require_int("num_experts_per_tok");
    c.n_shared_expert = j.get_int("n_shared_experts").value_or(0);
    c.n_layer_dense_lead = j.get_int("first_k_dense_replace").value_or(0);
    c.q_lora_rank = j.get_int("q_lora_rank").value_or(0);
    c.kv_lora_rank = j.require_int("kv_lora_rank");
    c.qk_rope_head_dim = j.require_int("qk_rope_head_dim");
    c.qk_nope_head_dim = j.require_int("qk_nope_head_dim");
    c.v_head_dim = j.require_int("v_head_dim");
    c.n_expert_groups = j.get_int("n_group").value_or(0);
    c.n_group_used = j.get_int("topk_group").value_or(0);
    if (c.n_expert_groups <= 1) c.n_expert_groups = c.n_group_used = 0;
    c.expert_weights_scale = static_cast<float>(j.get_number("routed_scaling_factor").value_or(1.0));
    c.expert_weights_norm = j.get_bool("norm_topk_prob").value_or(false);
    const std::string scoring = j.get_string("scoring_func").value_or("softmax");
    if (scoring == "sigmoid") c.gating = GatingFunc::Sigmoid;
    else if (scoring != "softmax") j.fail("scoring_func", "is \"" + scoring + "\", expected \"softmax\" or \"sigmoid\"");
    c.selection_bias = j.get_string("topk_method").value_or("") == "noaux_tc";
    c.n_layer_nextn = j.get_int("num_nextn_predict_layers").value_or(0);
    finish_mla(c);
}

// DeepSeek's own inference config (inference/configs/config_*.json): field names of its ModelArgs,
// with ModelArgs' defaults for absent fields.
void map_deepseek_inference(const hf::Config& j, ModelConfig& c) {
    c.arch = kArchDeepseek2;
    c.n_vocab = j.require_int("vocab_size");
    c.n_embd = j.require_int("dim");
    c.n_ff = j.require_int("inter_dim");
    c.n_ff_exp = j.require_int("moe_inter_dim");
    c.n_layer = j.require_int("n_layers");
    c.n_layer_dense_lead = j.get_int("n_dense_layers").value_or(1);
    c.n_head = j.require_int("n_heads");
    c.n_head_kv = c.n_head;
    c.n_expert = j.require_int("n_routed_experts");
    c.n_shared_expert = j.get_int("n_shared_experts").value_or(2);
    c.n_expert_used = j.require_int("n_activated_experts");
    c.n_expert_groups = j.get_int("n_expert_groups").value_or(1);
    c.n_group_used = j.get_int("n_limited_groups").value_or(1);
    if (c.n_expert_groups <= 1) c.n_expert_groups = c.n_group_used = 0;
    c.expert_weights_scale = static_cast<float>(j.get_number("route_scale").value_or(1.0));
    const std::string scoring = j.get_string("score_func").value_or("softmax");
    if (scoring == "sigmoid") c.gating = GatingFunc::Sigmoid;
    else if (scoring != "softmax") j.fail("score_func", "is \"" + scoring + "\", expected \"softmax\" or \"sigmoid\"");
    // DeepSeek's Gate renormalises only with sigmoid scores, and has the selection bias only for
    // dim == 7168 (V3) [FACTS.md section 4].
    c.expert_weights_norm = c.gating == GatingFunc::Sigmoid;
    c.selection_bias = c.n_embd == 7168;
    c.q_lora_rank = j.get_int("q_lora_rank").value_or(0);
    c.kv_lora_rank = j.get_int("kv_lora_rank").value_or(512);
    c.qk_nope_head_dim = j.get_int("qk_nope_head_dim").value_or(128);
    c.qk_rope_head_dim = j.get_int("qk_rope_head_dim").value_or(64);
    c.v_head_dim = j.get_int("v_head_dim").value_or(128);
    const int64_t orig = j.get_int("original_seq_len").value_or(4096);
    const double factor = j.get_number("rope_factor").value_or(40.0);
    c.rope_freq_base = static_cast<float>(j.get_number("rope_theta").value_or(10000.0));
    c.rope_scaling = RopeScaling::Yarn;
    c.rope_scaling_factor = static_cast<float>(factor);
    c.rope_orig_ctx = orig;
    c.n_ctx_train = static_cast<int64_t>(static_cast<double>(orig) * factor);
    c.rms_eps = 1e-6f;
    finish_mla(c);
}

void map_gpt_oss(const hf::Config& j, ModelConfig& c) {
    read_common(j, c);
    c.arch = kArchGptOss;
    c.n_expert = j.require_int("num_local_experts");
    c.n_expert_used = j.get_int("num_experts_per_tok").value_or(j.get_int("experts_per_token").value_or(0));
    if (c.n_expert_used == 0) j.fail("num_experts_per_tok", "is missing (expected an integer)");
    c.n_ff_exp = j.require_int("intermediate_size");
    c.n_ff = c.n_ff_exp;
    c.gating = GatingFunc::SoftmaxWeight;
    c.router_bias = true;
    c.expert_bias = true;
    c.attn_sinks = true;
    c.qkv_bias = j.get_bool("attention_bias").value_or(true);
    c.attn_out_bias = c.qkv_bias;
    c.sliding_window = j.get_int("sliding_window").value_or(0);
    c.swa_pattern = 2;
    if (auto types = j.get_string_array("layer_types")) {
        // Period = distance between consecutive full-attention layers (gpt-oss alternates: 2).
        int64_t first = -1, second = -1;
        for (size_t i = 0; i < types->size(); ++i)
            if ((*types)[i] == "full_attention") {
                if (first < 0) first = static_cast<int64_t>(i);
                else if (second < 0) second = static_cast<int64_t>(i);
            }
        if (first >= 0 && second > first) c.swa_pattern = second - first;
    }
    c.swiglu_limit = static_cast<float>(j.get_number("swiglu_limit").value_or(0.0));
}

}  // namespace

namespace {
ModelConfig config_from_hf(const hf::Config& j) {
    const std::string& path = j.path();
    ModelConfig c;
    c.source = path;
    const auto model_type = j.get_string("model_type");
    if (!model_type) {
        if (j.has("dim") && j.has("n_layers") && j.has("moe_inter_dim")) {
            c.name = "deepseek (inference config)";
            map_deepseek_inference(j, c);
        } else {
            throw_error("hf-config", path, ": field 'model_type' is missing; supported model types: ",
                        kSupportedModelTypes);
        }
    } else {
        c.name = *model_type;
        const std::string& t = *model_type;
        if (t == "mixtral") map_mixtral(j, c);
        else if (t == "llama") map_llama(j, c);
        else if (t == "qwen2_moe") map_qwen2_moe(j, c);
        else if (t == "qwen3_moe") map_qwen3_moe(j, c);
        else if (t == "olmoe") map_olmoe(j, c);
        else if (t == "deepseek_v2" || t == "deepseek_v3") map_deepseek_hf(j, c);
        else if (t == "gpt_oss") map_gpt_oss(j, c);
        else
            throw_error("hf-config", path, ": unsupported model_type \"", t, "\" (supported: ", kSupportedModelTypes, ")");
    }
    c.validate();
    return c;
}

}  // namespace

ModelConfig config_from_hf_json(const std::string& path) { return config_from_hf(hf::Config::load(path)); }

ModelConfig config_from_hf_text(std::string_view text, const std::string& name) {
    return config_from_hf(hf::Config::parse(text, name));
}

}  // namespace moe::model
