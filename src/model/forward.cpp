// The forward pass over a batch of (token, pos, seq) rows (see forward.h).
#include "model/forward.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "core/error.h"
#include "core/timer.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul_dense.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/ref/elementwise.h"
#include "kernels/ref/embedding.h"
#include "kernels/ref/rope.h"
#include "model/model.h"

namespace moe::model {

void ForwardStats::reset(int64_t n_layer, int n_expert) {
    *this = ForwardStats{};
    routing.resize(static_cast<size_t>(n_layer));
    for (auto& r : routing) r.reset(n_expert);
}

namespace {

// Scratch layout for T rows (the same function sizes the plan and carves the arena).
template <typename Alloc>
void carve(const ModelConfig& c, int64_t T, Alloc&& alloc, float** out_f, int32_t** out_i) {
    const int64_t D = c.n_embd, qd = c.n_head * c.head_dim_k, kd = c.n_head_kv * c.head_dim_k,
                  vd = c.n_head_kv * c.head_dim_v, ad = c.n_head * c.head_dim_v;
    bool dense = false;  // dense FFN scratch only when some block is dense
    for (int64_t il = 0; il < c.n_layer; ++il) dense = dense || !c.is_moe_layer(il);
    const int64_t F = dense ? c.n_ff : 1;
    const int64_t sizes[] = {T * D, T * D, T * qd, T * kd, T * vd, T * ad, T * D, T * qd, T * ad, T * F, T * F};
    for (size_t i = 0; i < std::size(sizes); ++i) out_f[i] = static_cast<float*>(alloc(sizes[i] * sizeof(float)));
    for (int i = 0; i < 2; ++i) out_i[i] = static_cast<int32_t*>(alloc(T * sizeof(int32_t)));
}

void add_inplace(int64_t n, float* x, const float* y) { ref::add(n, x, y, x); }

}  // namespace

Forward::Forward(Model& model) : m_(model), max_batch_(model.options().max_batch) {
    ArenaPlan plan;
    float* f[11];
    int32_t* i[2];
    carve(m_.config(), max_batch_, [&](size_t bytes) { plan.add(bytes); return nullptr; }, f, i);
    arena_.reserve(plan.bytes());
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

void Forward::attention_layer(ThreadPool& pool, int64_t il, const BatchRow* rows, int64_t n, KvStore& kv) {
    const ModelConfig& c = m_.config();
    const LayerDesc& ld = m_.desc().layer;
    const LayerWeights& w = m_.weights().layers[static_cast<size_t>(il)];
    const kernels::MatmulKernel& mm = m_.kernels().matmul(DType::F32, "attention");
    const kernels::Isa isa = m_.kernels().isa();
    const int64_t D = c.n_embd, Hq = c.n_head, Hkv = c.n_head_kv, dk = c.head_dim_k, dv = c.head_dim_v;
    const int64_t qd = Hq * dk, kd = Hkv * dk, vd = Hkv * dv, ad = Hq * dv;

    cpu::rmsnorm({n, D, c.rms_eps}, b_.x, w.attn_norm.as<float>(), b_.xn, isa);
    cpu::matmul_dense({n, qd, D, 0}, mm, b_.xn, w.wq.data, w.bq.as<float>(), b_.q, &pool);
    cpu::matmul_dense({n, kd, D, 0}, mm, b_.xn, w.wk.data, w.bk.as<float>(), b_.k, &pool);
    cpu::matmul_dense({n, vd, D, 0}, mm, b_.xn, w.wv.data, w.bv.as<float>(), b_.v, &pool);
    if (ld.qk_norm == QkNorm::PerHead) {
        cpu::rmsnorm({n * Hq, dk, c.rms_eps}, b_.q, w.q_norm.as<float>(), b_.q, isa);
        cpu::rmsnorm({n * Hkv, dk, c.rms_eps}, b_.k, w.k_norm.as<float>(), b_.k, isa);
    } else if (ld.qk_norm == QkNorm::Whole) {
        cpu::rmsnorm({n, qd, c.rms_eps}, b_.q, w.q_norm.as<float>(), b_.q, isa);
        cpu::rmsnorm({n, kd, c.rms_eps}, b_.k, w.k_norm.as<float>(), b_.k, isa);
    }
    for (int64_t r = 0; r < n; ++r) b_.pos[r] = rows[r].pos;
    ref::rope_apply(m_.rope(), b_.q, n, Hq, b_.pos);
    ref::rope_apply(m_.rope(), b_.k, n, Hkv, b_.pos);
    for (int64_t r = 0; r < n; ++r) kv.write(il, rows[r].seq, rows[r].pos, 1, b_.k + r * kd, b_.v + r * vd);

    AttentionSpec as;
    as.n_head = Hq;
    as.n_head_kv = Hkv;
    as.head_dim_k = dk;
    as.head_dim_v = dv;
    as.scale = ld.attn_scale;
    as.kv_type = kv.type();
    // One attention call per sequence present in the batch over that sequence's cache.
    for (int64_t s = 0; s < kv.n_seq(); ++s) {
        const int64_t ns = seq_count_[static_cast<size_t>(s)];
        if (ns == 0) continue;
        const bool whole = ns == n;  // every row belongs to s: no gather needed
        int64_t m = 0;
        int32_t max_pos = 0;
        for (int64_t r = 0; r < n; ++r) {
            if (rows[r].seq != s) continue;
            if (!whole) std::memcpy(b_.qs + m * qd, b_.q + r * qd, sizeof(float) * qd);
            b_.idx[m++] = static_cast<int32_t>(r);
            max_pos = std::max(max_pos, rows[r].pos);
        }
        AttentionArgs a;
        a.q = whole ? b_.q : b_.qs;
        a.k = kv.k(il, s);
        a.v = kv.v(il, s);
        a.pos = whole ? b_.pos : b_.idx;  // rewritten below for the gathered case
        if (!whole)
            for (int64_t j = 0; j < m; ++j) b_.idx[j] = rows[b_.idx[j]].pos;
        a.n_tokens = m;
        a.n_kv = static_cast<int64_t>(max_pos) + 1;
        a.out = whole ? b_.att : b_.atts;
        cpu::attention(as, a, &pool, isa);
        if (!whole) {
            int64_t j = 0;
            for (int64_t r = 0; r < n; ++r)
                if (rows[r].seq == s) std::memcpy(b_.att + r * ad, b_.atts + (j++) * ad, sizeof(float) * ad);
        }
    }
    cpu::matmul_dense({n, D, ad, 0}, mm, b_.att, w.wo.data, nullptr, b_.y, &pool);
}

int64_t Forward::run(ThreadPool& pool, const BatchRow* rows, int64_t n, KvStore& kv, float* logits,
                     ForwardStats* stats) {
    check(pool, rows, n, kv);
    const ModelConfig& c = m_.config();
    if (stats && static_cast<int64_t>(stats->routing.size()) != c.n_layer)
        stats->reset(c.n_layer, static_cast<int>(c.n_expert));
    const ModelWeights& W = m_.weights();
    const kernels::MatmulKernel& mm = m_.kernels().matmul(DType::F32, "forward");
    const kernels::Isa isa = m_.kernels().isa();
    const int64_t D = c.n_embd;
    Timer total, lap;
    auto mark = [&](double ForwardStats::*slot) {
        if (!stats) return;
        stats->*slot += lap.seconds();
        lap.reset();
    };

    arena_.reset();
    float* f[11];
    int32_t* ip[2];
    carve(c, n, [&](size_t bytes) { return arena_.alloc(bytes); }, f, ip);
    b_ = Buffers{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], ip[0], ip[1]};

    for (int64_t r = 0; r < n; ++r) b_.idx[r] = rows[r].token;
    ref::embedding_lookup({DType::F32, c.n_vocab, D}, W.token_embd.data, b_.idx, n, b_.x);
    mark(&ForwardStats::embed);

    for (int64_t il = 0; il < c.n_layer; ++il) {
        const LayerWeights& w = W.layers[static_cast<size_t>(il)];
        attention_layer(pool, il, rows, n, kv);
        add_inplace(n * D, b_.x, b_.y);
        mark(&ForwardStats::attn_proj);

        cpu::rmsnorm({n, D, c.rms_eps}, b_.x, w.ffn_norm.as<float>(), b_.xn, isa);
        if (MoeBlock* moe = m_.moe_block(il)) {
            MoeObserve obs;
            if (stats) {
                obs.times = &stats->moe_stages;
                obs.stats = &stats->routing[static_cast<size_t>(il)];
            }
            moe->forward(pool, b_.xn, n, b_.y, obs);
            mark(&ForwardStats::moe);
        } else {
            const int64_t F = c.n_ff;
            cpu::matmul_dense({n, F, D, 0}, mm, b_.xn, w.ffn_gate.data, nullptr, b_.g, &pool);
            cpu::matmul_dense({n, F, D, 0}, mm, b_.xn, w.ffn_up.data, nullptr, b_.u, &pool);
            ref::swiglu(n * F, b_.g, b_.u, b_.g);
            cpu::matmul_dense({n, D, F, 0}, mm, b_.g, w.ffn_down.data, nullptr, b_.y, &pool);
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
        cpu::rmsnorm({n_out, D, c.rms_eps}, b_.xn, W.output_norm.as<float>(), b_.xn, isa);
        cpu::matmul_dense({n_out, c.n_vocab, D, 0}, mm, b_.xn, W.output.data, nullptr, logits, &pool);
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
