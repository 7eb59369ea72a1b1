// `moe serve --mem` (the `moe` binary, MOE_BINARY): at the smallest budget the model accepts (the
// cache holds only top_k experts, so every expert is read from the file) and at that plus 6 slots,
// the greedy output of every request equals that of a server without --mem, alone and two at a
// time; /metrics carries the expert-cache series and the hit rate moves as requests run. A budget below the
// minimum is one clear startup error that names --parallel.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "model/model.h"
#include "server/server_test_util.h"

using nlohmann::json;
using moe::testutil::prom_metric;
using moe::testutil::ServeProcess;
using moe::testutil::tiny_model;

namespace {

constexpr const char* kArgs = " -t 1 --parallel 2 --ctx 256 --batch 64";

std::string complete(int port, const std::string& prompt, int max_tokens) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    const json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    if (!r || r->status != 200) return "<failed: " + (r ? r->body : std::string("no answer")) + ">";
    return json::parse(r->body)["choices"][0]["text"].get<std::string>();
}

// Both prompts at once (two slots decode together, so each layer's step needs up to 4 experts
// from a cache of 2: the layer runs in groups).
std::vector<std::string> complete_pair(int port, const std::string& a, const std::string& b, int max_tokens) {
    std::vector<std::string> out(2);
    std::thread ta([&] { out[0] = complete(port, a, max_tokens); });
    std::thread tb([&] { out[1] = complete(port, b, max_tokens); });
    ta.join();
    tb.join();
    return out;
}

}  // namespace

TEST(ServeMem, SmallBudgetsGiveTheSameGreedyOutputAndAHitRate) {
    const std::string path = tiny_model();
    // The exact minimum of the budget for the server's options (--ctx 256 x 2 slots, batch 64).
    moe::model::MemoryBudget b;
    int top_k = 0, total = 0;
    {
        moe::model::ModelOptions mo;
        mo.n_threads = 1;
        mo.n_ctx = 256;
        mo.max_batch = 64;
        mo.cache.mem_budget = 1ull << 40;
        mo.cache.kv_seqs = 2;
        auto m = moe::model::Model::load(path, mo);
        b = m->memory_budget();
        top_k = static_cast<int>(m->config().n_expert_used);
        total = b.total_experts;
        ASSERT_LT(top_k + 6, total);
    }
    ServeProcess plain("-m " + path + kArgs);
    // At the minimum the cache holds top_k experts: every layer evicts the previous one's, so
    // (nearly) every acquisition is a read. With 6 more slots some experts stay: hits appear.
    ServeProcess tight("-m " + path + kArgs + " --mem " + std::to_string(b.minimum));
    ServeProcess roomy("-m " + path + kArgs + " --mem " + std::to_string(b.minimum + 6 * b.slot));
    ASSERT_GT(plain.port(), 0) << plain.log();
    ASSERT_GT(tight.port(), 0) << tight.log();
    ASSERT_GT(roomy.port(), 0) << roomy.log();
    EXPECT_EQ(prom_metric(plain.port(), "moe_expert_cache_hit_rate"), -1);  // no series without --mem
    EXPECT_EQ(prom_metric(tight.port(), "moe_expert_cache_slots"), top_k);
    EXPECT_EQ(prom_metric(roomy.port(), "moe_expert_cache_slots"), top_k + 6);
    EXPECT_EQ(prom_metric(roomy.port(), "moe_expert_cache_hit_rate"), 0);

    const std::string a = "The quick brown fox jumps over", c = "To be, or not to be: that is";
    const std::string want_a = complete(plain.port(), a, 24);
    ASSERT_EQ(want_a.find("<failed"), std::string::npos) << want_a;
    const std::vector<std::string> want = complete_pair(plain.port(), a, c, 32);
    double h1 = 0, n1 = 0;
    for (const ServeProcess* p : {&tight, &roomy}) {
        const int port = p->port();
        EXPECT_EQ(complete(port, a, 24), want_a) << p->log();
        if (p == &roomy) {
            h1 = prom_metric(port, "moe_expert_cache_hit_rate");
            n1 = prom_metric(port, "moe_expert_cache_hits_total") + prom_metric(port, "moe_expert_cache_misses_total");
        }
        EXPECT_EQ(complete_pair(port, a, c, 32), want) << p->log();
        EXPECT_GT(prom_metric(port, "moe_expert_cache_misses_total"), 0);
        EXPECT_GT(prom_metric(port, "moe_expert_cache_read_bytes_total"), 0);
        EXPECT_NE(prom_metric(port, "moe_expert_cache_hit_rate{layer=\"0\"}"), -1);
    }
    // The hit rate series moves with the traffic (and stays a rate).
    const double h2 = prom_metric(roomy.port(), "moe_expert_cache_hit_rate");
    const double n2 = prom_metric(roomy.port(), "moe_expert_cache_hits_total") +
                      prom_metric(roomy.port(), "moe_expert_cache_misses_total");
    EXPECT_GT(n1, 0);
    EXPECT_GT(n2, n1);
    EXPECT_GT(h1, 0.0);
    EXPECT_NE(h2, h1);
    EXPECT_LT(h2, 1.0);
    EXPECT_LT(prom_metric(tight.port(), "moe_expert_cache_hit_rate"), h2);

    // /stats (the dashboard's JSON) carries the same hit rate.
    httplib::Client hc("127.0.0.1", roomy.port());
    auto st = hc.Get("/stats");
    ASSERT_TRUE(st);
    const json s = json::parse(st->body);
    ASSERT_TRUE(s["expert_cache"].is_object()) << st->body;
    EXPECT_NEAR(s["expert_cache"]["hit_rate"].get<double>(), h2, 1e-8);  // /metrics prints 9 digits
    EXPECT_EQ(plain.stop(), 0) << plain.log();
    EXPECT_EQ(tight.stop(), 0) << tight.log();
    EXPECT_EQ(roomy.stop(), 0) << roomy.log();
    EXPECT_NE(roomy.log().find("hit rate"), std::string::npos) << roomy.log();  // summary at exit
}

TEST(ServeMem, BudgetBelowTheMinimumIsOneClearError) {
    ServeProcess p("-m " + tiny_model() + " -t 1 --parallel 4 --ctx 256 --mem 64K");
    EXPECT_EQ(p.port(), 0);
    const std::string log = p.log();
    EXPECT_NE(log.find("is below the minimum"), std::string::npos) << log;
    EXPECT_NE(log.find("4 x 256 positions"), std::string::npos) << log;
    EXPECT_NE(log.find("fewer --parallel slots"), std::string::npos) << log;
}
