#pragma once
// What the forward pass needs to know about an architecture, filled in by one file per
// architecture (spec_<arch>.cpp) from a ModelConfig. Generic code (weights.cpp, forward.cpp) reads
// only these fields and never asks for the architecture's name.
//
//   block:  x += attn_output( attention( rope( qk_norm( attn_q/k/v(rmsnorm(x)) (+ bias) ) ) ) )
//           x += ffn( rmsnorm(x) )      ffn = MoE block (MoeSpec) or dense SwiGLU
//   head:   logits = output( rmsnorm(x) )   (output = token_embd when tied)
#include <string>
#include <vector>

#include "kernels/ref/rope.h"
#include "model/config.h"
#include "moe/moe_spec.h"

namespace moe::model {

struct LayerDesc {
    RopeMode rope_mode = RopeMode::Normal;  // llama.cpp LLAMA_ROPE_TYPE_NORM (pairs) or NEOX (halves)
    QkNorm qk_norm = QkNorm::None;          // PerHead: rows of head_dim (attn_{q,k}_norm [head_dim]);
                                            // Whole: rows of n_head*head_dim (attn_{q,k}_norm [n_embd])
    bool qkv_bias = false;                  // attn_{q,k,v}.bias
    float attn_scale = 0.0f;                // 0 = 1/sqrt(head_dim_k)
    // Multi-head latent attention (deepseek2, attn_mla.cpp): q (plain or q_a -> norm -> q_b),
    // kv_a_mqa -> [latent, rope key], latent normed; the cache holds [latent, roped key] per token
    // and attention runs in the absorbed form (kv_b folded into q and the output).
    bool mla = false;
    // gpt-oss: attn_output.bias, per-head attn_sinks, sliding-window layers, post_attention_norm as the
    // FFN's input norm (bound into LayerWeights::ffn_norm).
    bool o_bias = false;
    bool attn_sinks = false;
    int64_t sliding_window = 0;  // 0 = every layer full
    int64_t swa_pattern = 0;     // layer il slides when il % pattern < pattern - 1 (llama.cpp)
    bool post_attn_norm = false;
    // Keys a query of layer il sees (0 = all earlier positions).
    int64_t window(int64_t il) const {
        if (sliding_window <= 0) return 0;
        return swa_pattern <= 0 || il % swa_pattern < swa_pattern - 1 ? sliding_window : 0;
    }
};

// Shape of one layer's KV cache rows (runtime::KvCacheSpec): standard attention caches
// n_head_kv x head_dim_k keys and values; MLA one row of kv_lora_rank + rope dims and no V
// buffer (head_dim_v 0: V is the latent part of the K row).
struct KvShape {
    int64_t n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;
};

struct ArchDesc {
    std::string arch;   // for messages only
    LayerDesc layer;    // the same for every block of the supported architectures
    MoeSpec moe;        // MoE blocks (config.is_moe_layer(il)); ignored for dense blocks
    RopeSpec rope;      // head_dim, n_rot, base, scaling from the file's metadata
    KvShape kv;         // filled by describe_arch
};

// Architectures the forward pass runs, in a stable order ("llama, qwen2moe, qwen3moe, olmoe").
const std::vector<std::string>& forward_archs();
std::string forward_archs_list();

// Throws moe::Error("[model] ...") naming the architecture or the unsupported feature (rope
// scaling type, group-limited routing, MLA, ...) and listing what is supported.
ArchDesc describe_arch(const ModelConfig& cfg);

namespace detail {
// Shared by the spec_<arch>.cpp files: the MoeSpec / RopeSpec fields every architecture fills the
// same way from the config (sizes, top-k, gating, weight norm/scale, shared expert sizes).
MoeSpec base_moe_spec(const ModelConfig& c);
RopeSpec base_rope_spec(const ModelConfig& c, RopeMode mode);

ArchDesc describe_llama(const ModelConfig& c);
ArchDesc describe_qwen2moe(const ModelConfig& c);
ArchDesc describe_qwen3moe(const ModelConfig& c);
ArchDesc describe_olmoe(const ModelConfig& c);
ArchDesc describe_deepseek2(const ModelConfig& c);
ArchDesc describe_gpt_oss(const ModelConfig& c);
}  // namespace detail

}  // namespace moe::model
