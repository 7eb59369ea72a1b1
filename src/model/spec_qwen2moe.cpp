// qwen2moe (Qwen1.5-MoE, Qwen2-57B-A14B), llama.cpp src/models/qwen2moe.cpp: q/k/v biases, RoPE
// "neox" (halves), softmax top-k without renormalisation, one shared expert whose output is scaled
// by sigmoid(ffn_gate_inp_shexp . x).
#include "model/arch_spec.h"

namespace moe::model::detail {

ArchDesc describe_qwen2moe(const ModelConfig& c) {
    ArchDesc d;
    d.layer.rope_mode = RopeMode::Neox;
    d.layer.qkv_bias = c.qkv_bias;
    d.moe = base_moe_spec(c);
    d.moe.shared_gate_sigmoid = c.shexp_gate && d.moe.n_shared > 0;
    d.rope = base_rope_spec(c, d.layer.rope_mode);
    return d;
}

}  // namespace moe::model::detail
