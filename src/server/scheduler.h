#pragma once
// Continuous-batching scheduler. One thread owns the Session (KV cache with one sequence per slot)
// and loops over steps; every step is ONE forward over
//   - the next token of every decoding slot, and
//   - chunks of prompts still being prefilled (chunked prefill: at most `batch` rows per step in
//     all, so a long prompt is spread over steps and never stalls the decoding slots),
// then samples the slots whose last row was computed. Between steps it retires finished and
// cancelled requests and admits queued ones into free slots. A slot keeps the tokens of its last
// request in the cache; a new request goes to the free slot with the longest common prompt prefix
// and only the rest is computed. Rows are row-local in the forward pass (model/forward.h), so a
// request's greedy output does not depend on what else is batched with it.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/session.h"
#include "server/metrics.h"
#include "server/request.h"

namespace moe::server {

struct SchedulerSpec {
    int64_t n_slots = 4;    // sequences decoded together (--parallel)
    int64_t n_ctx = 0;      // context per slot; 0: the model's
    int64_t batch = 256;    // most rows per forward (decode rows + prefill chunk); <= model max_batch
    int64_t max_queue = 16; // requests waiting for a slot; beyond: rejected (503)
    DType kv_type = DType::F32;
    bool swa_full = false;  // runtime::SessionOptions::swa_full
    // --adaptive-topk KMIN (0: off): route with fewer experts per token while requests wait —
    // KMIN when at least n_slots requests are queued, halfway between KMIN and the model's k
    // when some are, the model's k when none are. Changes output (opt-in); logged and counted.
    int adaptive_kmin = 0;
};

class Scheduler {
public:
    // Starts the scheduler thread. Throws moe::Error for bad sizes.
    Scheduler(model::Model& model, ThreadPool& pool, const SchedulerSpec& spec, Metrics& metrics);
    ~Scheduler();  // stops the thread; unfinished requests finish with reason "cancelled"
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    enum class Admit { Ok, QueueFull, Draining };
    Admit submit(const std::shared_ptr<Request>& r);
    // Stop admitting (submit returns Draining) and wait until every admitted request finished.
    void drain();
    int64_t n_ctx() const { return session_.n_ctx(); }
    const SchedulerSpec& spec() const { return spec_; }

private:
    enum class State { Free, Prefill, Decode };
    struct Slot;
    void loop();
    void admit_locked();
    void step();
    void sample_slot(Slot& s, const float* logits);
    void retire(Slot& s, const std::string& reason, const std::string& error = "");
    void publish_gauges();
    void publish_cache();  // --mem: expert cache counters into the metrics
    void adapt_k(int64_t queue_depth);
    void note_row(Slot& s, size_t pos) const;  // a row at pos of slot s goes into this step

    model::Model& model_;
    SchedulerSpec spec_;
    Metrics& metrics_;
    runtime::Session session_;
    std::vector<std::unique_ptr<Slot>> slots_;
    std::vector<model::BatchRow> rows_;
    std::vector<std::pair<Slot*, size_t>> row_slot_;  // slot whose logits a logits-row is
    std::vector<float> logits_;
    std::vector<float> work_;           // one slot's logits after penalties
    std::vector<int32_t> ends_;         // tokens that end generation (EOS, end-of-turn)
    int full_k_ = 0, cur_k_ = 0;

    std::mutex mu_;
    std::condition_variable cv_, idle_cv_;
    std::deque<std::shared_ptr<Request>> queue_;
    int64_t busy_ = 0;
    bool stop_ = false, draining_ = false;
    std::thread thread_;
};

}  // namespace moe::server
