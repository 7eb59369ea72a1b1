// gpt-oss (llama.cpp src/models/openai-moe.cpp; arch name "gpt-oss"), counted from configs:
// attention with q/k/v/o biases and per-head sinks, post-attention norm, router with bias,
// experts with biases ({n_ff_exp, n_expert} / {n_embd, n_expert}).
#include "model/arch.h"

namespace moe::model::detail {

void catalog_gpt_oss(const ModelConfig& c, CatalogBuilder& b) {
    b.embeddings_and_head(c);
    for (int64_t il = 0; il < c.n_layer; ++il) {
        b.layer(il, "post_attention_norm.weight", {c.n_embd});
        b.standard_attention(c, il);  // attn_norm, q/k/v (+ biases), attn_output (+ bias)
        if (c.attn_sinks) b.layer(il, "attn_sinks.weight", {c.n_head});
        b.routed_experts(c, il);
        if (c.router_bias) b.layer(il, "ffn_gate_inp.bias", {c.n_expert});
        if (c.expert_bias) {
            b.layer(il, "ffn_gate_exps.bias", {c.n_ff_exp, c.n_expert});
            b.layer(il, "ffn_down_exps.bias", {c.n_embd, c.n_expert});
            b.layer(il, "ffn_up_exps.bias", {c.n_ff_exp, c.n_expert});
        }
    }
}

}  // namespace moe::model::detail
