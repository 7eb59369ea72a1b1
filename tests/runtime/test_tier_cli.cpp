// The expert-cache options of the inference subcommands, run as the `moe` binary (MOE_BINARY):
// eval with --mem (minimum, auto; io_uring and pread) writes the same logits bytes as without;
// run / bench print the cache statistics (bench -o json as an object); bad --mem values and a
// budget below the minimum are one error line; cache-sim on a trace written by run.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "model/model.h"
#include "common/temp_dir.h"
#include "runtime/gen_model_util.h"

using namespace moe;
namespace fs = std::filesystem;

namespace {

const fs::path& temp_dir() { return moe::testutil::binary_temp_dir("tier-cli"); }

struct Result {
    int code = -1;
    std::string out, err;
};

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

Result run_moe(const std::string& args) {
    const fs::path o = temp_dir() / "stdout.txt", e = temp_dir() / "stderr.txt";
    const std::string cmd = std::string(MOE_BINARY) + " " + args + " >" + o.string() + " 2>" + e.string();
    const int st = std::system(cmd.c_str());
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(o), slurp(e)};
}

std::string model_path() { return testutil::gen_model(temp_dir(), "tiny-qwen2moe", DType::Q8_0, 5); }

std::string token_list(int n) {
    std::mt19937 g(std::random_device{}());
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(g() % 320);
    return s;
}

TEST(TierCli, EvalWithMemWritesTheSameLogits) {
    const std::string m = model_path(), toks = token_list(24);
    const fs::path ref = temp_dir() / "ref.bin";
    ASSERT_EQ(run_moe("eval -m " + m + " --tokens " + toks + " --logits-out " + ref.string() + " -t 2 --ctx 64").code, 0);
    model::ModelOptions mo;
    mo.n_threads = 2;
    mo.n_ctx = 64;
    mo.cache.mem_budget = 1ull << 40;
    const uint64_t min_mib = (model::Model::load(m, mo)->memory_budget().minimum + (1 << 20) - 1) >> 20;
    for (const std::string& mem : {std::to_string(min_mib) + "M", std::string("auto")})
        for (const char* io : {"uring", "pread"}) {
            const fs::path out = temp_dir() / "got.bin";
            const Result r = run_moe("eval -m " + m + " --tokens " + toks + " --logits-out " + out.string() +
                                     " -t 2 --ctx 64 --mem " + mem + " --expert-io " + io);
            ASSERT_EQ(r.code, 0) << r.err;
            EXPECT_NE(r.err.find("expert cache:"), std::string::npos) << r.err;
            EXPECT_EQ(slurp(ref), slurp(out)) << "--mem " << mem << " --expert-io " << io;
        }
}

TEST(TierCli, BadMemIsOneErrorLine) {
    const std::string m = model_path();
    for (const char* b : {"12Q", "-5", "G", "0"}) {
        const std::string bad = b;
        const Result r = run_moe("run -m " + m + " -p hi -n 2 --mem " + bad);
        EXPECT_EQ(r.code, 1) << bad;
        EXPECT_NE(r.err.find("--mem '" + bad + "' is not a size"), std::string::npos) << r.err;
    }
    const Result r = run_moe("run -m " + m + " -p hi -n 2 --mem 1K");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("is below the minimum of"), std::string::npos) << r.err;
    EXPECT_NE(run_moe("run -m " + m + " -p hi -n 2 --mem 1G --cache-policy mru").err.find("unknown cache policy 'mru'"),
              std::string::npos);
    // panels need every weight resident: --repack-experts and --repack refuse --mem, naming both
    for (const std::string flag : {"--repack-experts", "--repack"}) {
        const Result rp = run_moe("run -m " + m + " -p hi -n 2 --mem 1G " + flag);
        EXPECT_EQ(rp.code, 1) << flag;
        EXPECT_NE(rp.err.find(flag + " needs every expert resident"), std::string::npos) << rp.err;
        EXPECT_NE(rp.err.find("--mem"), std::string::npos) << rp.err;
    }
}

TEST(TierCli, RunTraceThenCacheSimAndBenchJson) {
    const std::string m = model_path();
    const fs::path trace = temp_dir() / "trace.tsv";
    Result r = run_moe("run -m " + m + " -p 'hello world' -n 12 --temp 0 -t 2 --mem 1G --cache-policy lfu --routing-trace " +
                       trace.string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("expert cache:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("policy lfu"), std::string::npos) << r.err;
    r = run_moe("cache-sim --trace " + trace.string() + " --capacity 4,50% -o json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["rows"].size(), 2u);
    EXPECT_EQ(j["rows"][0]["capacity"], 4);
    for (const auto& row : j["rows"])
        for (const char* p : {"lru", "lfu", "lfu-history", "pinned"})
            EXPECT_LE(row["hit_rate"][p].get<double>(), row["hit_rate"]["belady"].get<double>() + 1e-12);
    // --cache-profile from the same trace for the pinned policy.
    r = run_moe("run -m " + m + " -p hi -n 4 -t 2 --mem 1G --cache-policy pinned --cache-profile " + trace.string());
    EXPECT_EQ(r.code, 0) << r.err;
    r = run_moe("bench -m " + m + " -p 8 -n 4 -r 1 -t 2 --bw 10 --mem auto -o json");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto b = nlohmann::json::parse(r.out);
    for (const auto& t : b["tests"]) {
        ASSERT_TRUE(t.contains("expert_cache")) << r.out;
        // --mem auto holds every expert of this model: all loaded before the warm-up, so the
        // timed runs are the steady state (hits only).
        EXPECT_GT(t["expert_cache"]["total"]["hits"].get<int64_t>(), 0) << r.out;
        EXPECT_EQ(t["expert_cache"]["total"]["misses"].get<int64_t>(), 0) << r.out;
    }
    EXPECT_NE(r.err.find("every expert fits the cache: all loaded"), std::string::npos) << r.err;
}

}  // namespace
