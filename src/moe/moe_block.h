#pragma once
// The MoE block: y[t] = sum over selected e of w[t,e] * down_e(act(gate_e x[t]) * up_e x[t])
// (+ shared experts), for T tokens x[T, D] -> y[T, D], f32 activations.
//
//   route (router.h) -> [approximations, approx.h, opt-in] -> dispatch plan + permute (dispatch.h)
//   -> grouped expert FFN (experts.h; the shared experts as a second part of the same run) -> combine (combine.h)
//
// Scratch is planned once from (spec, max_tokens, n_threads); forward() never allocates (except
// for the optional routing trace). Deterministic: every output element is computed by one thread
// in a fixed order, so y[t] is bitwise the same for any thread count, any batch position and any
// other tokens in the batch (only the capacity approximation couples tokens).
#include <cstdint>
#include <vector>
#include <memory>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "moe/approx.h"
#include "moe/ep.h"
#include "moe/dispatch.h"
#include "moe/expert_store.h"
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
    // Routed experts from `store` (not owned; must outlive the block) instead of in place in the
    // weights' mapping; nullptr goes back to in place. Same results bitwise (expert_store.h).
    void set_expert_store(ExpertStore* store);
    // Repack the routed Q2_K / Q3_K / Q4_K / Q6_K / Q8_0 / Q4_0 / Q5_K / Q5_0 / MXFP4 expert stacks into panels that every call reads (experts.h,
    // repack_expert_panels; moe run/bench/... --repack-experts); bytes allocated. Not with an
    // expert store (the cache's slots hold the blocks).
    size_t repack_experts();
    const ExpertFfn& routed_ffn() const { return ffn_; }
    // The shared experts as one stack of a single expert (empty matrices when the layer has none).
    const ExpertFfn& shared_ffn() const { return shared_ffn_; }
    ExpertStore* expert_store() const { return store_; }
    // Router lookahead: with a store, after acquiring its own experts this block applies `next`'s
    // router to its input x and hints the store to start loading the predicted experts of
    // `next` while this block computes (the residual stream changes slowly between layers).
    void set_prefetch_next(MoeBlock* next) { next_ = next; }
    // Router lookahead of this block on x [T, D]: starts loads of the experts the most tokens are
    // predicted to use, at most `room` of them (the cache slots not held by the caller).
    void prefetch_for(ThreadPool& pool, const float* x, int64_t T, int room);
    static size_t plan_scratch(const MoeSpec& spec, int64_t max_tokens, int n_threads, const MoeApprox& approx);

    // Expert parallelism (ep.h): from now on forward() runs the EP path over cfg.group with this
    // layer's placement; every rank of the group must call forward() with the same x. Checks the
    // placement against the block; approximations are not supported with EP (moe::Error).
    void use_ep(const EpConfig& cfg);
    // Data-parallel EP (EpConfig::dp): a rank with no tokens in this step still takes part in the
    // layer's exchanges (sends nothing, computes the rows others send it). Called in layer order
    // for every MoE block, as often as the busiest rank calls forward().
    void ep_idle(ThreadPool& pool);
    const EpStageTimes* ep_times() const { return ep_ ? &ep_->times : nullptr; }
    void reset_ep_times() {
        if (ep_) ep_->times = {};
    }

private:
    struct Buffers;
    void route_tokens(ThreadPool& pool, const float* x, int64_t T, const Buffers& b, const MoeObserve& obs,
                      int64_t trace_base);
    void shared_gate(const float* x, int64_t T, const Buffers& b);
    void shared_experts(ThreadPool& pool, const float* x, int64_t T, const Buffers& b);
    void forward_ep(ThreadPool& pool, const float* x, int64_t T, float* y, const MoeObserve& obs, const Buffers& b);
    template <typename Alloc>
    static Buffers carve(const MoeSpec& spec, int64_t T, int n_threads, const MoeApprox& approx, Alloc&& alloc);
    // The routed experts of the current plan through store_, in groups of <= capacity() experts.
    void run_from_store(ThreadPool& pool, const float* x, int64_t T, const Buffers& b);

    MoeSpec spec_;
    MoeWeights weights_;
    MoeApprox approx_;
    int active_k_ = 0;  // experts per token in use (set_active_k); spec_.top_k after construction
    int64_t max_tokens_;
    int n_threads_;
    Router router_;
    ExpertFfn ffn_;
    ExpertFfn shared_ffn_;
    std::vector<PanelBuffer> panels_;  // repack_experts' buffers (ffn_'s panels point into them)
    const kernels::MatmulKernel* dot_ = nullptr;  // f32 kernel for the shared-expert gate
    Arena arena_;                 // owned scratch (empty while a shared one is used)
    Arena* shared_ = nullptr;     // shared scratch, or null
    size_t scratch_needed_ = 0;
    Routing routing_;
    DispatchPlan plan_;
    ExpertStore* store_ = nullptr;
    std::vector<int32_t> active_;           // [E] experts with rows, ascending
    std::vector<ExpertSlices> slices_;      // [E] views of one acquire
    std::vector<const char*> tabs_;         // [3 * E] gate / up / down base per expert id
    MoeBlock* next_ = nullptr;              // prefetch target (router lookahead)
    std::vector<float> pred_logits_;        // [max_tokens, E]
    std::vector<int32_t> pred_ids_;         // [E] predicted experts (union over tokens)
    std::vector<int32_t> pred_scratch_;     // [E + k]
    std::vector<int32_t> pred_count_;       // [E] tokens predicted per expert
    std::vector<uint8_t> ready_;            // [E] per acquired expert: 0 loading, 1 ready, 2 computed
    std::unique_ptr<EpState> ep_;
};

}  // namespace moe
