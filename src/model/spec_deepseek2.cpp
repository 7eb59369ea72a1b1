// deepseek2 (DeepSeek-V2, V2-Lite, V3, R1; llama.cpp src/models/deepseek2.cpp): MLA attention
// (attn_mla.cpp), RoPE "normal" (pairs) on the rope part of q and on the shared rope key only,
// leading dense blocks, shared experts always added, softmax (V2) or sigmoid + exp_probs_b
// selection bias (V3) routing, optionally group-limited, normalised and scaled as the file says.
#include <cmath>

#include "core/error.h"
#include "model/arch_spec.h"

namespace moe::model::detail {

ArchDesc describe_deepseek2(const ModelConfig& c) {
    ArchDesc d;
    d.layer.rope_mode = RopeMode::Normal;
    d.layer.mla = true;
    if (c.rope_scaling == model::RopeScaling::Linear)
        throw_error("model", c.source, ": rope scaling type 'linear' (key deepseek2.rope.scaling.type) is not supported "
                    "for deepseek2 (supported: none, yarn)");
    d.rope = base_rope_spec(c, d.layer.rope_mode);
    d.rope.head_dim = c.qk_rope_head_dim;  // RoPE runs on the rope part only (rows of n_rot)
    d.rope.n_rot = c.qk_rope_head_dim;
    // YaRN as llama.cpp runs deepseek2 (llama-context.cpp + models/deepseek2.cpp): the cos/sin
    // magnitude 1 + 0.1 ln(factor) is cancelled (attn_factor = its inverse), and the attention
    // scale takes mscale^2 with mscale = 1 + 0.1 * mscale_all_dim * ln(factor), where the file's
    // yarn_log_multiplier is 0.1 * mscale_all_dim.
    double mscale = 1.0;
    if (c.rope_scaling == model::RopeScaling::Yarn && c.rope_scaling_factor > 1.0f) {
        const double lf = std::log(static_cast<double>(c.rope_scaling_factor));
        d.rope.attn_factor = static_cast<float>(1.0 / (1.0 + 0.1 * lf));
        mscale = 1.0 + static_cast<double>(c.rope_yarn_log_mul) * lf;
    }
    d.layer.attn_scale =
        static_cast<float>(mscale * mscale / std::sqrt(static_cast<double>(c.qk_nope_head_dim + c.qk_rope_head_dim)));

    d.moe = base_moe_spec(c);
    d.moe.has_selection_bias = c.selection_bias;
    if (c.n_expert_groups > 1) {
        d.moe.n_group = static_cast<int>(c.n_expert_groups);
        d.moe.topk_group = static_cast<int>(c.n_group_used);
        // DeepSeek's Gate: top-2 sum when there is a selection bias (V3), else the max (V2).
        // llama.cpp always takes the top-2 sum; the two agree for V3-style files.
        d.moe.group_score = c.selection_bias ? GroupScore::Top2Sum : GroupScore::Max;
    }
    d.kv = KvShape{1, c.kv_lora_rank + c.qk_rope_head_dim, 0};
    return d;
}

}  // namespace moe::model::detail
