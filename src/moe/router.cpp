#include "moe/router.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace moe {

void topk_desc(const float* v, int n, int k, int32_t* scratch, int32_t* out) {
    MOE_ASSERT(k >= 0 && k <= n, "k=", k, " n=", n);
    for (int i = 0; i < n; ++i) scratch[i] = i;
    // Strict total order (values are never NaN here): larger first, equal -> lower index first.
    auto before = [v](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); };
    std::partial_sort(scratch, scratch + k, scratch + n, before);
    std::copy(scratch, scratch + k, out);
}

void routing_weights(const MoeSpec& spec, const float* scores, const int32_t* ids, int n, float* w) {
    if (spec.gating == Gating::SoftmaxSelected) {
        // scores are raw logits: softmax over the selected ones.
        float m = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < n; ++j) m = std::max(m, scores[ids[j]]);
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) {
            w[j] = std::exp(scores[ids[j]] - m);
            sum += w[j];
        }
        for (int j = 0; j < n; ++j) w[j] /= sum;
    } else {
        for (int j = 0; j < n; ++j) w[j] = scores[ids[j]];
    }
    if (spec.norm_topk) {
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) sum += w[j];
        const float denom = sum + spec.norm_eps;
        for (int j = 0; j < n; ++j) w[j] /= denom;
    }
    if (spec.scale != 1.0f)
        for (int j = 0; j < n; ++j) w[j] *= spec.scale;
}

size_t route_token_scratch_bytes(const MoeSpec& spec) {
    return (static_cast<size_t>(spec.n_expert) + 2 * static_cast<size_t>(spec.n_group)) * 4 + 64;
}

void route_token(const MoeSpec& spec, const float* logits, const float* selection_bias, float* scores,
                 float* select, void* scratch, int32_t* ids, float* w) {
    const int E = spec.n_expert;
    int32_t* idx = static_cast<int32_t*>(scratch);  // [E]
    int32_t* gidx = idx + E;                         // [n_group]
    float* gscore = reinterpret_cast<float*>(gidx + spec.n_group);

    // 1. gating scores
    switch (spec.gating) {
        case Gating::Softmax: {
            float m = logits[0];
            for (int e = 1; e < E; ++e) m = std::max(m, logits[e]);
            float sum = 0.0f;
            for (int e = 0; e < E; ++e) {
                scores[e] = std::exp(logits[e] - m);
                sum += scores[e];
            }
            for (int e = 0; e < E; ++e) scores[e] /= sum;
            break;
        }
        case Gating::Sigmoid:
            for (int e = 0; e < E; ++e) scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
            break;
        case Gating::SoftmaxSelected:
            for (int e = 0; e < E; ++e) scores[e] = logits[e];
            break;
    }
    // 2. selection scores (bias is for selection only)
    for (int e = 0; e < E; ++e) select[e] = selection_bias ? scores[e] + selection_bias[e] : scores[e];
    // 3. group-limited routing: keep the topk_group best groups, mask the rest to -inf
    if (spec.n_group > 1) {
        const int G = spec.n_group, per = E / G;
        for (int g = 0; g < G; ++g) {
            const float* s = select + g * per;
            if (spec.group_score == GroupScore::Max) {
                float m = s[0];
                for (int i = 1; i < per; ++i) m = std::max(m, s[i]);
                gscore[g] = m;
            } else {  // sum of the top two (the second may equal the first)
                float a = -std::numeric_limits<float>::infinity(), b = a;
                for (int i = 0; i < per; ++i) {
                    if (s[i] > a) {
                        b = a;
                        a = s[i];
                    } else if (s[i] > b) {
                        b = s[i];
                    }
                }
                gscore[g] = a + b;
            }
        }
        topk_desc(gscore, G, spec.topk_group, idx, gidx);
        // mark kept groups (idx reused as a flag array of size G)
        for (int g = 0; g < G; ++g) idx[g] = 0;
        for (int i = 0; i < spec.topk_group; ++i) idx[gidx[i]] = 1;
        for (int g = 0; g < G; ++g)
            if (!idx[g])
                for (int i = 0; i < per; ++i) select[g * per + i] = -std::numeric_limits<float>::infinity();
    }
    // 4. top-k over the selection scores, 5. weights from the unbiased scores
    topk_desc(select, E, spec.top_k, idx, ids);
    routing_weights(spec, scores, ids, spec.top_k, w);
}

Router::Router(const MoeSpec& spec, const MoeWeights& w, const kernels::CpuKernels& k)
    : spec_(spec), layer_(w.layer), w_(w.router.as<const float>()),
      router_bias_(spec.has_router_bias ? w.router_bias.as<const float>() : nullptr),
      selection_bias_(spec.has_selection_bias ? w.selection_bias.as<const float>() : nullptr),
      mm_(&k.matmul(w.router.type, w.router.name)) {
    for (const float* b : {router_bias_, selection_bias_})
        if (b)
            for (int e = 0; e < spec.n_expert; ++e)
                if (!std::isfinite(b[e]))
                    throw_error("moe", "layer ", layer_, ": router bias for expert ", e, " is ", b[e],
                                " (the model file is corrupt)");
}

void Router::logits(ThreadPool& pool, const float* x, int64_t T, float temperature, float* logits) const {
    const int64_t E = spec_.n_expert, D = spec_.n_embd;
    // Work items: (block of up to 4 tokens, block of 16 experts); each logit is one kernel dot
    // product, whose bits do not depend on the block (the f32 kernel's 4 x 4 register tile keeps
    // every output's operation sequence). 4 tokens per item let prefill run that tile: 8 loads per
    // 16 FMAs instead of 5 per 4 at one token (OLMoE Q4_K_M pp512, perf: the router kernel 1.24 -> 0.66 % of the samples).
    constexpr int64_t kEB = 16, kTB = 4;
    const int64_t nb = (E + kEB - 1) / kEB, ntb = (T + kTB - 1) / kTB;
    // At least ~64K multiply-adds per chunk: a decode step's router (OLMoE: 64 x 2048 f32, 512 KiB
    // read per layer) splits in two, one half per thread. 256K (the whole router inline on the
    // calling thread, no pool wake-up) measured slower: moe bench tg128 on OLMoE Q4_K_M, 2 threads,
    // route share 2.0 % -> 1.5 %, 92.2-93.5 -> 93.5-95.0 t/s (alternating runs). Chunking never
    // changes a logit's bits.
    const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / (kEB * D * std::min(T, kTB)));
    pool.parallel_for(ntb * nb, grain, [&](int64_t b, int64_t e, int) {
        for (int64_t it = b; it < e; ++it) {
            const int64_t t0 = it / nb * kTB, e0 = (it % nb) * kEB, e1 = std::min(E, e0 + kEB);
            kernels::MatmulArgs a;
            a.w = w_;
            a.w_row_stride = static_cast<size_t>(D) * sizeof(float);
            a.x = x + t0 * D;
            a.ldx = D;
            a.y = logits + t0 * E + e0;
            a.ldy = E;
            a.m = std::min(kTB, T - t0);
            a.K = D;
            a.n0 = e0;
            a.n1 = e1;
            (*mm_)(a);
        }
    });
    // Serial check in token order, so the error names the first bad token whatever the threads did.
    for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < E; ++e) {
            float& l = logits[t * E + e];
            if (router_bias_) l += router_bias_[e];
            if (temperature != 1.0f) l /= temperature;
            if (!std::isfinite(l))
                throw_error("moe", "layer ", layer_, ": router logit of token ", t, " for expert ", e, " is ", l,
                            " (non-finite activations or weights reached the MoE router; no expert can be picked)");
        }
}

void Router::route(ThreadPool& pool, const float* logits, int64_t T, Routing& out, void* scratch) const {
    const int E = spec_.n_expert, k = spec_.top_k;
    const size_t sb = route_token_scratch_bytes(spec_);
    out.n_tokens = T;
    out.k = k;
    out.n_expert = E;
    pool.parallel_for(T, 4, [&](int64_t b, int64_t e, int tid) {
        void* s = static_cast<char*>(scratch) + static_cast<size_t>(tid) * sb;
        for (int64_t t = b; t < e; ++t)
            route_token(spec_, logits + t * E, selection_bias_, out.scores + t * E, out.select + t * E, s,
                        out.ids + t * k, out.weights + t * k);
    });
}

}  // namespace moe
