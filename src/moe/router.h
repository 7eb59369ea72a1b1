#pragma once
// Router: logits = W_router x (+ router bias), gating scores, (group-limited) top-k selection and
// the routing weights, exactly as MoeSpec describes (FACTS.md section 4). Deterministic: ties go
// to the lower expert index (total order: higher score first, then lower index); each token is
// routed by one thread with a fixed operation order, so its result never depends on the batch.
// A NaN or inf router logit raises moe::Error naming the layer, the token and the expert.
#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "moe/moe_spec.h"

namespace moe {

// Routing of T tokens (views into the block's scratch).
struct Routing {
    int64_t n_tokens = 0;
    int k = 0;
    int n_expert = 0;
    int32_t* ids = nullptr;    // [T, k] expert per slot, slots in descending selection score; -1 = unused
    float* weights = nullptr;  // [T, k] routing weight per slot (0 where unused)
    float* scores = nullptr;   // [T, E] gating scores (softmax probs, sigmoids, or raw logits)
    float* select = nullptr;   // [T, E] selection scores: scores + selection bias, -inf if group-masked
};

// Indices of the k largest of v[0..n) in descending order, ties to the lower index.
// scratch: n int32. k <= n.
void topk_desc(const float* v, int n, int k, int32_t* scratch, int32_t* out);

// Weights for the experts ids[0..n) of one token from its gating scores (spec.gating, norm, scale).
void routing_weights(const MoeSpec& spec, const float* scores, const int32_t* ids, int n, float* w);

// Routes one token from its logits (router bias already added). scores/select: [E] outputs;
// scratch: E + n_group int32 + n_group float (see kRouteScratch). ids/w: [k] outputs.
void route_token(const MoeSpec& spec, const float* logits, const float* selection_bias, float* scores,
                 float* select, void* scratch, int32_t* ids, float* w);
size_t route_token_scratch_bytes(const MoeSpec& spec);

class Router {
public:
    Router(const MoeSpec& spec, const MoeWeights& w, const kernels::CpuKernels& k);

    // logits[T, E] = W x (+ router bias) / temperature; throws on a non-finite logit.
    void logits(ThreadPool& pool, const float* x, int64_t T, float temperature, float* logits) const;
    // Fills out (ids, weights, scores, select) for T tokens from logits.
    // scratch: pool.size() * route_token_scratch_bytes(spec) bytes.
    void route(ThreadPool& pool, const float* logits, int64_t T, Routing& out, void* scratch) const;

private:
    const MoeSpec& spec_;
    int layer_;
    const float* w_;
    const float* router_bias_;
    const float* selection_bias_;
    const kernels::MatmulKernel* mm_;
};

}  // namespace moe
