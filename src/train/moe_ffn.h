#pragma once
// The MoE FFN of one block for training, forward and backward (f32 / f64), qwen3moe semantics:
//   logits = xn Wr^T [N, E], p = softmax(logits), top-k of (p + selection bias) (ties: lower
//   index), w = p[sel] / sum p[sel]; out[t] = sum_j w_j down_e(silu(gate_e x) * up_e x).
// E == 1 is a dense SwiGLU FFN (no router, w = 1): the dense baseline.
// qwen2moe variant (norm_w = false, Fs > 0): w = p[sel] without renormalisation, plus a shared
// expert every token takes, scaled by a sigmoid gate (llama.cpp qwen2moe):
//   out[t] += sigmoid(g . x) * down_s(silu(gate_s x) * up_s x)   (g [D], gate_s/up_s [Fs, D], down_s [D, Fs]).
// Training-only terms, added to the loss (scaled as documented on MoeLossSpec):
//   aux (Switch/GShard): coef * E * sum_i f_i P_i, f_i = share of the N*k slots routed to i
//                        (no gradient), P_i = mean_t p[t, i];
//   z (router z-loss):   coef * mean_t logsumexp(logits_t)^2.
// The selection bias (DeepSeek-V3 aux-loss-free balancing) moves only the choice, never the
// weights, and gets no gradient; the trainer nudges it between steps.
// Tokens are grouped per expert (counting sort: expert, then token order) so each expert runs
// three GEMMs over its rows; every sum has a fixed order, so results are thread-count independent.
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"

namespace moe::train {

struct MoeShape {
    int64_t N = 0, D = 0, F = 0;
    int E = 1, k = 1;
    int64_t Fs = 0;       // shared expert width (0 = none)
    bool norm_w = true;   // renormalise the k chosen probabilities (qwen3moe) or not (qwen2moe)
};

struct MoeLossSpec {
    double aux = 0;  // coefficient of the Switch load-balancing loss
    double z = 0;    // coefficient of the router z-loss
};

template <typename R>
struct MoeWeightsT {
    const R* router = nullptr;  // [E, D] (null when E == 1)
    const R* gate = nullptr;    // [E, F, D]
    const R* up = nullptr;      // [E, F, D]
    const R* down = nullptr;    // [E, D, F]
    const float* sel_bias = nullptr;  // [E] or null
    const R* sh_gate_inp = nullptr;   // [D] shared-expert gate (when Fs > 0)
    const R *sh_gate = nullptr, *sh_up = nullptr;  // [Fs, D]
    const R* sh_down = nullptr;       // [D, Fs]
};

template <typename R>
struct MoeGradsT {
    R *router = nullptr, *gate = nullptr, *up = nullptr, *down = nullptr;
    R *sh_gate_inp = nullptr, *sh_gate = nullptr, *sh_up = nullptr, *sh_down = nullptr;
};

// What forward keeps for backward (sized by forward), plus routing results for statistics.
template <typename R>
struct MoeSaved {
    std::vector<R> probs, lse;      // [N, E], [N]
    std::vector<int32_t> ids;       // [N, k]
    std::vector<R> w;               // [N, k]
    std::vector<int64_t> off;       // [E + 1] first assignment of each expert
    std::vector<int32_t> slot;      // [N*k] assignment -> slot t*k + j
    std::vector<int32_t> inv;       // [N*k] slot -> assignment
    std::vector<R> X, G, U, A, Y;   // per assignment: x [D], gate/up/act [F], expert output [D]
    std::vector<R> sG, sU, sA, sY;  // shared expert: gate/up/act [N, Fs], output [N, D]
    std::vector<R> sg;              // shared expert: sigmoid gate [N]
    std::vector<int64_t> counts;    // [E] slots per expert
    double aux = 0, z = 0;          // the loss terms (already times their coefficients)
};

template <typename R>
void moe_fwd(ThreadPool* pool, const MoeShape& s, const MoeLossSpec& ls, const MoeWeightsT<R>& w, const R* xn,
             R* out, MoeSaved<R>& sv);
// dxn overwritten; parameter gradients accumulated.
template <typename R>
void moe_bwd(ThreadPool* pool, const MoeShape& s, const MoeLossSpec& ls, const MoeWeightsT<R>& w, const R* xn,
             const MoeSaved<R>& sv, const R* dout, R* dxn, const MoeGradsT<R>& g);

}  // namespace moe::train
