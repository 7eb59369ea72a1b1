// olmoe (OLMoE-1B-7B), llama.cpp src/models/olmoe.cpp: RMSNorm over the whole q and k projections
// (weights [n_embd]) before RoPE "neox", softmax top-k without renormalisation.
#include "model/arch_spec.h"

namespace moe::model::detail {

ArchDesc describe_olmoe(const ModelConfig& c) {
    ArchDesc d;
    d.layer.rope_mode = RopeMode::Neox;
    d.layer.qk_norm = QkNorm::Whole;
    d.layer.qkv_bias = c.qkv_bias;
    d.moe = base_moe_spec(c);
    d.rope = base_rope_spec(c, d.layer.rope_mode);
    return d;
}

}  // namespace moe::model::detail
