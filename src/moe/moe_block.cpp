#include "moe/moe_block.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/timer.h"
#include "moe/combine.h"
#include "moe/moe_block_buffers.h"

namespace moe {

template <typename Alloc>
MoeBlock::Buffers MoeBlock::carve(const MoeSpec& s, int64_t T, int n_threads, const MoeApprox& ap, Alloc&& alloc) {
    const size_t E = static_cast<size_t>(s.n_expert), k = static_cast<size_t>(s.top_k), t = static_cast<size_t>(T);
    const size_t D = static_cast<size_t>(s.n_embd), F = static_cast<size_t>(s.n_ff);
    const size_t Fs = static_cast<size_t>(s.n_shared > 0 ? s.n_ff_shared : 0);
    const bool temp = ap.temperature != 1.0f, cap = ap.capacity_factor > 0.0f, sh = s.n_shared > 0;
    Buffers b{};
    b.logits = static_cast<float*>(alloc(t * E * 4));
    b.scores = static_cast<float*>(alloc(t * E * 4));
    b.select = static_cast<float*>(alloc(t * E * 4));
    b.ids = static_cast<int32_t*>(alloc(t * k * 4));
    b.weights = static_cast<float*>(alloc(t * k * 4));
    b.ids_exact = temp ? static_cast<int32_t*>(alloc(t * k * 4)) : nullptr;
    b.weights_exact = temp ? static_cast<float*>(alloc(t * k * 4)) : nullptr;
    b.route_scratch = alloc(static_cast<size_t>(n_threads) * route_token_scratch_bytes(s));
    b.counts = static_cast<int64_t*>(alloc(E * 8));
    b.offsets = static_cast<int64_t*>(alloc((E + 1) * 8));
    b.row_token = static_cast<int32_t*>(alloc(t * k * 4));
    b.row_slot = static_cast<int32_t*>(alloc(t * k * 4));
    b.slot_row = static_cast<int32_t*>(alloc(t * k * 4));
    b.xp = static_cast<float*>(alloc(t * k * D * 4));
    b.h = static_cast<float*>(alloc(t * k * F * 4));
    b.yp = static_cast<float*>(alloc(t * k * D * 4));
    // The shared expert runs as one more expert (and T more rows) of the routed experts' run.
    b.ffn_scratch = alloc(GroupedFfn::scratch_bytes(s.n_expert + (sh ? 1 : 0), n_threads));
    b.act_scratch = alloc(GroupedFfn::act_scratch_bytes(static_cast<int64_t>(t * (std::max<size_t>(k, 1) + (sh ? 1 : 0))),
                                                        static_cast<int64_t>(std::max({D, F, Fs})), static_cast<int64_t>(t)));
    b.hs = sh ? static_cast<float*>(alloc(t * Fs * 4)) : nullptr;
    b.ys = sh ? static_cast<float*>(alloc(t * D * 4)) : nullptr;
    b.sgate = sh ? static_cast<float*>(alloc(t * 4)) : nullptr;
    b.shared_offsets = static_cast<int64_t*>(alloc(2 * 8));
    b.load = cap ? static_cast<int64_t*>(alloc(E * 8)) : nullptr;
    b.totals = cap ? static_cast<float*>(alloc(t * 4)) : nullptr;
    b.moved = cap ? static_cast<uint8_t*>(alloc(t)) : nullptr;
    return b;
}

size_t MoeBlock::plan_scratch(const MoeSpec& spec, int64_t max_tokens, int n_threads, const MoeApprox& approx) {
    ArenaPlan plan;
    carve(spec, max_tokens, n_threads, approx, [&](size_t bytes) -> void* {
        plan.add(bytes);
        return nullptr;
    });
    return plan.bytes();
}

namespace {
const MoeSpec& validated(const MoeSpec& s) {
    s.validate();
    return s;
}
}  // namespace

MoeBlock::MoeBlock(const MoeSpec& spec, const MoeWeights& weights, const kernels::CpuKernels& kernels,
                   int64_t max_tokens, int n_threads, const MoeApprox& approx)
    : spec_(validated(spec)), weights_(weights), approx_(approx), active_k_(spec_.top_k), max_tokens_(max_tokens), n_threads_(n_threads),
      router_((weights_.validate(spec_), spec_), weights_, kernels) {
    approx_.validate();
    if (max_tokens < 1) throw_error("moe", "max_tokens = ", max_tokens, " must be >= 1");
    if (n_threads < 1) throw_error("moe", "n_threads = ", n_threads, " must be >= 1");
    ffn_ = make_routed_ffn(spec_, weights_, kernels);
    if (spec_.n_shared > 0)
        shared_ffn_ = make_expert_ffn(spec_, weights_.gate_shexp, weights_.up_shexp, weights_.down_shexp,
                                      spec_.n_ff_shared, kernels);
    dot_ = &kernels.matmul(DType::F32, "ffn_gate_inp_shexp");
    scratch_needed_ = plan_scratch(spec_, max_tokens_, n_threads_, approx_);
    arena_.reserve(scratch_needed_);
}

void MoeBlock::use_shared_scratch(Arena* arena) {
    if (arena && arena->capacity() < scratch_needed_)
        throw_error("moe", "layer ", weights_.layer, ": shared scratch of ", arena->capacity(),
                    " bytes is smaller than the ", scratch_needed_, " bytes this block needs");
    shared_ = arena;
    if (arena) arena_ = Arena();
    else arena_.reserve(scratch_needed_);
    routing_ = Routing{};
    plan_ = DispatchPlan{};
}

void MoeBlock::set_active_k(int k) {
    if (k < 1 || k > spec_.top_k)
        throw_error("moe", "layer ", weights_.layer, ": ", k, " experts per token requested; this layer routes to 1..",
                    spec_.top_k);
    if (ep_ && k != spec_.top_k)
        throw_error("moe", "layer ", weights_.layer, ": fewer experts per token is not supported with --ep");
    active_k_ = k;
}

size_t MoeBlock::repack_experts() {
    if (store_) throw_error("moe", "layer ", weights_.layer, ": --repack-experts needs every expert resident (drop --mem)");
    if (!panels_.empty()) return 0;
    size_t n = repack_expert_panels(ffn_, spec_.n_expert, panels_);
    // The shared experts are read for every token like a dense FFN: panels too (one stack of one).
    if (spec_.n_shared > 0) n += repack_expert_panels(shared_ffn_, 1, panels_);
    return n;
}

void MoeBlock::set_expert_store(ExpertStore* store) {
    if (store && !panels_.empty())
        throw_error("moe", "layer ", weights_.layer, ": --repack-experts needs every expert resident (drop --mem)");
    store_ = store;
    const size_t E = static_cast<size_t>(spec_.n_expert);
    active_.assign(store ? E : 0, 0);
    slices_.assign(store ? E : 0, ExpertSlices{});
    tabs_.assign(store ? 3 * E : 0, nullptr);
    pred_logits_.assign(store ? static_cast<size_t>(max_tokens_) * E : 0, 0.0f);
    pred_ids_.assign(store ? E : 0, 0);
    pred_scratch_.assign(store ? E + static_cast<size_t>(spec_.top_k) : 0, 0);
    pred_count_.assign(store ? E : 0, 0);
    ready_.assign(store ? E : 0, 0);
    if (store && store->capacity() < 1)
        throw_error("moe", "layer ", weights_.layer, ": expert store with no capacity");
}

void MoeBlock::prefetch_for(ThreadPool& pool, const float* x, int64_t T, int room) {
    if (!store_ || pred_logits_.empty() || room < 1) return;
    const int E = spec_.n_expert, k = spec_.top_k;
    router_.logits(pool, x, T, 1.0f, pred_logits_.data());
    std::fill(pred_count_.begin(), pred_count_.end(), 0);
    int32_t* top = pred_scratch_.data() + E;
    for (int64_t t = 0; t < T; ++t) {
        topk_desc(pred_logits_.data() + t * E, E, k, pred_scratch_.data(), top);
        for (int j = 0; j < k; ++j) ++pred_count_[static_cast<size_t>(top[j])];
    }
    // Whole-layer prefetch (a prefill batch predicts up to all E experts): the ones the most
    // tokens need first, at most `room` (more would evict each other before use).
    int n = 0;
    for (int e = 0; e < E; ++e)
        if (pred_count_[static_cast<size_t>(e)] > 0) pred_ids_[static_cast<size_t>(n++)] = e;
    const int take = std::min(n, room);
    std::partial_sort(pred_ids_.begin(), pred_ids_.begin() + take, pred_ids_.begin() + n, [&](int32_t a, int32_t b) {
        const int32_t ca = pred_count_[static_cast<size_t>(a)], cb = pred_count_[static_cast<size_t>(b)];
        return ca != cb ? ca > cb : a < b;
    });
    store_->prefetch(weights_.layer, pred_ids_.data(), take);
}

void MoeBlock::run_from_store(ThreadPool& pool, const float* x, int64_t T, const Buffers& b) {
    const int E = spec_.n_expert, cap = store_->capacity();
    int n_active = 0;
    for (int e = 0; e < E; ++e)
        if (plan_.counts[e] > 0) active_[static_cast<size_t>(n_active++)] = e;
    const char** gate = tabs_.data();
    const char** up = gate + E;
    const char** down = up + E;
    // Groups of at most `cap` consecutive active experts (prefill may need more than the slots).
    // Within a group, out of order: the experts already resident run first, the rest as their
    // reads complete. Each run of consecutive ready experts is one GroupedFfn call over the
    // expert-id range [e0, e1): its rows are one contiguous range of the plan, and every output
    // row is computed alone, so yp is bitwise the same whatever the order and grouping (combine
    // then sums it in slot order as always).
    for (int i = 0; i < n_active; i += cap) {
        const int n = std::min(cap, n_active - i);
        const int32_t* ids = active_.data() + i;
        store_->acquire_async(weights_.layer, ids, n, slices_.data());
        struct Release {
            ExpertStore* s;
            int layer;
            ~Release() { s->release(layer); }
        } guard{store_, weights_.layer};
        // Last group of the layer: start the next layer's predicted loads now (decode: the whole
        // layer is one group), into the slots this group does not hold, so they overlap compute.
        if (i + n == n_active && next_) next_->prefetch_for(pool, x, T, cap - n);
        for (int j = 0; j < n; ++j) {
            const int e = ids[j];
            gate[e] = slices_[static_cast<size_t>(j)].gate;
            up[e] = slices_[static_cast<size_t>(j)].up;
            down[e] = slices_[static_cast<size_t>(j)].down;
        }
        uint8_t* ready = ready_.data();
        std::fill(ready, ready + n, 0);
        while (store_->wait_ready(ready, n) > 0) {
            for (int j = 0; j < n;) {
                if (ready[j] != 1) {
                    ++j;
                    continue;
                }
                int j1 = j;
                while (j1 < n && ready[j1] == 1) ready[j1++] = 2;
                const int e0 = ids[j], e1 = ids[j1 - 1] + 1;
                ExpertFfn f = ffn_;
                f.gate.slots = gate + e0;
                f.up.slots = up + e0;
                f.down.slots = down + e0;
                if (f.gate_bias) {  // biases indexed like the slots: from expert e0
                    f.gate_bias += static_cast<size_t>(e0) * static_cast<size_t>(spec_.n_ff);
                    f.up_bias += static_cast<size_t>(e0) * static_cast<size_t>(spec_.n_ff);
                    f.down_bias += static_cast<size_t>(e0) * static_cast<size_t>(spec_.n_embd);
                }
                GroupedFfn::run(pool, f, e1 - e0, plan_.offsets + e0, b.xp, b.h, b.yp, b.ffn_scratch, b.act_scratch);
                j = j1;
            }
        }
    }
}

// Routing of x [T, D] into routing_ (+ approximations and observers); trace rows start at trace_base.
void MoeBlock::route_tokens(ThreadPool& pool, const float* x, int64_t T, const Buffers& b, const MoeObserve& obs,
                            int64_t trace_base) {
    const int64_t E = spec_.n_expert;
    const int k = spec_.top_k;
    routing_ = Routing{T, k, static_cast<int>(E), b.ids, b.weights, b.scores, b.select};
    ApproxReport rep;
    rep.tokens = approx_.any() ? T : 0;
    if (approx_.temperature != 1.0f) {
        router_.logits(pool, x, T, 1.0f, b.logits);
        Routing exact = routing_;
        exact.ids = b.ids_exact;
        exact.weights = b.weights_exact;
        router_.route(pool, b.logits, T, exact, b.route_scratch);
        for (int64_t i = 0; i < T * E; ++i) {
            b.logits[i] /= approx_.temperature;
            if (!std::isfinite(b.logits[i]))
                throw_error("moe", "layer ", weights_.layer, ": router logit of token ", i / E, " for expert ", i % E,
                            " overflows at temperature ", approx_.temperature);
        }
        router_.route(pool, b.logits, T, routing_, b.route_scratch);
        for (int64_t t = 0; t < T; ++t)
            if (std::memcmp(b.ids + t * k, b.ids_exact + t * k, sizeof(int32_t) * k) != 0 ||
                std::memcmp(b.weights + t * k, b.weights_exact + t * k, sizeof(float) * k) != 0)
                ++rep.temperature_changed;
    } else {
        router_.logits(pool, x, T, 1.0f, b.logits);
        router_.route(pool, b.logits, T, routing_, b.route_scratch);
    }
    if (active_k_ < k)  // fewer experts per token (set_active_k): keep the first active_k_ slots
        for (int64_t t = 0; t < T; ++t) {
            int32_t* ids = routing_.ids + t * k;
            float* w = routing_.weights + t * k;
            routing_weights(spec_, routing_.scores + t * E, ids, active_k_, w);
            for (int j = active_k_; j < k; ++j) ids[j] = -1, w[j] = 0.0f;
        }
    if (approx_.dynamic_topk_threshold > 0.0f) apply_dynamic_topk(approx_.dynamic_topk_threshold, routing_, rep);
    if (approx_.prune_threshold > 0.0f) apply_pruning(approx_.prune_threshold, routing_, rep);
    if (approx_.capacity_factor > 0.0f)
        apply_capacity(spec_, approx_.capacity_factor,
                       approx_.dynamic_topk_threshold > 0.0f || approx_.prune_threshold > 0.0f, routing_, b.load,
                       b.totals, b.moved, rep);
    if (obs.approx) obs.approx->add(rep);
    if (obs.stats) obs.stats->add(routing_);
    if (obs.trace) obs.trace->add(weights_.layer, routing_, trace_base);
}

// b.sgate [T] = sigmoid(gate_inp_shexp . x) where the layer has the shared gate (Qwen2-MoE).
void MoeBlock::shared_gate(const float* x, int64_t T, const Buffers& b) {
    const int64_t D = spec_.n_embd;
    if (spec_.shared_gate_sigmoid) {
        kernels::MatmulArgs a;
        a.w = weights_.gate_inp_shexp.data;
        a.w_row_stride = static_cast<size_t>(D) * sizeof(float);
        a.x = x;
        a.ldx = D;
        a.y = b.sgate;
        a.ldy = 1;
        a.m = T;
        a.K = D;
        a.n0 = 0;
        a.n1 = 1;
        (*dot_)(a);
        for (int64_t t = 0; t < T; ++t) b.sgate[t] = 1.0f / (1.0f + std::exp(-b.sgate[t]));
    }
    b.shared_offsets[0] = 0;
    b.shared_offsets[1] = T;
}

// b.ys [T, D] = shared_ffn(x) and b.sgate, for spec_.n_shared > 0 (a run of its own).
void MoeBlock::shared_experts(ThreadPool& pool, const float* x, int64_t T, const Buffers& b) {
    shared_gate(x, T, b);
    GroupedFfn::run(pool, shared_ffn_, 1, b.shared_offsets, x, b.hs, b.ys, b.ffn_scratch, b.act_scratch);
}

void MoeBlock::ep_idle(ThreadPool& pool) {
    if (!ep_ || !ep_->cfg.dp)
        throw_error("moe", "layer ", weights_.layer, ": an idle step needs data-parallel expert parallelism (--ep-dp)");
    if (pool.size() > n_threads_)
        throw_error("moe", "thread pool of ", pool.size(), " threads, the block was planned for ", n_threads_);
    Arena& arena = shared_ ? *shared_ : arena_;
    arena.reset();
    const Buffers b = carve(spec_, max_tokens_, n_threads_, approx_, [&](size_t bytes) { return arena.alloc(bytes); });
    forward_ep(pool, nullptr, 0, nullptr, MoeObserve{}, b);
}

void MoeBlock::forward(ThreadPool& pool, const float* x, int64_t T, float* y, const MoeObserve& obs) {
    if (T < 1 || T > max_tokens_)
        throw_error("moe", "layer ", weights_.layer, ": batch of ", T, " tokens, the block was planned for 1..",
                    max_tokens_);
    if (pool.size() > n_threads_)
        throw_error("moe", "thread pool of ", pool.size(), " threads, the block was planned for ", n_threads_);
    const int64_t D = spec_.n_embd, E = spec_.n_expert;
    Arena& arena = shared_ ? *shared_ : arena_;
    arena.reset();
    // Data-parallel EP receives rows from every rank: scratch for max_tokens_, used in chunks.
    const int64_t Tc = ep_ && ep_->cfg.dp ? max_tokens_ : T;
    const Buffers b = carve(spec_, Tc, n_threads_, approx_, [&](size_t bytes) { return arena.alloc(bytes); });
    StageTimes* times = obs.times;
    Timer timer;
    auto lap = [&](double& slot) {
        if (!times) return;
        slot += timer.seconds();
        timer.reset();
    };

    if (ep_) {
        if (store_)
            throw_error("moe", "layer ", weights_.layer, ": expert parallelism (--ep) with an expert cache (--mem) ",
                        "is not supported; drop one of the two");
        forward_ep(pool, x, T, y, obs, b);
        return;
    }
    route_tokens(pool, x, T, b, obs, obs.trace_token_base);
    if (times) lap(times->route);

    // ---- dispatch (plan + permute)
    plan_ = DispatchPlan{};
    plan_.counts = b.counts;
    plan_.offsets = b.offsets;
    plan_.row_token = b.row_token;
    plan_.row_slot = b.row_slot;
    plan_.slot_row = b.slot_row;
    build_dispatch(routing_, plan_);
    // Experts whose gate / up kernels take int8 rows: each token's row is quantized once and its
    // int8 row copied to the rows of its experts (GroupedFfn::Part::row_token), so the float rows
    // are not gathered (pp512 of OLMoE Q4_K_M quantized 8 rows per token before; the same bytes).
    const bool tok_rows = !store_ && b.act_scratch && GroupedFfn::int8_inputs(ffn_);
    if (!tok_rows) gather_rows(pool, plan_, x, D, b.xp);
    GroupedFfn::Part routed{&ffn_, static_cast<int>(E), plan_.offsets, tok_rows ? nullptr : b.xp, b.h, b.yp};
    if (tok_rows) {
        routed.x = x;
        routed.row_token = plan_.row_token;
        routed.n_tokens = T;
    }
    if (times) lap(times->dispatch);

    // ---- routed experts, then the shared experts (all tokens, one "expert" group over x itself).
    // Decode-sized batches (the fused schedule, experts.h): the shared expert is the routed run's
    // second part, its tiles in the same pool region (one region per layer instead of two;
    // times->experts holds both). Larger batches keep two runs (merged, V2-Lite pp512 measured
    // ~8 % slower, noisy).
    const bool sh = spec_.n_shared > 0;
    if (sh && !store_ && GroupedFfn::auto_fuses(pool, plan_.offsets[E] + T)) {
        shared_gate(x, T, b);
        const GroupedFfn::Part parts[2] = {routed, {&shared_ffn_, 1, b.shared_offsets, x, b.hs, b.ys}};
        GroupedFfn::run(pool, parts, 2, b.ffn_scratch, b.act_scratch);
        if (times) lap(times->experts);
    } else {
        if (store_) run_from_store(pool, x, T, b);
        else GroupedFfn::run(pool, &routed, 1, b.ffn_scratch, b.act_scratch);
        if (times) lap(times->experts);
        if (sh) {
            shared_experts(pool, x, T, b);
            if (times) lap(times->shared);
        }
    }

    // ---- combine
    combine(pool, routing_, plan_, b.yp, D, spec_.n_shared > 0 ? b.ys : nullptr,
            spec_.shared_gate_sigmoid ? b.sgate : nullptr, y);
    if (times) {
        lap(times->combine);
        ++times->calls;
    }
}

}  // namespace moe
