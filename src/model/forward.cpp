// The forward pass over a batch of (token, pos, seq) rows (see forward.h).
#include "model/forward.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "core/error.h"
#include "core/timer.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul_bf16_amx.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_gemm.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/ref/elementwise.h"
#include "kernels/ref/embedding.h"
#include "kernels/ref/quantize_act.h"
#include "kernels/ref/rope.h"
#include "model/model.h"

namespace moe::model {

void ForwardStats::reset(int64_t n_layer, int n_expert) {
    RoutingTrace* const keep = trace;
    *this = ForwardStats{};
    trace = keep;
    routing.resize(static_cast<size_t>(n_layer));
    for (auto& r : routing) r.reset(n_expert);
}

namespace {

constexpr int kBufs = 17;  // float buffers of Forward::Buffers, in declaration order

// Scratch layout for T rows (the same function sizes the plan and carves the arena).
// Longest input of any projection (D, attention output, dense FFN hidden).
int64_t max_proj_in(const ModelConfig& c) {
    int64_t k = std::max({c.n_embd, c.n_head * c.head_dim_v, c.q_lora_rank});
    for (int64_t il = 0; il < c.n_layer; ++il)
        if (!c.is_moe_layer(il)) k = std::max(k, c.n_ff);
    return k;
}

template <typename Alloc>
void carve(const ModelConfig& c, int64_t T, Alloc&& alloc, float** out_f, int32_t** out_i, void** out_xq) {
    const int64_t D = c.n_embd, qd = c.n_head * c.head_dim_k, kd = c.n_head_kv * c.head_dim_k,
                  vd = c.n_head_kv * c.head_dim_v, ad = c.n_head * c.head_dim_v;
    bool dense = false;  // dense FFN scratch only when some block is dense
    for (int64_t il = 0; il < c.n_layer; ++il) dense = dense || !c.is_moe_layer(il);
    const int64_t F = dense ? c.n_ff : 1;
    // MLA scratch (1 element each otherwise): q_a, kv_a, absorbed queries, latent outputs.
    const int64_t mla = c.is_mla() ? 1 : 0, rr = c.kv_lora_rank + c.qk_rope_head_dim;
    const int64_t qa = mla * T * std::max<int64_t>(c.q_lora_rank, 1), kva = mla * T * rr,
                  qm = mla * T * c.n_head * rr, lat = mla * T * c.n_head * c.kv_lora_rank;
    const int64_t sizes[] = {T * D, T * D, T * qd, T * kd,      T * vd,           T * ad,
                             T * D, T * qd, T * ad, T * F,      T * F,            std::max<int64_t>(qa, 1),
                             std::max<int64_t>(kva, 1), std::max<int64_t>(qm, 1), std::max<int64_t>(qm, 1),
                             std::max<int64_t>(lat, 1), std::max<int64_t>(lat, 1)};
    static_assert(sizeof(sizes) / sizeof(sizes[0]) == kBufs, "one size per float buffer");
    for (size_t i = 0; i < std::size(sizes); ++i) out_f[i] = static_cast<float*>(alloc(sizes[i] * sizeof(float)));
    for (int i = 0; i < 2; ++i) out_i[i] = static_cast<int32_t*>(alloc(T * sizeof(int32_t)));
    *out_xq = alloc(static_cast<size_t>(T) * ref::act_q8_row_bytes(max_proj_in(c)));
}

Forward::Proj make_proj(const Model& m, const TensorView& w, const TensorView& bias = {}) {
    Forward::Proj p;
    if (!w.data) return p;
    p.kernel = &m.kernels().matmul(w.type, w.name);
    p.w = w.data;
    p.row_stride = w.nb[1];
    p.n_in = w.ne[0];
    p.n_out = w.ne[1];
    p.bias = bias.data ? bias.as<float>() : nullptr;
    p.type = w.type;
    p.panels = m.dense_panels(w.data);  // --repack
    p.bf16_panels = m.bf16_panels(w.data);  // MOE_AMX_BF16=1
    return p;
}

// Rows of a batch below which a row-local op (norm, RoPE, activation quantization) stays on the
// calling thread: one pool dispatch costs more than the op on a few rows.
constexpr int64_t kParallelRows = 16;

void add_inplace(int64_t n, float* x, const float* y) { ref::add(n, x, y, x); }

}  // namespace

Forward::Forward(Model& model) : m_(model), max_batch_(model.options().max_batch) {
    ArenaPlan plan;
    float* f[kBufs];
    int32_t* i[2];
    void* xq;
    carve(m_.config(), max_batch_, [&](size_t bytes) { plan.add(bytes); return nullptr; }, f, i, &xq);
    arena_.reserve(plan.bytes());
    xq_stride_ = ref::act_q8_row_bytes(max_proj_in(m_.config()));

    const ModelWeights& W = m_.weights();
    proj_.resize(W.layers.size());
    for (size_t il = 0; il < W.layers.size(); ++il) {
        const LayerWeights& w = W.layers[il];
        LayerProj& p = proj_[il];
        p.q = make_proj(m_, w.wq, w.bq);
        p.k = make_proj(m_, w.wk, w.bk);
        p.v = make_proj(m_, w.wv, w.bv);
        p.o = make_proj(m_, w.wo, w.bo);
        p.gate = make_proj(m_, w.ffn_gate);
        p.up = make_proj(m_, w.ffn_up);
        p.down = make_proj(m_, w.ffn_down);
        p.q_a = make_proj(m_, w.wq_a);
        p.q_b = make_proj(m_, w.wq_b);
        p.kv_a = make_proj(m_, w.wkv_a);
    }
    head_ = make_proj(m_, W.output);
}

const void* Forward::prepare(ThreadPool& pool, const Proj& p, const float* x, int64_t n) {
    if (!p.kernel->act_q8) return nullptr;
    const int64_t K = p.n_in;
    const kernels::Isa isa = m_.kernels().isa();
    char* out = static_cast<char*>(b_.xq);
    auto rows = [&](int64_t r0, int64_t r1, int) {
        kernels::quantize_act_rows(isa, p.kernel->act_q8, x + r0 * K, K, r1 - r0, K, out + static_cast<size_t>(r0) * xq_stride_,
                                   xq_stride_);
    };
    if (n < kParallelRows || pool.size() == 1) rows(0, n, 0);
    else pool.parallel_for(n, (n + 2 * pool.size() - 1) / (2 * pool.size()), rows);
    return b_.xq;
}

void Forward::project(ThreadPool& pool, const Proj& p, const float* x, const void* xq, int64_t n, float* y) {
    const Proj* ps[1] = {&p};
    float* ys[1] = {y};
    project_many(pool, ps, ys, 1, x, xq, n);
}

void Forward::project_many(ThreadPool& pool, const Proj* const* ps, float* const* ys, int count, const float* x,
                           const void* xq, int64_t n) {
    MOE_ASSERT(count >= 1 && count <= 4, "project_many of ", count);
    int64_t ends[5] = {0};  // output rows of the projections, one after the other
    bool all_panels = n <= 2;
    for (int i = 0; i < count; ++i) {
        MOE_ASSERT(ps[i]->kernel && ps[i]->w, "projection without weights");
        ends[i + 1] = ends[i] + ps[i]->n_out;
        all_panels = all_panels && ps[i]->panels;
    }
    // Output rows [n0, n1) of projection i.
    auto rows = [&](int i, int64_t n0, int64_t n1) {
        const Proj& p = *ps[i];
        const int64_t N = p.n_out;
        float* y = ys[i];
        kernels::MatmulArgs a;
        a.w = p.w;
        a.w_row_stride = p.row_stride;
        a.x = x;
        a.ldx = p.n_in;
        a.xq = xq;
        a.xq_stride = xq_stride_;
        a.y = y + n0;  // the kernel writes column (n - n0)
        a.ldy = N;
        a.m = n;
        a.K = p.n_in;
        a.n0 = n0;
        a.n1 = n1;
        // --repack's panels (a.n0 a multiple of 16): only types with a panel GEMM are repacked
        // (Model::repack_dense), so every call is served and the blocks are never read
        // MOE_AMX_BF16=1: prefill of F16 / BF16 projections on AMX-BF16 tiles (a.n0 a multiple of 16)
        if (p.bf16_panels && n >= kernels::bf16amx::kMinRows) kernels::bf16amx::matmul_bf16_amx({p.bf16_panels, p.n_out, p.n_in}, a);
        else if (p.panels) kernels::panel::panel_matmul({p.type, p.panels, p.n_out, p.n_in}, a, true, p.kernel->amx);
        else (*p.kernel)(a);
        if (p.bias)
            for (int64_t r = 0; r < n; ++r)
                for (int64_t j = n0; j < n1; ++j) y[r * N + j] += p.bias[j];
    };
    const int64_t T = pool.size(), total = ends[count];
    // Decode over panels (--repack): guided chunks (ThreadPool::guided_for) over all the
    // projections' rows, never across a projection. The first chunks are long, so each panel GEMV
    // call streams a long contiguous range and its prefetch runs ahead; the last ones are short, so
    // the threads finish together instead of one waiting out the other's last quarter. Chunks of
    // at least ~96 KiB of panels (a few microseconds of streaming) and at most ~8 MiB: a huge matrix
    // (gpt-oss's lm head, 201088 x 2880 Q8_0 = 615 MB) in halves would leave a thread that a noisy
    // neighbour slows with a long chunk while the other waits. Token by token against the earlier
    // fixed ~4 tasks per thread (OLMoE Q4_K_M, 2 threads): -2.3 % per token (docs/PERFORMANCE.md,
    // session 33).
    const int64_t stride = std::max<int64_t>(1, static_cast<int64_t>(ps[0]->row_stride));
    if (all_panels && T > 1) {
        ThreadPool::GuidedSpec g;
        g.n = total;
        g.align = 16;  // the panels' rows
        g.min_chunk = (int64_t{96} << 10) / stride;
        g.max_chunk = (int64_t{8} << 20) / stride;
        g.cuts = ends + 1;
        g.n_cuts = count - 1;
        pool.guided_for(g, [&](int64_t b, int64_t e, int) {
            int i = 0;
            while (b >= ends[i + 1]) ++i;
            rows(i, b - ends[i], e - ends[i]);
        });
        return;
    }
    // Otherwise tasks of a fixed number of output rows: about 8 tasks per thread (dynamic hand-out
    // evens out the threads), a multiple of 16 (the kernels' register blocks), at least 16 and at
    // most 256 rows. The projections of one input (q/k/v, gate/up) are cut into tasks together:
    // one pool dispatch.
    int64_t grain = std::clamp<int64_t>(total / (8 * T), 16, 256);
    grain = (grain + 15) / 16 * 16;
    // One thread over panels: long tasks (up to ~8 MiB of panels), so the GEMV's prefetch runs ahead.
    if (all_panels) {
        const int64_t cap = std::max<int64_t>(256, (int64_t{8} << 20) / stride);
        grain = std::max(grain, std::min(total / (4 * T), cap) / 16 * 16);
    }
    int64_t first[5] = {0};  // first task of each projection
    for (int i = 0; i < count; ++i) first[i + 1] = first[i] + (ps[i]->n_out + grain - 1) / grain;
    auto tasks = [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            int i = 0;
            while (t >= first[i + 1]) ++i;
            const int64_t n0 = (t - first[i]) * grain;
            rows(i, n0, std::min(ps[i]->n_out, n0 + grain));
        }
    };
    if (T == 1) tasks(0, first[count], 0);
    else pool.parallel_for(first[count], 1, tasks);
}

void Forward::rmsnorm_rows(ThreadPool& pool, int64_t n, int64_t len, const float* x, const float* w, float* y) {
    const kernels::Isa isa = m_.kernels().isa();
    const float eps = m_.config().rms_eps;
    if (n < kParallelRows || pool.size() == 1) {
        cpu::rmsnorm({n, len, eps}, x, w, y, isa);
        return;
    }
    pool.parallel_for(n, (n + 2 * pool.size() - 1) / (2 * pool.size()), [&](int64_t r0, int64_t r1, int) {
        cpu::rmsnorm({r1 - r0, len, eps}, x + r0 * len, w, y + r0 * len, isa);
    });
}

void Forward::check(ThreadPool& pool, const BatchRow* rows, int64_t n, const KvStore& kv) {
    const ModelConfig& c = m_.config();
    if (n < 1 || n > max_batch_)
        throw_error("forward", "batch of ", n, " rows; this model was loaded for 1..", max_batch_, " rows per call");
    if (pool.size() > m_.options().n_threads)
        throw_error("forward", "thread pool of ", pool.size(), " threads; the model was loaded for at most ",
                    m_.options().n_threads);
    if (kv.n_ctx() > m_.rope().n_pos())
        throw_error("forward", "KV cache of ", kv.n_ctx(), " positions is longer than the model's context of ",
                    m_.rope().n_pos(), " (set the model's n_ctx)");
    seq_count_.assign(static_cast<size_t>(kv.n_seq()), 0);
    for (int64_t r = 0; r < n; ++r) {
        const BatchRow& row = rows[r];
        if (row.token < 0 || row.token >= c.n_vocab)
            throw_error("forward", "token id ", row.token, " (row ", r, ") is out of range: the vocabulary has ",
                        c.n_vocab, " tokens (ids 0..", c.n_vocab - 1, ")");
        if (row.seq < 0 || row.seq >= kv.n_seq())
            throw_error("forward", "sequence ", row.seq, " (row ", r, ") is out of range: the cache has ", kv.n_seq(),
                        " sequence slots");
        int64_t& cnt = seq_count_[static_cast<size_t>(row.seq)];
        const int64_t want = kv.length(row.seq) + cnt;
        if (row.pos != want)
            throw_error("forward", "row ", r, " of sequence ", row.seq, " has position ", row.pos,
                        "; the next position of that sequence is ", want);
        ++cnt;
    }
    for (int64_t s = 0; s < kv.n_seq(); ++s)
        if (seq_count_[static_cast<size_t>(s)] > 0) kv.check_append(s, seq_count_[static_cast<size_t>(s)]);
}

void Forward::attention_layer(ThreadPool& pool, int64_t il, const BatchRow* rows, int64_t n, KvStore& kv,
                              ForwardStats* stats) {
    const ModelConfig& c = m_.config();
    const LayerDesc& ld = m_.desc().layer;
    if (ld.mla) {
        attention_mla(pool, il, rows, n, kv, stats);
        return;
    }
    const LayerWeights& w = m_.weights().layers[static_cast<size_t>(il)];
    const LayerProj& P = proj_[static_cast<size_t>(il)];
    const int64_t D = c.n_embd, Hq = c.n_head, Hkv = c.n_head_kv, dk = c.head_dim_k, dv = c.head_dim_v;
    const int64_t qd = Hq * dk, kd = Hkv * dk, vd = Hkv * dv;

    rmsnorm_rows(pool, n, D, b_.x, w.attn_norm.as<float>(), b_.xn);
    // q, k and v read the same normed rows: prepare them once (int8 kernels), then each projection.
    // One dispatch for the three when their kernels read the same prepared input (same act_q8);
    // mixed types (e.g. q4_K q/k with a q6_K v, all int8) still share it.
    const void* xq = prepare(pool, P.q, b_.xn, n);
    if (P.k.kernel->act_q8 == P.q.kernel->act_q8 && P.v.kernel->act_q8 == P.q.kernel->act_q8) {
        const Proj* ps[3] = {&P.q, &P.k, &P.v};
        float* ys[3] = {b_.q, b_.k, b_.v};
        project_many(pool, ps, ys, 3, b_.xn, xq, n);
    } else {
        project(pool, P.q, b_.xn, xq, n, b_.q);
        project(pool, P.k, b_.xn, prepare(pool, P.k, b_.xn, n), n, b_.k);
        project(pool, P.v, b_.xn, prepare(pool, P.v, b_.xn, n), n, b_.v);
    }
    if (ld.qk_norm == QkNorm::PerHead) {
        rmsnorm_rows(pool, n * Hq, dk, b_.q, w.q_norm.as<float>(), b_.q);
        rmsnorm_rows(pool, n * Hkv, dk, b_.k, w.k_norm.as<float>(), b_.k);
    } else if (ld.qk_norm == QkNorm::Whole) {
        rmsnorm_rows(pool, n, qd, b_.q, w.q_norm.as<float>(), b_.q);
        rmsnorm_rows(pool, n, kd, b_.k, w.k_norm.as<float>(), b_.k);
    }
    for (int64_t r = 0; r < n; ++r) b_.pos[r] = rows[r].pos;
    if (n < kParallelRows || pool.size() == 1) {
        ref::rope_apply(m_.rope(), b_.q, n, Hq, b_.pos);
        ref::rope_apply(m_.rope(), b_.k, n, Hkv, b_.pos);
    } else {
        pool.parallel_for(n, (n + 2 * pool.size() - 1) / (2 * pool.size()), [&](int64_t r0, int64_t r1, int) {
            ref::rope_apply(m_.rope(), b_.q + r0 * qd, r1 - r0, Hq, b_.pos + r0);
            ref::rope_apply(m_.rope(), b_.k + r0 * kd, r1 - r0, Hkv, b_.pos + r0);
        });
    }
    for (int64_t r = 0; r < n; ++r) kv.write(il, rows[r].seq, rows[r].pos, 1, b_.k + r * kd, b_.v + r * vd);

    AttentionSpec as;
    as.n_head = Hq;
    as.n_head_kv = Hkv;
    as.head_dim_k = dk;
    as.head_dim_v = dv;
    as.scale = ld.attn_scale;
    as.kv_type = kv.type();
    as.window = ld.window(il);
    as.ring = kv.ring(il);
    Timer att_timer;
    attend_sequences(pool, il, rows, n, kv, as, b_.q, b_.qs, b_.att, b_.atts, w.sinks.as<const float>());
    if (stats) stats->attention += att_timer.seconds();
    project(pool, P.o, b_.att, prepare(pool, P.o, b_.att, n), n, b_.y);
}

void Forward::attend_sequences(ThreadPool& pool, int64_t il, const BatchRow* rows, int64_t n, const KvStore& kv,
                               const AttentionSpec& as, const float* q, float* q_gather, float* out,
                               float* out_gather, const float* sinks) {
    const kernels::Isa isa = m_.kernels().isa();
    const int64_t qd = as.n_head * as.head_dim_k, ad = as.n_head * as.head_dim_v;
    // One attention call per sequence present in the batch over that sequence's cache.
    for (int64_t s = 0; s < kv.n_seq(); ++s) {
        const int64_t ns = seq_count_[static_cast<size_t>(s)];
        if (ns == 0) continue;
        const bool whole = ns == n;  // every row belongs to s: no gather needed
        int64_t m = 0;
        int32_t max_pos = 0;
        for (int64_t r = 0; r < n; ++r) {
            if (rows[r].seq != s) continue;
            if (!whole) std::memcpy(q_gather + m * qd, q + r * qd, sizeof(float) * qd);
            b_.idx[m++] = static_cast<int32_t>(r);
            max_pos = std::max(max_pos, rows[r].pos);
        }
        AttentionArgs a;
        a.q = whole ? q : q_gather;
        a.k = kv.k(il, s);
        a.v = m_.desc().kv.head_dim_v == 0 ? a.k : kv.v(il, s);  // MLA: V inside the K rows
        a.pos = whole ? b_.pos : b_.idx;  // rewritten below for the gathered case
        if (!whole)
            for (int64_t j = 0; j < m; ++j) b_.idx[j] = rows[b_.idx[j]].pos;
        a.n_tokens = m;
        a.n_kv = static_cast<int64_t>(max_pos) + 1;
        a.out = whole ? out : out_gather;
        a.sinks = sinks;
        cpu::attention(as, a, &pool, isa);
        if (!whole) {
            int64_t j = 0;
            for (int64_t r = 0; r < n; ++r)
                if (rows[r].seq == s) std::memcpy(out + r * ad, out_gather + (j++) * ad, sizeof(float) * ad);
        }
    }
}

int64_t Forward::run(ThreadPool& pool, const BatchRow* rows, int64_t n, KvStore& kv, float* logits,
                     ForwardStats* stats) {
    check(pool, rows, n, kv);
    const ModelConfig& c = m_.config();
    if (stats && static_cast<int64_t>(stats->routing.size()) != c.n_layer)
        stats->reset(c.n_layer, static_cast<int>(c.n_expert));
    const ModelWeights& W = m_.weights();
    const int64_t D = c.n_embd;
    Timer total, lap;
    auto mark = [&](double ForwardStats::*slot) {
        if (!stats) return;
        stats->*slot += lap.seconds();
        lap.reset();
    };

    arena_.reset();
    float* f[kBufs];
    int32_t* ip[2];
    void* xq;
    carve(c, n, [&](size_t bytes) { return arena_.alloc(bytes); }, f, ip, &xq);
    b_ = Buffers{f[0],  f[1],  f[2],  f[3],  f[4],  f[5],  f[6],  f[7],  f[8], f[9],
                 f[10], f[11], f[12], f[13], f[14], f[15], f[16], ip[0], ip[1], xq};

    for (int64_t r = 0; r < n; ++r) b_.idx[r] = rows[r].token;
    ref::embedding_lookup({W.token_embd.type, c.n_vocab, D}, W.token_embd.data, b_.idx, n, b_.x);
    mark(&ForwardStats::embed);

    for (int64_t il = 0; il < c.n_layer; ++il) {
        const LayerWeights& w = W.layers[static_cast<size_t>(il)];
        attention_layer(pool, il, rows, n, kv, stats);
        add_inplace(n * D, b_.x, b_.y);
        mark(&ForwardStats::attn_proj);

        rmsnorm_rows(pool, n, D, b_.x, w.ffn_norm.as<float>(), b_.xn);
        if (MoeBlock* moe = m_.moe_block(il)) {
            MoeObserve obs;
            if (stats) {
                obs.times = &stats->moe_stages;
                obs.stats = &stats->routing[static_cast<size_t>(il)];
                obs.trace = stats->trace;
                obs.trace_token_base = rows[0].pos;
            }
            moe->forward(pool, b_.xn, n, b_.y, obs);
            mark(&ForwardStats::moe);
        } else {
            const int64_t F = c.n_ff;
            const LayerProj& P = proj_[static_cast<size_t>(il)];
            const void* xq = prepare(pool, P.gate, b_.xn, n);
            if (P.up.kernel->act_q8 == P.gate.kernel->act_q8) {
                const Proj* ps[2] = {&P.gate, &P.up};
                float* ys[2] = {b_.g, b_.u};
                project_many(pool, ps, ys, 2, b_.xn, xq, n);
            } else {
                project(pool, P.gate, b_.xn, xq, n, b_.g);
                project(pool, P.up, b_.xn, prepare(pool, P.up, b_.xn, n), n, b_.u);
            }
            ref::swiglu(n * F, b_.g, b_.u, b_.g);
            project(pool, P.down, b_.g, prepare(pool, P.down, b_.g, n), n, b_.y);
            mark(&ForwardStats::dense_ffn);
        }
        add_inplace(n * D, b_.x, b_.y);
    }
    for (int64_t s = 0; s < kv.n_seq(); ++s)
        if (seq_count_[static_cast<size_t>(s)] > 0) kv.commit(s, seq_count_[static_cast<size_t>(s)]);

    int64_t n_out = 0;
    for (int64_t r = 0; r < n; ++r)
        if (rows[r].logits) std::memcpy(b_.xn + (n_out++) * D, b_.x + r * D, sizeof(float) * D);
    if (n_out > 0) {
        rmsnorm_rows(pool, n_out, D, b_.xn, W.output_norm.as<float>(), b_.xn);
        project(pool, head_, b_.xn, prepare(pool, head_, b_.xn, n_out), n_out, logits);
    }
    mark(&ForwardStats::head);
    if (stats) {
        stats->total += total.seconds();
        stats->rows += n;
        ++stats->calls;
    }
    return n_out;
}

}  // namespace moe::model
