// qwen2moe (Qwen1.5-MoE, Qwen2-57B-A14B; llama.cpp src/models/qwen2moe.cpp): q/k/v biases, routed
// experts plus one shared expert whose output is scaled by sigmoid(ffn_gate_inp_shexp . x).
#include "model/arch.h"

namespace moe::model::detail {

void catalog_qwen2moe(const ModelConfig& c, CatalogBuilder& b) {
    b.embeddings_and_head(c);
    for (int64_t il = 0; il < c.n_layer; ++il) {
        b.standard_attention(c, il);
        b.layer(il, "ffn_norm.weight", {c.n_embd});
        b.routed_experts(c, il);
        if (c.n_ff_shexp > 0) {
            if (c.shexp_gate) b.layer(il, "ffn_gate_inp_shexp.weight", {c.n_embd});
            b.shared_expert(c, il);
        }
    }
}

}  // namespace moe::model::detail
