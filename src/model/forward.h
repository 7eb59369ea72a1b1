#pragma once
// The forward pass: a batch of rows (token, position, sequence) -> logits for the rows that ask
// for them. Rows of several sequences may be mixed in one batch (continuous batching); each row
// attends only to its own sequence's cache rows 0..pos.
//
//   per block: x += Wo attention(rope(qk_norm(Wq/k/v rmsnorm(x) + b)))   (K/V appended to the cache)
//              x += ffn(rmsnorm(x))                    (MoeBlock, or dense SwiGLU for dense blocks)
//   head:      logits = Wout rmsnorm(x)
//
// Every op is row-local with a fixed summation order (matmul kernels, attention, MoE block), so a
// row's logits are bitwise the same whatever the batch size, the other rows and the thread count:
// prefill and token-by-token decode agree exactly. Scratch is planned once (Model's max_batch); a
// call allocates nothing (except routing traces, which are off).
#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/ref/attention.h"
#include "kernels/cpu/cpu_kernels.h"
#include "moe/routing_stats.h"

namespace moe::model {

class Model;

struct BatchRow {
    int32_t token = 0;
    int32_t pos = 0;     // must be the next position of `seq` (cache length + earlier rows of seq)
    int32_t seq = 0;     // sequence slot in the KV store
    bool logits = false; // write this row's logits
};

// Where K/V rows live (runtime/session.h adapts runtime::KvCache to it; the model layer does not
// own a cache). Layout of k(layer, seq): row p, kv head g at element (p * n_head_kv + g) * head_dim.
class KvStore {
public:
    virtual ~KvStore() = default;
    virtual DType type() const = 0;  // F32 or F16
    virtual int64_t n_seq() const = 0;
    virtual int64_t n_ctx() const = 0;
    virtual int64_t length(int64_t seq) const = 0;
    // Throws moe::Error when n more rows do not fit (the message names the context size).
    virtual void check_append(int64_t seq, int64_t n) const = 0;
    virtual void write(int64_t layer, int64_t seq, int64_t pos0, int64_t n, const float* k, const float* v) = 0;
    virtual void commit(int64_t seq, int64_t n) = 0;
    virtual const void* k(int64_t layer, int64_t seq) const = 0;
    virtual const void* v(int64_t layer, int64_t seq) const = 0;
    // > 0: the layer's rows are a ring of that many positions (AttentionSpec::ring); 0: row = position.
    virtual int64_t ring(int64_t /*layer*/) const { return 0; }
};

// Wall time per part of the forward pass and expert load per layer, accumulated over calls.
struct ForwardStats {
    // seconds; attn_proj is the whole attention block (norm, q/k/v/o projections, RoPE, cache
    // writes and the attention kernel), attention the attention kernel's part of it
    double embed = 0, attn_proj = 0, attention = 0, moe = 0, dense_ffn = 0, head = 0, total = 0;
    StageTimes moe_stages;              // route / dispatch / experts / combine / shared (MoE blocks)
    std::vector<RoutingStats> routing;  // per layer (n_expert 0 for dense layers)
    int64_t rows = 0, calls = 0;
    // When set (not owned), every MoE layer appends its routing per row: layer, token = the batch's
    // first position + row index (exact for one sequence), experts, weights. Kept by reset().
    RoutingTrace* trace = nullptr;

    void reset(int64_t n_layer, int n_expert);
};

class Forward {
public:
    explicit Forward(Model& model);
    int64_t max_batch() const { return max_batch_; }

    // rows[n] (1 <= n <= max_batch) -> logits[n_out, n_vocab] for the rows with .logits, in row
    // order; returns n_out. Checks every row first (token id in range, sequence slot, position =
    // next position of its sequence, context room) and throws moe::Error("[forward] ...") before
    // touching the cache. pool.size() must be <= the model's n_threads.
    int64_t run(ThreadPool& pool, const BatchRow* rows, int64_t n, KvStore& kv, float* logits,
                ForwardStats* stats = nullptr);

    // One weight matrix of the forward pass: its rows in place in the mapping (file type), the
    // kernel for that type, bias (f32) or null. With --repack, panels (Model::dense_panels): the
    // same rows in the panel layout, which every call then reads (the blocks may be released).
    struct Proj {
        const kernels::MatmulKernel* kernel = nullptr;
        const void* w = nullptr;
        size_t row_stride = 0;
        int64_t n_out = 0, n_in = 0;
        const float* bias = nullptr;
        DType type = DType::F32;
        const uint8_t* panels = nullptr;
        const uint16_t* bf16_panels = nullptr;  // MOE_AMX_BF16=1: prefill on AMX-BF16 (Model::bf16_panels)
    };

private:
    void check(ThreadPool& pool, const BatchRow* rows, int64_t n, const KvStore& kv);
    void attention_layer(ThreadPool& pool, int64_t il, const BatchRow* rows, int64_t n, KvStore& kv,
                         ForwardStats* stats);
    // MLA variant (attn_mla.cpp): same contract, result in b_.y.
    void attention_mla(ThreadPool& pool, int64_t il, const BatchRow* rows, int64_t n, KvStore& kv,
                       ForwardStats* stats);
    // One attention kernel call per sequence present in the batch (queries q [n, Hq, as.head_dim_k]
    // -> out [n, Hq, as.head_dim_v]), gathering the rows of a sequence when the batch mixes them.
    void attend_sequences(ThreadPool& pool, int64_t il, const BatchRow* rows, int64_t n, const KvStore& kv,
                          const AttentionSpec& as, const float* q, float* q_gather, float* out, float* out_gather,
                          const float* sinks = nullptr);
    // Activations x[n, K] prepared for `p`'s kernel: ActQ8 rows into b_.xq for the int8 kernels
    // (once per x, shared by every projection of x), nothing for the float kernels.
    const void* prepare(ThreadPool& pool, const Proj& p, const float* x, int64_t n);
    // y[n, N] = x[n, K] W^T (+ bias), threads over blocks of output rows; xq from prepare().
    void project(ThreadPool& pool, const Proj& p, const float* x, const void* xq, int64_t n, float* y);
    // The same for up to 4 projections of one input x (ys[i]: [n, ps[i]->n_out]), in one dispatch.
    void project_many(ThreadPool& pool, const Proj* const* ps, float* const* ys, int count, const float* x,
                      const void* xq, int64_t n);
    void rmsnorm_rows(ThreadPool& pool, int64_t n, int64_t len, const float* x, const float* w, float* y);

    Model& m_;
    int64_t max_batch_;
    Arena arena_;
    size_t xq_stride_ = 0;            // bytes per ActQ8 row (longest projection input)
    std::vector<int64_t> seq_count_;  // rows per sequence of the current batch (sized n_seq)
    struct LayerProj {
        Proj q, k, v, o, gate, up, down;  // gate/up/down: dense FFN blocks only
        Proj q_a, q_b, kv_a;              // MLA
    };
    std::vector<LayerProj> proj_;     // per layer, resolved once
    Proj head_;
    struct Buffers {
        float *x, *xn, *q, *k, *v, *att, *y, *qs, *atts, *g, *u;
        float *qa, *kva, *qm, *qms, *lat, *lats;  // MLA: [T, q_lora], [T, r+rope], 2x [T, H, r+rope], 2x [T, H, r]
        int32_t *pos, *idx;
        void* xq;
    } b_{};
};

}  // namespace moe::model
