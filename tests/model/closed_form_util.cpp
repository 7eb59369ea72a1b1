#include "closed_form_util.h"

ClosedForm closed_form_counts(const moe::model::ModelConfig& c) {
    using moe::model::QkNorm;
    const uint64_t V = c.n_vocab, D = c.n_embd, L = c.n_layer, H = c.n_head, Hkv = c.n_head_kv, hd = c.head_dim_k;
    const uint64_t E = c.n_expert, k = c.n_expert_used, F = c.n_ff_exp, S = c.n_ff_shexp;
    const uint64_t embd = V * D * (c.tied_embeddings ? 1 : 2) + D;  // token_embd (+ output) + output_norm
    // q, k, v, o projections + attn_norm
    uint64_t attn = D * H * hd + 2 * D * Hkv * hd + H * hd * D + D;
    if (c.qkv_bias) attn += H * hd + 2 * Hkv * hd;
    if (c.qk_norm == QkNorm::PerHead) attn += 2 * hd;
    if (c.qk_norm == QkNorm::Whole) attn += 2 * D;
    const uint64_t shared = S > 0 ? 3 * D * S + (c.shexp_gate ? D : 0) : 0;
    const uint64_t fixed = attn + D /*ffn_norm*/ + D * E /*router*/ + shared;
    return {embd + L * (fixed + 3 * D * F * E), embd + L * (fixed + 3 * D * F * k)};
}
