// The continuous-batching scheduler in process, on a tiny random-weight model:
//  - a greedy request gives the same tokens as runtime::Session::generate (the independent,
//    one-sequence reference) whether it runs alone or batched with other requests, with prompts
//    longer than --batch (chunked prefill) and more requests than slots (queueing);
//  - a seeded sampled request is reproducible across batch compositions;
//  - a repeated prompt reuses the slot's cached prefix and still gives the same tokens;
//  - cancel frees the slot; a full queue rejects;
//  - stop strings across chunk boundaries equal a brute-force reference.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/session.h"
#include "server/scheduler.h"
#include "server/server_test_util.h"
#include "server/stop_matcher.h"
#include "tokenizer/tokenizer.h"

using namespace moe;
using namespace moe::server;

namespace {

struct Out {
    std::vector<int32_t> ids;
    std::string text, reason;
    int64_t reused = 0;
};

Out collect(Request& r) {
    Out o;
    std::vector<Chunk> got;
    while (!r.wait(got, 100)) {
    }
    for (const Chunk& c : got) {
        o.text += c.text;
        for (const TokenLogprob& t : c.tokens) o.ids.push_back(t.id);
    }
    o.reason = r.finish_reason();
    o.reused = r.reused_tokens();
    return o;
}

GenParams params(const tokenizer::Tokenizer& tok, const std::string& prompt, int64_t n, float temp = 0, uint64_t seed = 0) {
    GenParams p;
    p.prompt = tok.encode(prompt);
    p.max_tokens = n;
    p.sampler.temperature = temp;
    p.sampler.top_k = 0;
    p.sampler.top_p = 1;
    p.sampler.min_p = 0;
    p.sampler.seed = seed;
    p.logprobs = true;  // token ids come back with the log-probabilities
    p.ignore_eos = true;
    return p;
}

class SchedulerTest : public ::testing::Test {
protected:
    void SetUp() override {
        model_ = model::Model::load(testutil::tiny_model(), {.n_threads = 2, .max_batch = 16, .n_ctx = 256});
        pool_ = std::make_unique<ThreadPool>(2);
    }
    // Greedy reference from the one-sequence Session.
    std::vector<int32_t> reference(const std::string& prompt, int64_t n) {
        runtime::Session s(*model_, *pool_, {.n_ctx = 256});
        runtime::GenerateOptions g;
        g.n_predict = n;
        g.sampler.temperature = 0;
        g.stop_at_eos = false;
        return s.generate(prompt, g).tokens;
    }
    std::unique_ptr<model::Model> model_;
    std::unique_ptr<ThreadPool> pool_;
    Metrics metrics_;
};

const std::string kLong = "The quick brown fox jumps over the lazy dog, then again over the sleepy cat.";  // > 16 tokens

}  // namespace

TEST_F(SchedulerTest, GreedyOutputIsTheSameAloneAndBatched) {
    const auto& tok = model_->tokenizer();
    ASSERT_GT(tok.encode(kLong).size(), 16u) << "the prompt must be longer than --batch to test chunked prefill";
    const std::vector<int32_t> ref = reference(kLong, 24);
    ASSERT_EQ(ref.size(), 24u);

    Scheduler sched(*model_, *pool_, {.n_slots = 3, .n_ctx = 256, .batch = 16, .max_queue = 8}, metrics_);
    auto alone = std::make_shared<Request>(params(tok, kLong, 24));
    ASSERT_EQ(sched.submit(alone), Scheduler::Admit::Ok);
    const Out a = collect(*alone);
    EXPECT_EQ(a.ids, ref);
    EXPECT_EQ(a.reason, "length");
    EXPECT_EQ(a.text, tok.decode(ref));

    // Batched: five requests on three slots (two queue), mixed lengths, greedy and sampled.
    std::vector<std::shared_ptr<Request>> rs;
    rs.push_back(std::make_shared<Request>(params(tok, "Once upon a time", 30)));
    rs.push_back(std::make_shared<Request>(params(tok, "zz", 5, 0.9f, 42)));
    rs.push_back(std::make_shared<Request>(params(tok, kLong, 24)));
    rs.push_back(std::make_shared<Request>(params(tok, "A different prompt that is also fairly long here", 40, 1.0f, 7)));
    rs.push_back(std::make_shared<Request>(params(tok, kLong + " and more", 12)));
    for (auto& r : rs) ASSERT_EQ(sched.submit(r), Scheduler::Admit::Ok);
    std::vector<Out> outs;
    for (auto& r : rs) outs.push_back(collect(*r));
    EXPECT_EQ(outs[2].ids, ref) << "greedy tokens changed when batched with other requests";
    EXPECT_EQ(outs[0].ids, reference("Once upon a time", 30));
    EXPECT_EQ(outs[4].ids, reference(kLong + " and more", 12));
    EXPECT_EQ(outs[1].ids.size(), 5u);
    EXPECT_EQ(outs[3].ids.size(), 40u);

    // The seeded sampled request alone: same tokens as in the batch.
    auto again = std::make_shared<Request>(params(tok, "A different prompt that is also fairly long here", 40, 1.0f, 7));
    ASSERT_EQ(sched.submit(again), Scheduler::Admit::Ok);
    const Out s = collect(*again);
    EXPECT_EQ(s.ids, outs[3].ids);
    EXPECT_GT(s.reused, 0) << "the same prompt again should reuse a slot's cached prefix";
}

TEST_F(SchedulerTest, PrefixReuseKeepsTheOutput) {
    const auto& tok = model_->tokenizer();
    Scheduler sched(*model_, *pool_, {.n_slots = 2, .n_ctx = 256, .batch = 16, .max_queue = 4}, metrics_);
    auto r1 = std::make_shared<Request>(params(tok, kLong, 10));
    sched.submit(r1);
    const Out o1 = collect(*r1);
    EXPECT_EQ(o1.reused, 0);
    // Shares the prompt and continues it: everything but the last prompt token is reused.
    auto r2 = std::make_shared<Request>(params(tok, kLong + " Yes.", 10));
    sched.submit(r2);
    const Out o2 = collect(*r2);
    EXPECT_GE(o2.reused, static_cast<int64_t>(tok.encode(kLong).size()) - 1);
    EXPECT_EQ(o2.ids, reference(kLong + " Yes.", 10));
    EXPECT_NE(metrics_.prometheus().find("moe_prefix_reused_tokens_total"), std::string::npos);
}

TEST_F(SchedulerTest, CancelFreesTheSlotAndAFullQueueRejects) {
    const auto& tok = model_->tokenizer();
    Scheduler sched(*model_, *pool_, {.n_slots = 1, .n_ctx = 256, .batch = 16, .max_queue = 1}, metrics_);
    auto longr = std::make_shared<Request>(params(tok, "Hello", 200));
    longr->cancel();  // cancelled before it runs: retired at its first step
    ASSERT_EQ(sched.submit(longr), Scheduler::Admit::Ok);
    const Out c = collect(*longr);
    EXPECT_EQ(c.reason, "cancelled");
    EXPECT_LT(c.ids.size(), 200u);
    // One slot + one queue place: with the slot busy and one queued, a third is refused.
    auto a = std::make_shared<Request>(params(tok, "Hello", 200));
    auto b = std::make_shared<Request>(params(tok, "Hello", 5));
    auto d = std::make_shared<Request>(params(tok, "Hello", 5));
    ASSERT_EQ(sched.submit(a), Scheduler::Admit::Ok);
    // b and d race with a's admission: at most two of a, b, d fit (slot + queue) at any moment,
    // unless a already finished; a runs 200 tokens, so d is refused when b is queued.
    const auto sb = sched.submit(b), sd = sched.submit(d);
    EXPECT_TRUE(sb == Scheduler::Admit::Ok);
    EXPECT_EQ(sd, Scheduler::Admit::QueueFull);
    a->cancel();
    EXPECT_EQ(collect(*a).reason, "cancelled");
    EXPECT_EQ(collect(*b).reason, "length");
    sched.drain();
    EXPECT_EQ(sched.submit(d), Scheduler::Admit::Draining);
}

// gpt-oss's sliding-window layers are rings (runtime/kv_cache.h; window 8, batch 4: 11 rows + 7
// mirrored): a cached prefix the rings still hold is reused (a rewind of up to 3 positions), a
// deeper one is computed again; the tokens equal the one-sequence reference either way.
TEST(SchedulerSwa, RingPrefixReuseKeepsTheOutput) {
    auto model = model::Model::load(testutil::tiny_model("tiny-gpt-oss"), {.n_threads = 2, .max_batch = 4, .n_ctx = 256});
    ThreadPool pool(2);
    Metrics metrics;
    const auto& tok = model->tokenizer();
    auto reference = [&](const std::string& prompt, int64_t n) {
        runtime::Session s(*model, pool, {.n_ctx = 256});
        runtime::GenerateOptions g;
        g.n_predict = n;
        g.sampler.temperature = 0;
        g.stop_at_eos = false;
        return s.generate(prompt, g).tokens;
    };
    Scheduler sched(*model, pool, {.n_slots = 1, .n_ctx = 256, .batch = 4, .max_queue = 4}, metrics);
    auto run = [&](const std::string& prompt, int64_t n) {
        auto r = std::make_shared<Request>(params(tok, prompt, n));
        EXPECT_EQ(sched.submit(r), Scheduler::Admit::Ok);
        return collect(*r);
    };
    const Out a = run(kLong, 2);  // the slot then holds prompt + 2 (the last one not yet in the cache)
    EXPECT_EQ(a.ids, reference(kLong, 2));
    const Out b = run(kLong, 2);  // keeps all but the last prompt token: a rewind of 2
    EXPECT_EQ(b.ids, a.ids);
    EXPECT_GE(b.reused, static_cast<int64_t>(tok.encode(kLong).size()) - 1);
    const Out c = run(kLong, 20);
    EXPECT_EQ(c.ids, reference(kLong, 20));
    const Out d = run(kLong, 3);  // after 20 generated tokens, the rings no longer hold the prefix's window
    EXPECT_EQ(d.reused, 0);
    EXPECT_EQ(d.ids, reference(kLong, 3));
}

// Brute force: after each chunk, the earliest occurrence of any stop string in the text so far.
TEST(StopMatcher, MatchesBruteForceAcrossChunkBoundaries) {
    std::mt19937 rng(123);
    const std::string alphabet = "ab c\n";
    for (int iter = 0; iter < 3000; ++iter) {
        std::vector<std::string> stops;
        const int ns = 1 + static_cast<int>(rng() % 3);
        for (int i = 0; i < ns; ++i) {
            std::string s;
            const int len = 1 + static_cast<int>(rng() % 4);
            for (int j = 0; j < len; ++j) s += alphabet[rng() % alphabet.size()];
            stops.push_back(s);
        }
        std::vector<std::string> chunks;
        const int nc = 1 + static_cast<int>(rng() % 12);
        for (int i = 0; i < nc; ++i) {
            std::string c;
            const int len = static_cast<int>(rng() % 4);
            for (int j = 0; j < len; ++j) c += alphabet[rng() % alphabet.size()];
            chunks.push_back(c);
        }
        // Reference.
        std::string full, expect;
        bool expect_hit = false;
        for (const std::string& c : chunks) {
            full += c;
            size_t first = std::string::npos;
            for (const auto& s : stops) first = std::min(first, full.find(s));
            if (first != std::string::npos) {
                expect = full.substr(0, first);
                expect_hit = true;
                break;
            }
        }
        if (!expect_hit) expect = full;
        // Matcher.
        StopMatcher m;
        m.reset(stops);
        std::string got;
        bool hit = false;
        for (const std::string& c : chunks) {
            got += m.push(c, hit);
            if (hit) break;
        }
        if (!hit) got += m.flush("");
        ASSERT_EQ(hit, expect_hit) << iter;
        ASSERT_EQ(got, expect) << iter;
    }
}

// --adaptive-topk: with requests queued behind the only slot, k drops to KMIN (logged, counted),
// and comes back once the queue drains; the last request (queue empty when it runs) routes with
// the model's k and gives exactly the reference output. The model is left at its k afterwards.
TEST_F(SchedulerTest, AdaptiveTopkDropsKWhileRequestsQueue) {
    const auto& tok = model_->tokenizer();
    const std::vector<int32_t> ref = reference("Once upon a time", 20);
    {
        Scheduler sched(*model_, *pool_, {.n_slots = 1, .n_ctx = 256, .batch = 16, .max_queue = 4, .adaptive_kmin = 1},
                        metrics_);
        std::vector<std::shared_ptr<Request>> rs;
        for (int i = 0; i < 3; ++i) rs.push_back(std::make_shared<Request>(params(tok, "Once upon a time", 20)));
        for (auto& r : rs) ASSERT_EQ(sched.submit(r), Scheduler::Admit::Ok);
        std::vector<Out> outs;
        for (auto& r : rs) outs.push_back(collect(*r));
        EXPECT_EQ(outs[2].ids, ref);
        const std::string m = metrics_.prometheus();
        const size_t p = m.find("\nmoe_topk_changes_total ");
        ASSERT_NE(p, std::string::npos);
        EXPECT_GE(std::stoi(m.substr(p + 24)), 2) << "k should drop while queued and come back";
        EXPECT_NE(m.find("\nmoe_topk_current 2\n"), std::string::npos);
        EXPECT_EQ(model_->moe_block(0)->active_k(), 2);
    }
    EXPECT_THROW(Scheduler(*model_, *pool_, {.n_slots = 1, .n_ctx = 256, .batch = 16, .max_queue = 4, .adaptive_kmin = 3},
                           metrics_),
                 Error);
}
