#pragma once
// ModelConfig: the architecture name plus every hyperparameter the engine needs, in llama.cpp's
// vocabulary (GGUF `<arch>.*` keys). Built from a GGUF file (config_from_gguf, config_gguf.cpp),
// from a Hugging Face / DeepSeek config.json (config_from_hf_json, config_hf.cpp) or from a preset
// (presets.h). Everything downstream (tensor catalog, parameter counts, gen, the forward pass)
// reads only these fields.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moe::gguf {
class File;
}

namespace moe::model {

// Architectures, named exactly as llama.cpp's general.architecture values.
inline constexpr const char* kArchLlama = "llama";        // Llama (dense) and Mixtral (n_expert > 0)
inline constexpr const char* kArchQwen2Moe = "qwen2moe";  // Qwen1.5-MoE, Qwen2-57B-A14B
inline constexpr const char* kArchQwen3Moe = "qwen3moe";  // Qwen3-30B-A3B, Qwen3-235B-A22B
inline constexpr const char* kArchOlmoe = "olmoe";        // OLMoE-1B-7B
inline constexpr const char* kArchDeepseek2 = "deepseek2";  // DeepSeek-V2(-Lite), V3 (MLA)
inline constexpr const char* kArchGptOss = "gpt-oss";     // gpt-oss-20b/120b

// All architectures the catalog and counts know, in a stable order (for error messages).
const std::vector<std::string>& supported_archs();
bool is_supported_arch(const std::string& arch);
std::string supported_archs_list();  // "llama, qwen2moe, ..."

// llama.cpp's expert_gating_func values (GGUF `<arch>.expert_gating_func`).
enum class GatingFunc : uint32_t { Softmax = 1, Sigmoid = 2, SoftmaxWeight = 3 };
// q/k normalisation inside attention.
enum class QkNorm { None, PerHead, Whole };  // qwen3moe: per head [head_dim]; olmoe: whole projection
enum class RopeScaling { None, Linear, Yarn };

const char* gating_func_name(GatingFunc g);
const char* qk_norm_name(QkNorm q);
const char* rope_scaling_name(RopeScaling r);

struct ModelConfig {
    std::string arch;        // llama.cpp architecture name (kArch*)
    std::string name;        // general.name / preset name / model_type
    std::string source;      // where it came from (file path or "preset:NAME"), for messages

    // Shapes.
    int64_t n_vocab = 0;
    int64_t n_embd = 0;
    int64_t n_layer = 0;
    int64_t n_head = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim_k = 0;  // <arch>.attention.key_length (default n_embd / n_head)
    int64_t head_dim_v = 0;  // <arch>.attention.value_length
    int64_t n_ff = 0;        // dense FFN width (dense models, deepseek2's leading dense layers)
    int64_t n_ctx_train = 0;

    // Mixture of experts.
    int64_t n_expert = 0;
    int64_t n_expert_used = 0;
    int64_t n_ff_exp = 0;          // per routed expert
    int64_t n_shared_expert = 0;   // number of shared experts (deepseek2: n_shared; qwen2moe: 1)
    int64_t n_ff_shexp = 0;        // total width of the shared-expert FFN (deepseek2: n_ff_exp * n_shared)
    bool shexp_gate = false;       // qwen2moe: shared output * sigmoid(ffn_gate_inp_shexp . x)
    int64_t n_layer_dense_lead = 0;  // leading dense blocks (deepseek2 first_k_dense_replace)
    int64_t n_layer_nextn = 0;       // MTP layers in the checkpoint (not part of the main model)

    // Router.
    GatingFunc gating = GatingFunc::Softmax;
    bool expert_weights_norm = false;  // renormalise the top-k weights to sum 1
    float expert_weights_scale = 1.0f; // routed_scaling_factor
    int64_t n_expert_groups = 0;       // group-limited routing (0 = off)
    int64_t n_group_used = 0;
    bool selection_bias = false;       // deepseek-v3 e_score_correction_bias (exp_probs_b)
    bool router_bias = false;          // gpt-oss ffn_gate_inp.bias

    // Attention.
    QkNorm qk_norm = QkNorm::None;
    bool qkv_bias = false;       // q/k/v projection biases (qwen2moe, gpt-oss)
    bool attn_out_bias = false;  // o projection bias (gpt-oss)
    bool attn_sinks = false;     // gpt-oss learned per-head sink logits
    int64_t sliding_window = 0;  // gpt-oss: 128 on every other layer
    int64_t swa_pattern = 0;     // period of the sliding/full pattern (gpt-oss 2)
    bool expert_bias = false;    // gpt-oss biases on the expert projections
    float swiglu_limit = 0.0f;   // gpt-oss clamp

    // MLA (deepseek2).
    int64_t q_lora_rank = 0;     // 0 = plain q projection (V2-Lite)
    int64_t kv_lora_rank = 0;
    int64_t qk_rope_head_dim = 0;
    int64_t qk_nope_head_dim = 0;
    int64_t v_head_dim = 0;
    bool mla_split_kv_b = false;  // attn_k_b + attn_v_b (newer converters, key_length_mla) instead of attn_kv_b
    float rope_yarn_log_mul = 0.0f;  // rope.scaling.yarn_log_multiplier as stored (0.1 * mscale_all_dim)

    // Position encoding and norms.
    int64_t n_rot = 0;                  // rope.dimension_count
    float rope_freq_base = 10000.0f;
    RopeScaling rope_scaling = RopeScaling::None;
    float rope_scaling_factor = 1.0f;
    int64_t rope_orig_ctx = 0;
    float rms_eps = 1e-5f;

    bool tied_embeddings = false;  // no output.weight; the head reuses token_embd

    bool is_moe() const { return n_expert > 0; }
    bool is_mla() const { return kv_lora_rank > 0; }
    // Does block il use the MoE FFN (else the dense FFN)?
    bool is_moe_layer(int64_t il) const { return n_expert > 0 && il >= n_layer_dense_lead; }

    // Checks internal consistency (positive dims, k <= E, head dims, MLA fields); throws
    // moe::Error("[config] <source>: <field> ...") naming the offending field.
    void validate() const;
};

// Reads `general.architecture` and the `<arch>.*` keys as llama.cpp does (same names, same
// defaults). n_vocab comes from `<arch>.vocab_size`, else the length of tokenizer.ggml.tokens,
// else output/token_embd's ne1. Throws moe::Error naming the file and the key.
ModelConfig config_from_gguf(const gguf::File& file);

// Maps a Hugging Face config.json (model_type mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2,
// deepseek_v3, gpt_oss, llama) or a DeepSeek inference config (dim / n_layers / moe_inter_dim ...)
// to a ModelConfig. Throws moe::Error naming the file and the missing or mistyped field.
ModelConfig config_from_hf_json(const std::string& path);
// Same over text in memory (`name` is used in messages; fuzz/targets/hf_config.cpp drives it).
ModelConfig config_from_hf_text(std::string_view text, const std::string& name = "<memory>");

}  // namespace moe::model
