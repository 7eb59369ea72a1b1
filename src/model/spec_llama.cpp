// llama (dense Llama; Mixtral when expert_count > 0), llama.cpp src/models/llama.cpp:
// RoPE "normal" (adjacent pairs), optional q/k/v biases, routed experts with softmax -> top-k ->
// renormalise (config: expert_weights_norm = true), optional shared expert without a gate.
#include "model/arch_spec.h"

namespace moe::model::detail {

ArchDesc describe_llama(const ModelConfig& c) {
    ArchDesc d;
    d.layer.rope_mode = RopeMode::Normal;
    d.layer.qkv_bias = c.qkv_bias;
    d.moe = base_moe_spec(c);
    d.rope = base_rope_spec(c, d.layer.rope_mode);
    return d;
}

}  // namespace moe::model::detail
