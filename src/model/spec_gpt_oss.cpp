// gpt-oss (gpt-oss-20b / 120b; llama.cpp src/models/openai-moe.cpp, arch "gpt-oss"): q/k/v/o with
// biases, RoPE "neox" with YaRN as the file says (cos/sin magnitude 1 + 0.1 ln factor, as
// llama.cpp runs it when the file has no yarn_log_multiplier), attention scale 1/sqrt(head_dim),
// per-head attention sinks, sliding-window layers (window from attention.sliding_window; layer il
// slides when il % pattern < pattern - 1, i.e. the even layers for pattern 2) alternating with
// full ones, the post-attention norm post_attention_norm in the place of ffn_norm, router with bias and
// softmax over the top-k raw logits, experts with gate/up/down biases and the clamped SwiGLU
// (llama.cpp LLM_FFN_SWIGLU_OAI_MOE: alpha 1.702, limit 7).
#include "core/error.h"
#include "model/arch_spec.h"

namespace moe::model::detail {

ArchDesc describe_gpt_oss(const ModelConfig& c) {
    ArchDesc d;
    d.layer.rope_mode = RopeMode::Neox;
    d.layer.qkv_bias = c.qkv_bias;
    d.layer.o_bias = c.attn_out_bias;
    d.layer.attn_sinks = c.attn_sinks;
    d.layer.sliding_window = c.sliding_window;
    d.layer.swa_pattern = c.swa_pattern;
    d.layer.post_attn_norm = true;
    if (c.rope_scaling == model::RopeScaling::Linear)
        throw_error("model", c.source, ": rope scaling type 'linear' (key gpt-oss.rope.scaling.type) is not supported "
                    "for gpt-oss (supported: none, yarn)");
    if (c.rope_yarn_log_mul != 0.0f)
        throw_error("model", c.source, ": key gpt-oss.rope.scaling.yarn_log_multiplier = ", c.rope_yarn_log_mul,
                    " is not supported for gpt-oss (only files without it)");
    d.rope = base_rope_spec(c, d.layer.rope_mode);
    d.moe = base_moe_spec(c);
    d.moe.gating = Gating::SoftmaxSelected;
    d.moe.has_router_bias = c.router_bias;
    d.moe.has_expert_bias = c.expert_bias;
    d.moe.act = Activation::SwiGLUClamped;
    d.moe.clamp_limit = 7.0f;
    d.moe.glu_alpha = 1.702f;
    return d;
}

}  // namespace moe::model::detail
