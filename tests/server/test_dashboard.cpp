// The dashboard at GET / in a real browser: headless Chromium (Debian `chromium`, installed by
// scripts/install-deps.sh) loads the page from a running `moe serve` (MOE_BINARY), runs its
// script (virtual time budget), and the test checks the rendered DOM: one heatmap cell per
// (MoE layer, expert), the model name, and the generated-token count the server reports.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "server/server_test_util.h"

using moe::testutil::ServeProcess;

namespace {
size_t count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
}
}  // namespace

TEST(Dashboard, ChromiumRendersTheExpertHeatmap) {
    // tiny-olmoe: 2 MoE layers x 8 experts.
    ServeProcess srv("-m " + moe::testutil::tiny_model("tiny-olmoe") + " -t 1 --parallel 2 --ctx 256");
    ASSERT_GT(srv.port(), 0) << srv.log();
    httplib::Client c("127.0.0.1", srv.port());
    auto r = c.Post("/v1/completions", R"({"prompt":"Hello there","max_tokens":7,"ignore_eos":true})", "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);

    const std::string out = (moe::testutil::server_temp_dir() / "dom.html").string();
    const std::string profile = (moe::testutil::server_temp_dir() / "chromium-profile").string();
    const std::string cmd =
        "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
        "--disable-background-networking --disable-component-update --disable-sync --disable-dev-shm-usage "
        "--user-data-dir=" + profile + " --virtual-time-budget=3000 --dump-dom http://127.0.0.1:" +
        std::to_string(srv.port()) + "/ >" + out + " 2>/dev/null";
    const int st = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << "chromium failed (is the Debian package 'chromium' installed? scripts/install-deps.sh installs it)";
    std::ifstream f(out);
    const std::string dom((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(dom.empty());
    // Count cells inside the rendered table only (the page's script text holds the markup too).
    const size_t t0 = dom.find("<table id=\"heat\">"), t1 = dom.find("</table>", t0);
    ASSERT_NE(t0, std::string::npos);
    ASSERT_NE(t1, std::string::npos);
    const std::string table = dom.substr(t0, t1 - t0);
    EXPECT_EQ(count(table, "class=\"hc\""), 2u * 8u) << table;
    EXPECT_EQ(count(table, "<tr>"), 2u);
    EXPECT_NE(dom.find("data-layers=\"2\""), std::string::npos);
    EXPECT_NE(dom.find("<span id=\"model\">tiny-olmoe.gguf</span>"), std::string::npos);
    // The page shows what /stats says: 7 tokens generated, 2 slots.
    EXPECT_NE(dom.find("<b id=\"gen\">7</b>"), std::string::npos);
    EXPECT_NE(dom.find("<b id=\"slots\">0/2</b>"), std::string::npos);
    // Every routed token shows up in some cell: titles carry the counts; their sum per layer is
    // tokens x k (prompt + generated rows; k = 2 for tiny-olmoe).
    const nlohmann::json stats = nlohmann::json::parse(c.Get("/stats")->body);
    uint64_t layer0 = 0;
    for (auto v : stats["expert_load"][0]) layer0 += v.get<uint64_t>();
    uint64_t from_dom = 0;
    for (int e = 0; e < 8; ++e) {
        const std::string key = "title=\"layer 0 expert " + std::to_string(e) + ": ";
        const size_t p = table.find(key);
        ASSERT_NE(p, std::string::npos) << key;
        from_dom += std::stoull(table.substr(p + key.size()));
    }
    EXPECT_EQ(from_dom, layer0);
    EXPECT_GT(layer0, 0u);
    EXPECT_EQ(srv.stop(), 0);
}
