#include "closed_form_util.h"

ClosedForm closed_form_counts(const moe::model::ModelConfig& c) {
    using moe::model::QkNorm;
    const uint64_t V = c.n_vocab, D = c.n_embd, L = c.n_layer, H = c.n_head, Hkv = c.n_head_kv, hd = c.head_dim_k;
    const uint64_t E = c.n_expert, k = c.n_expert_used, F = c.n_ff_exp, S = c.n_ff_shexp;
    const uint64_t embd = V * D * (c.tied_embeddings ? 1 : 2) + D;  // token_embd (+ output) + output_norm
    // q, k, v, o projections + attn_norm
    uint64_t attn = D * H * hd + 2 * D * Hkv * hd + H * hd * D + D;
    if (c.qkv_bias) attn += H * hd + 2 * Hkv * hd;
    if (c.attn_out_bias) attn += D;
    if (c.attn_sinks) attn += H;  // one sink logit per head
    if (c.qk_norm == QkNorm::PerHead) attn += 2 * hd;
    if (c.qk_norm == QkNorm::Whole) attn += 2 * D;
    if (c.is_mla()) {
        // MLA: q (plain D x H*dq, or D x q_lora + q_lora norm + q_lora x H*dq), kv_a D x (r + rope),
        // kv_a norm r, kv_b r x H*(nope + v), o H*v x D, attn_norm.
        const uint64_t Q = c.q_lora_rank, R = c.kv_lora_rank, dq = c.qk_nope_head_dim + c.qk_rope_head_dim;
        const uint64_t q = Q > 0 ? D * Q + Q + Q * H * dq : D * H * dq;
        attn = q + D * (R + c.qk_rope_head_dim) + R + R * H * (c.qk_nope_head_dim + c.v_head_dim) +
               H * c.v_head_dim * D + D;
    }
    const uint64_t shared = S > 0 ? 3 * D * S + (c.shexp_gate ? D : 0) : 0;
    const uint64_t fixed = attn + D /*ffn_norm*/ + D * E /*router*/ + shared + (c.selection_bias ? E : 0) +
                           (c.router_bias ? E : 0);
    // gpt-oss expert biases: gate and up [F], down [D] per expert
    const uint64_t eb = c.expert_bias ? 2 * F + D : 0;
    // Leading dense layers (deepseek2): a dense SwiGLU of width n_ff instead of router + experts.
    const uint64_t Ld = c.n_layer_dense_lead, Lm = L - Ld;
    const uint64_t dense = attn + D + 3 * D * c.n_ff;
    return {embd + Ld * dense + Lm * (fixed + (3 * D * F + eb) * E), embd + Ld * dense + Lm * (fixed + (3 * D * F + eb) * k)};
}
