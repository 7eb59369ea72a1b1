// qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B; llama.cpp src/models/qwen3moe.cpp): per-head q/k
// RMSNorm weights [head_dim], q width n_head*head_dim (4096 != n_embd 2048 for 30B-A3B).
#include "model/arch.h"

namespace moe::model::detail {

void catalog_qwen3moe(const ModelConfig& c, CatalogBuilder& b) {
    b.embeddings_and_head(c);
    for (int64_t il = 0; il < c.n_layer; ++il) {
        b.standard_attention(c, il);
        b.layer(il, "attn_k_norm.weight", {c.head_dim_k});
        b.layer(il, "attn_q_norm.weight", {c.head_dim_k});
        b.layer(il, "ffn_norm.weight", {c.n_embd});
        b.routed_experts(c, il);
    }
}

}  // namespace moe::model::detail
