#pragma once
// What a MoE block is (MoeSpec, filled in by each architecture file; generic code only reads the
// fields) and which tensors it uses (MoeWeights, views in llama.cpp GGUF layout).
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace moe {

// How router logits become selection scores and weights (FACTS.md section 4).
enum class Gating {
    Softmax,          // p = softmax(logits over all E); select top-k of p (+bias); w = p[sel]
    Sigmoid,          // s = sigmoid(logits); select top-k of s (+bias); w = s[sel]   (DeepSeek-V3)
    SoftmaxSelected,  // select top-k of raw logits (+bias); w = softmax over the k selected logits
                      // (gpt-oss, GraniteMoE; llama.cpp SOFTMAX_WEIGHT)
};

// Score of an expert group in group-limited routing (n_group > 1).
enum class GroupScore {
    Max,      // max selection score in the group (DeepSeek-V2)
    Top2Sum,  // sum of the two largest selection scores in the group (DeepSeek-V3)
};

enum class Activation {
    SwiGLU,         // silu(g) * u
    SwiGLUClamped,  // gpt-oss: g = min(g, L), u = clamp(u, -L, L); (u + 1) * g * sigmoid(alpha g)
};

struct MoeSpec {
    int64_t n_embd = 0;      // D
    int64_t n_ff = 0;        // F, per routed expert
    int n_expert = 0;        // E
    int top_k = 0;           // k
    Gating gating = Gating::Softmax;
    bool norm_topk = false;  // w /= (sum w + norm_eps) after selection
    float norm_eps = 0.0f;   // DeepSeek-V3 (HF) adds 1e-20
    float scale = 1.0f;      // routed scaling factor, applied last (DeepSeek: 2.5, 16.0, ...)
    // Group-limited top-k: E experts in n_group equal groups; keep the topk_group best groups
    // (by group_score over the selection scores) and select the top-k inside them. Masked experts
    // are set to -inf (DeepSeek's official `Gate`; HF fills 0.0, which differs only when fewer
    // than k biased scores in the kept groups are positive).
    int n_group = 1;
    int topk_group = 1;
    GroupScore group_score = GroupScore::Max;
    bool has_selection_bias = false;  // exp_probs_b [E]: added to scores for selection only
    bool has_router_bias = false;     // ffn_gate_inp.bias [E]: added to logits (gpt-oss)
    bool has_expert_bias = false;     // ffn_{gate,up,down}_exps.bias: added after each expert
                                      // projection, before the activation / the weighting (gpt-oss)
    // Shared experts: always on, n_ff_shared = total width (DeepSeek merges n_shared experts).
    int n_shared = 0;
    int64_t n_ff_shared = 0;
    bool shared_gate_sigmoid = false;  // output *= sigmoid(ffn_gate_inp_shexp . x) (Qwen1.5/2-MoE)
    Activation act = Activation::SwiGLU;
    float clamp_limit = 7.0f;    // SwiGLUClamped only
    float glu_alpha = 1.702f;    // SwiGLUClamped only

    // Throws moe::Error("[moe] ...") naming the bad field.
    void validate() const;
    std::string describe() const;  // "E=64 k=8 softmax norm ..."
};

// Weight views of one layer. Stacked experts: expert e's matrix is the slice at e * nb[2].
struct MoeWeights {
    int layer = -1;              // for errors and traces
    TensorView router;           // ffn_gate_inp        [D, E]
    TensorView router_bias;      // ffn_gate_inp.bias   [E]       (has_router_bias)
    TensorView selection_bias;   // exp_probs_b         [E]       (has_selection_bias)
    TensorView gate_exps;        // ffn_gate_exps       [D, F, E]
    TensorView up_exps;          // ffn_up_exps         [D, F, E]
    TensorView down_exps;        // ffn_down_exps       [F, D, E]
    TensorView gate_exps_b;      // ffn_gate_exps.bias  [F, E]    (has_expert_bias)
    TensorView up_exps_b;        // ffn_up_exps.bias    [F, E]
    TensorView down_exps_b;      // ffn_down_exps.bias  [D, E]
    TensorView gate_shexp;       // ffn_gate_shexp      [D, Fs]   (n_shared > 0)
    TensorView up_shexp;         // ffn_up_shexp        [D, Fs]
    TensorView down_shexp;       // ffn_down_shexp      [Fs, D]
    TensorView gate_inp_shexp;   // ffn_gate_inp_shexp  [D]       (shared_gate_sigmoid)

    // Shapes against the spec; throws moe::Error naming the tensor, its shape and the expected one.
    // Dtypes are checked by the kernel lookup (experts) and here (router, biases: f32 only).
    void validate(const MoeSpec& spec) const;
};

}  // namespace moe
