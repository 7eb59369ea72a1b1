// deepseek2 (DeepSeek-V2, V2-Lite, V3; llama.cpp src/models/deepseek2.cpp), counted from configs.
// MLA attention in the classic GGUF layout (attn_kv_b) or the split attn_k_b/attn_v_b that newer
// converters write (same parameter count), q_lora_rank 0 = plain attn_q (V2-Lite), leading dense
// blocks, shared experts of width n_ff_exp * n_shared, exp_probs_b selection bias for V3. The MTP
// (nextn) block is not part of the main model and is not listed.
#include "model/arch.h"

namespace moe::model::detail {

void catalog_deepseek2(const ModelConfig& c, CatalogBuilder& b) {
    b.embeddings_and_head(c);
    const int64_t qk_head = c.qk_nope_head_dim + c.qk_rope_head_dim;
    for (int64_t il = 0; il < c.n_layer; ++il) {
        b.layer(il, "attn_norm.weight", {c.n_embd});
        if (c.q_lora_rank > 0) b.layer(il, "attn_q_a_norm.weight", {c.q_lora_rank});
        b.layer(il, "attn_kv_a_norm.weight", {c.kv_lora_rank});
        if (c.q_lora_rank > 0) {
            b.layer(il, "attn_q_a.weight", {c.n_embd, c.q_lora_rank});
            b.layer(il, "attn_q_b.weight", {c.q_lora_rank, c.n_head * qk_head});
        } else {
            b.layer(il, "attn_q.weight", {c.n_embd, c.n_head * qk_head});
        }
        b.layer(il, "attn_kv_a_mqa.weight", {c.n_embd, c.kv_lora_rank + c.qk_rope_head_dim});
        if (c.mla_split_kv_b) {  // the same matrix, split per head (k part transposed)
            b.layer(il, "attn_k_b.weight", {c.qk_nope_head_dim, c.kv_lora_rank, c.n_head});
            b.layer(il, "attn_v_b.weight", {c.kv_lora_rank, c.v_head_dim, c.n_head});
        } else {
            b.layer(il, "attn_kv_b.weight", {c.kv_lora_rank, c.n_head * (c.qk_nope_head_dim + c.v_head_dim)});
        }
        b.layer(il, "attn_output.weight", {c.n_head * c.v_head_dim, c.n_embd});
        b.layer(il, "ffn_norm.weight", {c.n_embd});
        if (!c.is_moe_layer(il)) {
            b.dense_ffn(c, il);
            continue;
        }
        b.layer(il, "ffn_gate_inp.weight", {c.n_embd, c.n_expert});
        if (c.selection_bias) b.layer(il, "exp_probs_b.bias", {c.n_expert});
        b.layer(il, "ffn_down_exps.weight", {c.n_ff_exp, c.n_embd, c.n_expert});
        b.layer(il, "ffn_gate_exps.weight", {c.n_embd, c.n_ff_exp, c.n_expert});
        b.layer(il, "ffn_up_exps.weight", {c.n_embd, c.n_ff_exp, c.n_expert});
        if (c.n_shared_expert > 0) b.shared_expert(c, il);
    }
}

}  // namespace moe::model::detail
