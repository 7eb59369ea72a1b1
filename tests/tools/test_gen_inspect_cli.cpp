// `moe gen` and `moe inspect` through the real binary (MOE_BINARY): JSON fields on a generated
// GGUF and on config.json files, the human sections, and one-line errors with exit code 1.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/param_count.h"
#include "model/presets.h"
#include "model/tensor_catalog.h"

using namespace moe;
using json = nlohmann::json;

namespace {

struct CliRun {
    int rc;
    std::string out, err;
};

CliRun run(const std::string& args) {
    const std::string err_path = ::testing::TempDir() + "moe_cli_stderr.txt";
    const std::string cmd = std::string(MOE_BINARY) + " " + args + " 2>" + err_path;
    CliRun r{-1, "", ""};
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream e(err_path);
    r.err.assign(std::istreambuf_iterator<char>(e), {});
    return r;
}

std::string write_tmp(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

// Exit code 1 and exactly one stderr line, containing "error:" and `what`.
void expect_one_line_error(const CliRun& r, const std::string& what) {
    EXPECT_EQ(r.rc, 1) << r.err;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
    EXPECT_NE(r.err.find("error:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
}

const std::string kConfigs = std::string(MOE_TEST_DATA_DIR) + "/configs/";

}  // namespace

TEST(CliGenInspect, GeneratedFileJson) {
    const std::string path = ::testing::TempDir() + "cli_tiny_qwen3moe.gguf";
    const CliRun g = run("gen tiny-qwen3moe -o " + path + " --seed 1 --type q8_0");
    ASSERT_EQ(g.rc, 0) << g.err;
    EXPECT_NE(g.out.find("wrote"), std::string::npos);

    const CliRun r = run("inspect " + path + " --json --ctx 1024 --batch 3");
    ASSERT_EQ(r.rc, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["format"], "gguf");
    EXPECT_EQ(j["architecture"], "qwen3moe");
    EXPECT_EQ(j["weight_type"], "q8_0");
    EXPECT_EQ(j["hyperparameters"]["n_expert"], 8);
    EXPECT_EQ(j["hyperparameters"]["n_expert_used"], 2);
    EXPECT_EQ(j["hyperparameters"]["head_dim_k"], 32);
    EXPECT_EQ(j["hyperparameters"]["qk_norm"], "per-head");
    EXPECT_EQ(j["tokenizer"]["model"], "gpt2");
    EXPECT_EQ(j["tokenizer"]["n_tokens"], 320);
    EXPECT_EQ(j["tokenizer"]["bos"]["text"], "<s>");

    // Counts equal the catalog's for the same config and type.
    const model::ModelConfig c = model::find_preset("tiny-qwen3moe").config;
    const auto cat = model::tensor_catalog(c);
    const auto pc = model::count_params(model::describe_catalog(cat, DType::Q8_0), c);
    EXPECT_EQ(j["tensors"].size(), cat.size());
    EXPECT_EQ(j["parameters"]["total"].get<uint64_t>(), pc.total);
    EXPECT_EQ(j["parameters"]["active"].get<uint64_t>(), pc.active);
    EXPECT_EQ(j["parameters"]["resident_bytes"].get<uint64_t>(), pc.resident_bytes);
    // KV: 2 layers * 2 kv heads * (32 + 32) * 2 bytes = 512 B per token.
    EXPECT_EQ(j["kv_cache"]["bytes_per_token"], 512);
    const json& m = j["memory_plan"];
    EXPECT_EQ(m["kv_bytes"].get<uint64_t>(), 3u * 1024u * 512u);
    EXPECT_EQ(m["weights_bytes"].get<uint64_t>(), pc.resident_bytes);
    EXPECT_EQ(m["total_bytes"].get<uint64_t>(),
              m["weights_bytes"].get<uint64_t>() + m["kv_bytes"].get<uint64_t>() + m["scratch_bytes"].get<uint64_t>());

    // Per-type breakdown: recomputed here from the tensor list (bytes and params per type, the
    // routed experts' bits per weight vs the rest).
    std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // type -> (bytes, params)
    uint64_t eb = 0, ep = 0, rb = 0, rp = 0;
    for (const auto& t : j["tensors"]) {
        uint64_t n = 1;
        for (const auto& d : t["shape"]) n *= d.get<uint64_t>();
        const uint64_t b = t["bytes"].get<uint64_t>();
        by_type[t["type"].get<std::string>()].first += b;
        by_type[t["type"].get<std::string>()].second += n;
        (t["role"] == "routed-expert" ? eb : rb) += b;
        (t["role"] == "routed-expert" ? ep : rp) += n;
    }
    ASSERT_EQ(j["types"].size(), by_type.size());
    double share = 0;
    for (const auto& r : j["types"]) {
        const auto& [b, n] = by_type.at(r["type"].get<std::string>());
        EXPECT_EQ(r["bytes"].get<uint64_t>(), b);
        EXPECT_EQ(r["params"].get<uint64_t>(), n);
        EXPECT_DOUBLE_EQ(r["bits_per_weight"].get<double>(), 8.0 * b / n);
        share += r["share"].get<double>();
    }
    EXPECT_NEAR(share, 1.0, 1e-12);
    EXPECT_EQ(j["types"][0]["type"], "q8_0");  // largest first
    EXPECT_DOUBLE_EQ(j["types"][0]["bits_per_weight"].get<double>(), 8.5);
    ASSERT_GT(ep, 0u);
    EXPECT_DOUBLE_EQ(j["bits_per_weight"]["routed_experts"].get<double>(), 8.0 * eb / ep);
    EXPECT_DOUBLE_EQ(j["bits_per_weight"]["rest"].get<double>(), 8.0 * rb / rp);

    // --type recomputes bytes as if the weights were f16 (norms and router stay f32).
    const json j16 = json::parse(run("inspect " + path + " --json --type f16").out);
    EXPECT_EQ(j16["weight_type"], "f16");
    EXPECT_EQ(j16["parameters"]["resident_bytes"].get<uint64_t>(),
              model::count_params(model::describe_catalog(cat, DType::F16), c).resident_bytes);
    EXPECT_EQ(j16["parameters"]["total"], j["parameters"]["total"]);

    // Human output has every section.
    const CliRun h = run("inspect " + path);
    ASSERT_EQ(h.rc, 0) << h.err;
    for (const char* s : {"Architecture", "Hyperparameters", "Tokenizer", "Tensors", "Weight types", "bits per weight: routed experts 8.500",
                          "Parameters", "KV cache", "Memory plan"})
        EXPECT_NE(h.out.find(s), std::string::npos) << s;
    std::remove(path.c_str());
}

TEST(CliGenInspect, ConfigJson) {
    const CliRun r = run("inspect " + kConfigs + "qwen3-30b-a3b_config.json --json");
    ASSERT_EQ(r.rc, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["format"], "config.json");
    EXPECT_EQ(j["architecture"], "qwen3moe");
    EXPECT_TRUE(j["tokenizer"].is_null());
    EXPECT_EQ(j["weight_type"], "bf16");
    const double total = j["parameters"]["total"].get<double>(), active = j["parameters"]["active"].get<double>();
    EXPECT_NEAR(total / 1e9, 30.5, 0.3);
    EXPECT_NEAR(active / 1e9, 3.3, 0.1);
    // 48 layers * 4 kv heads * 256 * 2 B
    EXPECT_EQ(j["kv_cache"]["bytes_per_token"], 48 * 4 * 256 * 2);

    const json q = json::parse(run("inspect " + kConfigs + "deepseek-v3_config.json --json --type q8_0").out);
    EXPECT_EQ(q["architecture"], "deepseek2");
    EXPECT_TRUE(q["kv_cache"]["mla_latent"].get<bool>());
    EXPECT_EQ(q["kv_cache"]["bytes_per_token"], 61 * 576 * 2);
    // Q8_0: ~671B * 34/32 bytes (norms/routers f32 are a rounding error here).
    EXPECT_NEAR(q["parameters"]["resident_bytes"].get<double>() / 1e9, 671.0 * 34 / 32, 10.0);
    EXPECT_NEAR(q["parameters"]["active_excl_embedding"].get<double>() / 1e9, 37.0, 1.0);

    const CliRun h = run("inspect " + kConfigs + "gpt-oss-20b_config.json");
    ASSERT_EQ(h.rc, 0) << h.err;
    EXPECT_NE(h.out.find("sliding window 128"), std::string::npos);

    // Tensor table: blocks with one layout are collapsed (DeepSeek-V3: 3 dense + 58 MoE blocks);
    // --tensors lists all of them.
    const CliRun d = run("inspect " + kConfigs + "deepseek-v3_config.json");
    ASSERT_EQ(d.rc, 0) << d.err;
    EXPECT_NE(d.out.find("-- blk.0 (layout shared by 3 blocks: 0..2)"), std::string::npos) << d.out;
    EXPECT_NE(d.out.find("-- blk.3 (layout shared by 58 blocks: 3..60)"), std::string::npos) << d.out;
    EXPECT_EQ(d.out.find("blk.60.ffn_up_exps.weight"), std::string::npos);
    EXPECT_NE(d.out.find("blk.3.exp_probs_b.bias"), std::string::npos);
    const CliRun all = run("inspect " + kConfigs + "deepseek-v3_config.json --tensors");
    ASSERT_EQ(all.rc, 0) << all.err;
    EXPECT_NE(all.out.find("blk.60.ffn_up_exps.weight"), std::string::npos);
    EXPECT_NE(all.out.find("blk.2.ffn_down.weight"), std::string::npos);
}

TEST(CliGenInspect, Errors) {
    expect_one_line_error(run("inspect " + write_tmp("cli_bert.json", R"({"model_type": "bert"})")),
                          "unsupported model_type \"bert\"");
    expect_one_line_error(run("inspect " + write_tmp("cli_missing.json", R"({"model_type": "qwen3_moe", "vocab_size": 5})")),
                          "'hidden_size' is missing");
    expect_one_line_error(run("inspect " + write_tmp("cli_text.txt", "hello, not a model\n")), "neither a GGUF file");
    expect_one_line_error(run("inspect " + write_tmp("cli_trunc.gguf", std::string("GGUF\x03\x00\x00\x00", 8))), "[gguf]");
    expect_one_line_error(run("inspect " + write_tmp("cli_empty.json", "")), "empty file");
    expect_one_line_error(run("inspect " + ::testing::TempDir() + "cli_nope.gguf"), "cannot open");
    expect_one_line_error(run("inspect " + kConfigs + "mixtral-8x7b-v0.1_config.json --ctx 0"), "--ctx");
    expect_one_line_error(run("inspect " + kConfigs + "mixtral-8x7b-v0.1_config.json --type q9_9"), "--type");
    expect_one_line_error(run("gen no-such-preset -o " + ::testing::TempDir() + "x.gguf"), "unknown preset 'no-such-preset'");
    expect_one_line_error(run("gen tiny-olmoe -o " + ::testing::TempDir() + "x.gguf --type q4_0"), "--type");
    expect_one_line_error(run("gen tiny-olmoe"), "-o");
    expect_one_line_error(run("gen tiny-olmoe -o " + ::testing::TempDir() + "x.gguf --layers 0"), "--layers");
}

TEST(CliGenInspect, ListAndLayers) {
    const CliRun l = run("gen --list");
    ASSERT_EQ(l.rc, 0);
    for (const auto& p : model::presets()) EXPECT_NE(l.out.find(p.name), std::string::npos) << p.name;
    const std::string path = ::testing::TempDir() + "cli_layers.gguf";
    ASSERT_EQ(run("gen tiny-mixtral -o " + path + " --layers 1 --type bf16").rc, 0);
    const json j = json::parse(run("inspect " + path + " --json").out);
    EXPECT_EQ(j["architecture"], "llama");
    EXPECT_EQ(j["hyperparameters"]["n_layer"], 1);
    EXPECT_EQ(j["weight_type"], "bf16");
    std::remove(path.c_str());
}
