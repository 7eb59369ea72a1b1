// Continuous-batching scheduler (scheduler.h).
#include "server/scheduler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "server/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace moe::server {

namespace {
double now_s() { return static_cast<double>(Timer::now_ns()) * 1e-9; }

// Tokens that end a turn: EOS plus the end-of-turn control tokens of the chat families.
std::vector<int32_t> end_tokens(const tokenizer::Tokenizer& tok) {
    const tokenizer::Vocab& v = tok.vocab();
    std::vector<int32_t> ids;
    if (v.eos_id >= 0) ids.push_back(v.eos_id);
    for (const char* t : {"<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>", "<|end|>", "<|return|>",
                          "<｜end▁of▁sentence｜>", "</s>"}) {
        const int32_t id = v.find(t);
        if (id >= 0 && v.type_of(id) == tokenizer::TokenType::Control &&
            std::find(ids.begin(), ids.end(), id) == ids.end())
            ids.push_back(id);
    }
    return ids;
}
}  // namespace

struct Scheduler::Slot {
    int64_t seq = 0;
    State state = State::Free;
    std::shared_ptr<Request> req;
    std::vector<int32_t> cached;  // tokens whose K/V are in this slot's cache rows, in order
    size_t n_prompt_done = 0;     // prompt tokens in the cache (prefill progress)
    size_t exact = 0;             // leading cached rows computed with the model's own k (reusable)
    int32_t next = 0;             // sampled token to feed at the next step (Decode)
    int64_t generated = 0;
    int64_t reused = 0;
    double last_token_s = 0;
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<tokenizer::Detokenizer> detok;
    StopMatcher stop;
    std::unordered_map<int32_t, int32_t> counts;  // generated token -> occurrences (penalties)
};

Scheduler::Scheduler(model::Model& model, ThreadPool& pool, const SchedulerSpec& spec, Metrics& metrics)
    : model_(model),
      spec_(spec),
      metrics_(metrics),
      session_(model, pool, runtime::SessionOptions{.n_ctx = spec.n_ctx, .n_seq = spec.n_slots, .kv_type = spec.kv_type, .swa_full = spec.swa_full}) {
    if (spec_.n_slots < 1 || spec_.n_slots > 256)
        throw_error("server", "--parallel ", spec_.n_slots, " must be in [1, 256]");
    if (spec_.batch < spec_.n_slots || spec_.batch > model.options().max_batch)
        throw_error("server", "--batch ", spec_.batch, " must be in [--parallel = ", spec_.n_slots, ", ",
                    model.options().max_batch, "] (one row per decoding slot per step)");
    if (spec_.max_queue < 0) throw_error("server", "--queue ", spec_.max_queue, " must be >= 0");
    full_k_ = cur_k_ = static_cast<int>(model.config().n_expert_used);
    if (spec_.adaptive_kmin != 0 && (spec_.adaptive_kmin < 1 || spec_.adaptive_kmin > full_k_ || model.config().n_expert == 0))
        throw_error("server", "--adaptive-topk ", spec_.adaptive_kmin, " must be in [1, ", full_k_,
                    "] (the model routes to ", full_k_, " experts per token)");
    ends_ = end_tokens(model.tokenizer());
    for (int64_t i = 0; i < spec_.n_slots; ++i) {
        slots_.push_back(std::make_unique<Slot>());
        slots_.back()->seq = i;
    }
    logits_.resize(static_cast<size_t>(spec_.n_slots * model.config().n_vocab));
    publish_gauges();
    publish_cache();
    thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
    {
        std::lock_guard<std::mutex> l(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    if (cur_k_ != full_k_)  // leave the model as it was given
        for (int64_t il = 0; il < model_.config().n_layer; ++il)
            if (MoeBlock* b = model_.moe_block(il)) b->set_active_k(full_k_);
    for (auto& r : queue_) r->finish("cancelled", 0, 0, "the server is shutting down");
    for (auto& s : slots_)
        if (s->req) s->req->finish("cancelled", s->generated, s->reused, "the server is shutting down");
}

Scheduler::Admit Scheduler::submit(const std::shared_ptr<Request>& r) {
    {
        std::lock_guard<std::mutex> l(mu_);
        if (draining_ || stop_) return Admit::Draining;
        const int64_t free_slots = spec_.n_slots - busy_;
        if (static_cast<int64_t>(queue_.size()) >= spec_.max_queue + free_slots) return Admit::QueueFull;
        queue_.push_back(r);
    }
    cv_.notify_all();
    return Admit::Ok;
}

void Scheduler::drain() {
    std::unique_lock<std::mutex> l(mu_);
    draining_ = true;
    idle_cv_.wait(l, [&] { return queue_.empty() && busy_ == 0; });
}

void Scheduler::adapt_k(int64_t depth) {
    if (spec_.adaptive_kmin <= 0) return;
    const int kmin = spec_.adaptive_kmin;
    const int want = depth >= spec_.n_slots ? kmin : depth > 0 ? (full_k_ + kmin + 1) / 2 : full_k_;
    if (want == cur_k_) return;
    for (int64_t il = 0; il < model_.config().n_layer; ++il)
        if (MoeBlock* b = model_.moe_block(il)) b->set_active_k(want);
    log(LogLevel::Info, "server", "adaptive top-k: ", cur_k_, " -> ", want, " experts per token (", depth,
        " requests queued)");
    cur_k_ = want;
    metrics_.topk_change();
}

void Scheduler::admit_locked() {
    // Requests whose client left while they waited never take a slot.
    for (auto it = queue_.begin(); it != queue_.end();) {
        if (!(*it)->cancelled()) {
            ++it;
            continue;
        }
        (*it)->finish("cancelled", 0, 0);
        it = queue_.erase(it);
        idle_cv_.notify_all();  // drain() may be waiting for an empty queue
    }
    while (!queue_.empty()) {
        // Free slot with the longest common prefix with this prompt (ties: lowest index).
        const std::shared_ptr<Request>& r = queue_.front();
        const std::vector<int32_t>& p = r->params().prompt;
        Slot* best = nullptr;
        size_t best_lcp = 0;
        for (auto& s : slots_) {
            if (s->state != State::Free) continue;
            size_t lcp = 0;
            while (lcp < s->cached.size() && lcp < p.size() && s->cached[lcp] == p[lcp]) ++lcp;
            // Rows computed while --adaptive-topk had lowered k are not reused.
            lcp = std::min(lcp, s->exact);
            if (!best || lcp > best_lcp) best = s.get(), best_lcp = lcp;
        }
        if (!best) return;
        // At least the last prompt token is computed again: its logits start the generation.
        Slot& s = *best;
        // (0 when the slot's sliding-window rings no longer hold what the prefix needs)
        const auto keep = static_cast<size_t>(
            session_.kv().cache().truncate(s.seq, static_cast<int64_t>(std::min(best_lcp, p.size() - 1))));
        s.cached.resize(keep);
        s.exact = std::min(s.exact, keep);
        s.n_prompt_done = keep;
        s.reused = static_cast<int64_t>(keep);
        s.req = r;
        s.state = State::Prefill;
        s.generated = 0;
        s.counts.clear();
        s.sampler = std::make_unique<Sampler>(r->params().sampler);
        s.detok = std::make_unique<tokenizer::Detokenizer>(model_.tokenizer());
        s.stop.reset(r->params().stop);
        ++busy_;
        queue_.pop_front();
        metrics_.prefix_reused(static_cast<int64_t>(keep));
    }
}

void Scheduler::loop() {
    for (;;) {
        int64_t depth = 0;
        {
            std::unique_lock<std::mutex> l(mu_);
            cv_.wait(l, [&] { return stop_ || busy_ > 0 || !queue_.empty(); });
            if (stop_) return;
            admit_locked();
            depth = static_cast<int64_t>(queue_.size());
        }
        adapt_k(depth);
        publish_gauges();
        try {
            step();
        } catch (const std::exception& e) {
            // A forward error is a bug or bad weights: fail the requests of this step, keep serving.
            log(LogLevel::Error, "server", "step failed: ", e.what());
            // The forward checks its rows before touching the cache, so the cache is as before
            // the step; the slots' token lists are not: forget them (no prefix reuse).
            for (auto& s : slots_) {
                if (s->state != State::Free) retire(*s, "error", e.what());
                session_.kv().cache().clear(s->seq);
                s->cached.clear();
                s->exact = 0;
            }
        }
        publish_gauges();
    }
}

void Scheduler::retire(Slot& s, const std::string& reason, const std::string& error) {
    if (s.state == State::Free) return;
    std::string tail = s.detok->flush();
    if (reason != "stop" && reason != "cancelled" && reason != "error") {
        Chunk c;
        c.text = s.stop.flush(tail);
        if (!c.text.empty()) s.req->push(std::move(c));
    }
    metrics_.tokens(0, s.generated);
    // Free the slot before telling the client, so a request it submits next sees the free slot.
    std::shared_ptr<Request> req = std::move(s.req);
    s.sampler.reset();
    s.detok.reset();
    s.state = State::Free;
    {
        std::lock_guard<std::mutex> l(mu_);
        --busy_;
    }
    req->finish(reason, s.generated, s.reused, error);
    idle_cv_.notify_all();
}

void Scheduler::note_row(Slot& s, size_t pos) const {
    if (cur_k_ != full_k_) s.exact = std::min(s.exact, pos);
    else if (s.exact == pos) s.exact = pos + 1;
}

void Scheduler::step() {
    // Retire cancelled requests before spending compute on them.
    for (auto& s : slots_)
        if (s->state != State::Free && s->req->cancelled()) retire(*s, "cancelled");

    rows_.clear();
    row_slot_.clear();
    for (auto& sp : slots_) {
        Slot& s = *sp;
        if (s.state != State::Decode) continue;
        rows_.push_back({s.next, static_cast<int32_t>(s.cached.size()), static_cast<int32_t>(s.seq), true});
        note_row(s, s.cached.size());
        s.cached.push_back(s.next);
        row_slot_.push_back({&s, 0});
    }
    // Prefill chunks in slot order with what is left of the step's rows.
    for (auto& sp : slots_) {
        Slot& s = *sp;
        if (s.state != State::Prefill) continue;
        const std::vector<int32_t>& p = s.req->params().prompt;
        const int64_t room = spec_.batch - static_cast<int64_t>(rows_.size());
        if (room <= 0) break;
        const size_t n = std::min<size_t>(static_cast<size_t>(room), p.size() - s.n_prompt_done);
        for (size_t i = 0; i < n; ++i) {
            const size_t j = s.n_prompt_done + i;
            const bool last = j + 1 == p.size();
            rows_.push_back({p[j], static_cast<int32_t>(j), static_cast<int32_t>(s.seq), last});
            note_row(s, j);
            s.cached.push_back(p[j]);
            if (last) row_slot_.push_back({&s, 0});
        }
        s.n_prompt_done += n;
    }
    if (rows_.empty()) return;

    Timer t;
    const int64_t n_out = session_.forward(rows_, logits_.data());
    metrics_.step(static_cast<int64_t>(rows_.size()), t.seconds());
    MOE_ASSERT(n_out == static_cast<int64_t>(row_slot_.size()), "forward returned ", n_out, " logit rows");
    const int64_t V = model_.config().n_vocab;
    for (size_t i = 0; i < row_slot_.size(); ++i) {
        Slot& s = *row_slot_[i].first;
        if (s.state == State::Prefill) {
            metrics_.tokens(static_cast<int64_t>(s.req->params().prompt.size()) - s.reused, 0);
            s.state = State::Decode;
        }
        sample_slot(s, logits_.data() + static_cast<int64_t>(i) * V);
    }

    // Expert load since start, per layer (layers without experts: empty).
    std::vector<std::vector<uint64_t>> load;
    for (const RoutingStats& r : session_.stats().routing) {
        load.emplace_back();
        for (int64_t c : r.counts()) load.back().push_back(static_cast<uint64_t>(c));
    }
    metrics_.set_expert_load(load);
    publish_cache();
}

void Scheduler::publish_cache() {
    // --mem: the cache is only touched by forward passes, i.e. on this thread.
    const ExpertCache* c = model_.expert_cache();
    if (!c) return;
    ExpertCacheGauges g;
    g.slots = c->capacity();
    const ExpertCacheCounters t = c->total();
    g.hits = t.hits;
    g.misses = t.misses;
    g.evictions = t.evictions;
    g.prefetch_issued = t.prefetch_issued;
    g.prefetch_used = t.prefetch_used;
    g.bytes_read = t.bytes_read;
    g.stall_s = t.stall_s;
    for (const ExpertCacheCounters& l : c->layer_counters()) g.layers.push_back({l.hits, l.misses});
    metrics_.set_expert_cache(g);
}

void Scheduler::sample_slot(Slot& s, const float* raw) {
    const GenParams& p = s.req->params();
    const int64_t V = model_.config().n_vocab;
    const tokenizer::Tokenizer& tok = model_.tokenizer();
    std::vector<float>& work = work_;
    work.assign(raw, raw + V);
    if (p.presence_penalty != 0 || p.frequency_penalty != 0)
        for (const auto& [id, n] : s.counts)
            work[static_cast<size_t>(id)] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(n);
    const int32_t id = s.sampler->sample(work.data(), V);
    s.sampler->accept(id);

    const double now = now_s();
    if (s.generated == 0) metrics_.ttft(now - s.req->arrival_s());
    else metrics_.itl(now - s.last_token_s);
    s.last_token_s = now;

    if (!p.ignore_eos && std::find(ends_.begin(), ends_.end(), id) != ends_.end()) {
        retire(s, "stop");
        return;
    }
    ++s.generated;
    ++s.counts[id];

    Chunk c;
    if (p.logprobs) {
        // log-softmax of the model's logits (before penalties and sampling filters), in double.
        double mx = raw[0];
        for (int64_t i = 1; i < V; ++i) mx = std::max(mx, static_cast<double>(raw[i]));
        double sum = 0;
        for (int64_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(raw[i]) - mx);
        const double lse = mx + std::log(sum);
        TokenLogprob tl;
        tl.id = id;
        tl.piece = tok.token_to_piece(id, true);
        tl.logprob = static_cast<float>(raw[id] - lse);
        if (p.top_logprobs > 0) {
            std::vector<int32_t> idx(static_cast<size_t>(V));
            for (int64_t i = 0; i < V; ++i) idx[static_cast<size_t>(i)] = static_cast<int32_t>(i);
            const size_t n = std::min<size_t>(static_cast<size_t>(p.top_logprobs), idx.size());
            std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(n), idx.end(), [&](int32_t a, int32_t b) {
                return raw[a] > raw[b] || (raw[a] == raw[b] && a < b);
            });
            for (size_t i = 0; i < n; ++i)
                tl.top.push_back({tok.token_to_piece(idx[i], true), static_cast<float>(raw[idx[i]] - lse)});
        }
        c.tokens.push_back(std::move(tl));
    }
    bool hit_stop = false;
    c.text = s.stop.push(s.detok->push(id), hit_stop);
    // One chunk per token even when its text is empty (held back by a stop string, part of a UTF-8
    // character, a token without text): a streaming client sees one event per token, as from
    // llama-server and OpenAI.
    s.req->push(std::move(c));
    if (hit_stop) return retire(s, "stop");
    // Length: max_tokens reached, or no room to feed the token back.
    if (s.generated >= p.max_tokens || static_cast<int64_t>(s.cached.size()) + 1 > session_.n_ctx())
        return retire(s, "length");
    s.next = id;
}

void Scheduler::publish_gauges() {
    SchedulerGauges g;
    {
        std::lock_guard<std::mutex> l(mu_);
        g.queue_depth = static_cast<int64_t>(queue_.size());
        g.busy_slots = busy_;
    }
    g.n_slots = spec_.n_slots;
    g.kv_capacity = spec_.n_slots * session_.n_ctx();
    for (auto& s : slots_) g.kv_used += static_cast<int64_t>(s->cached.size());
    g.current_k = cur_k_;
    g.full_k = full_k_;
    metrics_.set_gauges(g);
}

}  // namespace moe::server
