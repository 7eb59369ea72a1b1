#pragma once
// A generation session over a loaded Model: owns the KV cache (runtime::KvCache behind the
// model::KvStore interface), the forward pass and its statistics.
//
//   Session s(model, pool, {.n_ctx = 2048});
//   auto r = s.generate("Once upon a time", {.n_predict = 32}, [](const std::string& piece) { ... });
//   std::puts(r.stats_line().c_str());
//
// generate(): tokenize (BOS per the vocab) -> batched prefill (chunks of the model's max_batch) ->
// decode loop (sampler.h) streaming complete UTF-8 pieces through the tokenizer's Detokenizer,
// stopping at EOS or after n_predict tokens (or when the context is full).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/forward.h"
#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"

namespace moe::runtime {

// runtime::KvCache as the forward pass's KvStore.
class KvCacheStore final : public model::KvStore {
public:
    explicit KvCacheStore(const KvCacheSpec& spec) : cache_(spec) {}
    KvCache& cache() { return cache_; }
    DType type() const override { return cache_.spec().type; }
    int64_t n_seq() const override { return cache_.spec().n_seq; }
    int64_t n_ctx() const override { return cache_.spec().n_ctx; }
    int64_t length(int64_t seq) const override { return cache_.length(seq); }
    void check_append(int64_t seq, int64_t n) const override { (void)cache_.begin_append(seq, n); }
    void write(int64_t layer, int64_t seq, int64_t pos0, int64_t n, const float* k, const float* v) override {
        cache_.write(layer, seq, pos0, n, k, v);
    }
    void commit(int64_t seq, int64_t n) override { cache_.commit(seq, n); }
    const void* k(int64_t layer, int64_t seq) const override { return cache_.k(layer, seq); }
    const void* v(int64_t layer, int64_t seq) const override { return cache_.v(layer, seq); }
    int64_t ring(int64_t layer) const override { return cache_.ring(layer); }

private:
    KvCache cache_;
};

struct SessionOptions {
    int64_t n_ctx = 0;         // positions per sequence; 0: the model's n_ctx
    int64_t n_seq = 1;         // sequence slots
    DType kv_type = DType::F32;  // F32, F16 or Q8_0
    // Sliding-window layers keep every position instead of a ring of window + max_batch - 1
    // (runtime/kv_cache.h; llama.cpp's --swa-full). Same results, more memory.
    bool swa_full = false;
};

struct GenerateOptions {
    int64_t n_predict = 64;      // most tokens to generate
    SamplerSpec sampler;         // temperature <= 0: greedy
    bool stop_at_eos = true;
};

struct GenerateResult {
    std::vector<int32_t> prompt_tokens;
    std::vector<int32_t> tokens;  // generated (EOS not included)
    std::string text;             // the streamed pieces, concatenated
    bool hit_eos = false;
    bool context_full = false;
    double prompt_s = 0;  // prefill wall time
    double gen_s = 0;     // from the end of prefill to the last generated token (sampling + decode)
    model::ForwardStats stats;  // prefill + decode

    double prompt_tps() const { return prompt_s > 0 ? static_cast<double>(prompt_tokens.size()) / prompt_s : 0; }
    double gen_tps() const { return gen_s > 0 ? static_cast<double>(tokens.size()) / gen_s : 0; }
    // "prompt 12 tok @ 345.6 tok/s | gen 32 tok @ 98.7 tok/s | MoE ...% of time: route ..% ..."
    // and a second line with the expert-load summary.
    std::string stats_line() const;
};

// Expert-load summary over the MoE layers of `stats`: mean/max imbalance (max load / mean load)
// and the three busiest (layer, expert) pairs with their share of that layer's assignments.
std::string expert_load_summary(const model::ForwardStats& stats);
// "route 5% dispatch 3% experts 80% combine 2% shared 10%" of the MoE block's time.
std::string moe_stage_split(const StageTimes& t);

class Session {
public:
    // The pool's size must be <= the model's n_threads. Throws moe::Error for a bad n_ctx / kv_type.
    Session(model::Model& model, ThreadPool& pool, const SessionOptions& opts = {});

    model::Model& model() { return model_; }
    KvCacheStore& kv() { return kv_; }
    int64_t n_ctx() const { return n_ctx_; }
    model::ForwardStats& stats() { return stats_; }
    void clear(int64_t seq) { kv_.cache().clear(seq); }
    void clear_all() { kv_.cache().clear_all(); }

    // Appends tokens to sequence `seq` (positions continue from its cache length), in chunks of
    // the model's max_batch. logits: [n, n_vocab] for every token when all_logits, else [n_vocab]
    // for the last one; may be nullptr. Throws moe::Error for an id out of range, a too long input.
    void eval(int64_t seq, const std::vector<int32_t>& tokens, float* logits, bool all_logits);

    // Generates on sequence 0 after clearing it. on_piece gets each complete UTF-8 piece.
    GenerateResult generate(const std::string& prompt, const GenerateOptions& opts,
                            const std::function<void(const std::string&)>& on_piece = {});

    // Rows given as they are (several sequences at once); see model::Forward::run.
    int64_t forward(const std::vector<model::BatchRow>& rows, float* logits);

private:
    model::Model& model_;
    ThreadPool& pool_;
    int64_t n_ctx_;
    KvCacheStore kv_;
    model::Forward fwd_;
    model::ForwardStats stats_;
    std::vector<model::BatchRow> rows_;
};

}  // namespace moe::runtime
