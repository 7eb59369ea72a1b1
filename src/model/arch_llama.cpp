// llama architecture: dense Llama and Mixtral-style MoE (llama.cpp src/models/llama.cpp).
// Mixtral: experts {n_embd, feed_forward_length, n_expert}; no shared expert, no biases.
#include "model/arch.h"

namespace moe::model::detail {

void catalog_llama(const ModelConfig& c, CatalogBuilder& b) {
    b.embeddings_and_head(c);
    for (int64_t il = 0; il < c.n_layer; ++il) {
        b.standard_attention(c, il);
        b.layer(il, "ffn_norm.weight", {c.n_embd});
        if (c.n_expert == 0) {
            b.dense_ffn(c, il);
        } else {
            b.routed_experts(c, il);
            if (c.n_ff_shexp > 0) b.shared_expert(c, il);  // GraniteMoE-shared style
        }
    }
}

}  // namespace moe::model::detail
