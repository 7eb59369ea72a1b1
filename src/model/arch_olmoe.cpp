// olmoe (OLMoE-1B-7B; llama.cpp src/models/olmoe.cpp): q/k RMSNorm over the whole projection,
// experts of width feed_forward_length. llama.cpp creates both norms as [n_embd] (HF's k_norm is
// [n_head_kv*head_dim]; equal for OLMoE, and ModelConfig::validate requires n_head_kv == n_head).
#include "model/arch.h"

namespace moe::model::detail {

void catalog_olmoe(const ModelConfig& c, CatalogBuilder& b) {
    b.embeddings_and_head(c);
    for (int64_t il = 0; il < c.n_layer; ++il) {
        b.standard_attention(c, il);
        b.layer(il, "attn_q_norm.weight", {c.n_embd});
        b.layer(il, "attn_k_norm.weight", {c.n_embd});
        b.layer(il, "ffn_norm.weight", {c.n_embd});
        b.routed_experts(c, il);
    }
}

}  // namespace moe::model::detail
