#pragma once
// The MoE block: y[t] = sum over selected e of w[t,e] * down_e(act(gate_e x[t]) * up_e x[t])
// (+ shared experts), for T tokens x[T, D] -> y[T, D], f32 activations.
//
//   route (router.h) -> [approximations, approx.h, opt-in] -> dispatch plan + permute (dispatch.h)
//   -> grouped expert FFN (experts.h) -> shared experts -> combine (combine.h)
//
// Scratch is planned once from (spec, max_tokens, n_threads); forward() never allocates (except
// for the optional routing trace). Deterministic: every output element is computed by one thread
// in a fixed order, so y[t] is bitwise the same for any thread count, any batch position and any
// other tokens in the batch (only the capacity approximation couples tokens).
#include <cstdint>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "moe/approx.h"
#include "moe/dispatch.h"
#include "moe/experts.h"
#include "moe/moe_spec.h"
#include "moe/router.h"
#include "moe/routing_stats.h"

namespace moe {

// What to record during a forward; every pointer may be null (= off).
struct MoeObserve {
    StageTimes* times = nullptr;       // accumulated per stage
    RoutingStats* stats = nullptr;     // accumulated expert load of this layer
    RoutingTrace* trace = nullptr;     // per-token (layer, token, experts, weights)
    int64_t trace_token_base = 0;      // position of x[0] in the sequence, for the trace
    ApproxReport* approx = nullptr;    // tokens changed by each enabled approximation
};

class MoeBlock {
public:
    // Validates spec, weights (shapes, dtypes -> kernels) and approx; throws moe::Error.
    // The weights' memory must outlive the block. pools passed to forward must have
    // size() <= n_threads.
    MoeBlock(const MoeSpec& spec, const MoeWeights& weights, const kernels::CpuKernels& kernels, int64_t max_tokens,
             int n_threads, const MoeApprox& approx = {});
    MoeBlock(const MoeBlock&) = delete;
    MoeBlock& operator=(const MoeBlock&) = delete;

    // x [T, D] -> y [T, D] (x and y must not overlap). 1 <= T <= max_tokens.
    void forward(ThreadPool& pool, const float* x, int64_t T, float* y, const MoeObserve& obs = {});

    // Experts per token from now on: route exactly as a block of top_k = k would (the first k of
    // the top_k selection, weights recomputed over those k as the gating says). Opt-in, changes the
    // output; used by `moe serve --adaptive-topk` and `moe perplexity --top-k`. 1 <= k <= top_k,
    // else moe::Error. Not thread-safe against a running forward().
    void set_active_k(int k);
    int active_k() const { return active_k_; }

    // Routing of the last forward (views into scratch, valid until the next forward).
    const Routing& last_routing() const { return routing_; }
    const DispatchPlan& last_plan() const { return plan_; }
    const MoeSpec& spec() const { return spec_; }
    // Scratch bytes forward() needs (planned from max_tokens, n_threads and the approximations).
    size_t scratch_needed() const { return scratch_needed_; }
    // Scratch sharing: by default a block owns an arena of scratch_needed() bytes. Layers run one
    // after another, so a model can give all its blocks one arena (capacity >= the largest
    // scratch_needed(); not touched by anything else during forward); the block's own arena is
    // then freed. last_routing()/last_plan() stay valid only until the next forward of any block
    // that shares the arena. Pass nullptr to go back to an owned arena.
    void use_shared_scratch(Arena* arena);
    static size_t plan_scratch(const MoeSpec& spec, int64_t max_tokens, int n_threads, const MoeApprox& approx);

private:
    struct Buffers;
    template <typename Alloc>
    static Buffers carve(const MoeSpec& spec, int64_t T, int n_threads, const MoeApprox& approx, Alloc&& alloc);

    MoeSpec spec_;
    MoeWeights weights_;
    MoeApprox approx_;
    int active_k_ = 0;  // experts per token in use (set_active_k); spec_.top_k after construction
    int64_t max_tokens_;
    int n_threads_;
    Router router_;
    ExpertFfn ffn_;
    ExpertFfn shared_ffn_;
    const kernels::MatmulKernel* dot_ = nullptr;  // f32 kernel for the shared-expert gate
    Arena arena_;                 // owned scratch (empty while a shared one is used)
    Arena* shared_ = nullptr;     // shared scratch, or null
    size_t scratch_needed_ = 0;
    Routing routing_;
    DispatchPlan plan_;
};

}  // namespace moe
