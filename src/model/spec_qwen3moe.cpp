// qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B), llama.cpp src/models/qwen3moe.cpp: RMSNorm of every
// q and k head (weights [head_dim]) before RoPE "neox", softmax top-k with renormalisation.
#include "model/arch_spec.h"

namespace moe::model::detail {

ArchDesc describe_qwen3moe(const ModelConfig& c) {
    ArchDesc d;
    d.layer.rope_mode = RopeMode::Neox;
    d.layer.qk_norm = QkNorm::PerHead;
    d.layer.qkv_bias = c.qkv_bias;
    d.moe = base_moe_spec(c);
    d.rope = base_rope_spec(c, d.layer.rope_mode);
    return d;
}

}  // namespace moe::model::detail
