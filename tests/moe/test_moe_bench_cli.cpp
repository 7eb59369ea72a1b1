// `moe bench-moe` end to end through the real binary: a tiny shape in json and md, and the
// usage errors. (Timing values are not checked, only that rows are produced and well formed.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace {

struct Result {
    int status;
    std::string out;
};

Result run(const std::string& args, bool merge_stderr = true) {
    const std::string cmd = std::string(MOE_BINARY) + " bench-moe " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return {-1, ""};
    std::string out;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    const int st = pclose(p);
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

TEST(BenchMoeCli, JsonRows) {
    const Result r = run("-t 2 -r 2 --shape 1,8,2,64,48 --shape 5,16,4,40,24 -o json", false);
    ASSERT_EQ(r.status, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);  // stdout is pure JSON
    ASSERT_EQ(j["rows"].size(), 2u);
    EXPECT_EQ(j["rows"][0]["T"], 1);
    EXPECT_EQ(j["rows"][1]["E"], 16);
    EXPECT_EQ(j["rows"][1]["k"], 4);
    EXPECT_EQ(j["rows"][0]["threads"], 2);
    EXPECT_GT(j["rows"][0]["ms_mean"].get<double>(), 0.0);
    EXPECT_GT(j["rows"][1]["tokens_per_s_mean"].get<double>(), 0.0);
    EXPECT_LE(j["rows"][0]["active_experts"].get<int>(), 2);
}

TEST(BenchMoeCli, MarkdownRow) {
    const Result r = run("-t 1 -r 1 --shape 3,4,1,32,16");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("| model shape | T | E | k |"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("| custom | 3 | 4 | 1 | 32 | 16 | 1 |"), std::string::npos) << r.out;
}

TEST(BenchMoeCli, WeightTypesAndKernelMode) {
    const Result r = run("-t 2 -r 1 --shape 2,4,2,256,256 --type q4_k -o json", false);
    ASSERT_EQ(r.status, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["rows"].size(), 1u);
    EXPECT_EQ(j["rows"][0]["type"], "q4_K");
    EXPECT_GT(j["rows"][0]["ms_mean"].get<double>(), 0.0);
    const Result k = run("-r 1 --shape 1,2,1,64,32 --type q8_0 --kernel");
    ASSERT_EQ(k.status, 0) << k.out;
    EXPECT_NE(k.out.find("| q8_0 | q8_0_"), std::string::npos) << k.out;
    EXPECT_NE(k.out.find("| 32 x 64 | 32 |"), std::string::npos) << k.out;
    // a type without a quantizer here: the kernel alone on random blocks, not the block
    const Result q2 = run("-r 1 --shape 1,2,1,256,256 --type q2_K --kernel");
    ASSERT_EQ(q2.status, 0) << q2.out;
    EXPECT_NE(q2.out.find("| q2_K | q2_k_"), std::string::npos) << q2.out;
    const Result nq = run("--type q2_K");
    EXPECT_EQ(nq.status, 1);
    EXPECT_NE(nq.out.find("use it with --kernel"), std::string::npos) << nq.out;
    EXPECT_EQ(run("--type q7_k").status, 1);                         // no such type
    EXPECT_EQ(run("--type q4_k --shape 1,4,2,96,256").status, 1);    // D not a multiple of 256
}

TEST(BenchMoeCli, UsageErrors) {
    EXPECT_EQ(run("--shape 1,2,3").status, 1);
    EXPECT_EQ(run("--shape 1,4,8,16,16").status, 1);  // k > E
    EXPECT_EQ(run("-o xml").status, 1);
    EXPECT_EQ(run("--bogus").status, 1);
    const Result h = run("--help");
    EXPECT_EQ(h.status, 0);
    EXPECT_NE(h.out.find("--shape T,E,k,D,F"), std::string::npos);
}

}  // namespace
