// The inference subcommands, run as the `moe` binary (MOE_BINARY): eval (file size, values equal
// the in-process forward), run (streams, stats, built-in default model), perplexity (finite, > 1),
// bench (rows), and bad input (exit code 1, one "error:" line naming the problem): unknown
// architecture, missing tensor, mis-shaped tensor (files rewritten with gguf::Writer), token id out
// of range, prompt longer than --ctx, F16... types without a kernel.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "common/temp_dir.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "model/gen.h"
#include "model/model.h"
#include "runtime/gen_model_util.h"
#include "runtime/session.h"

using namespace moe;
namespace fs = std::filesystem;

namespace {

const fs::path& temp_dir() { return moe::testutil::binary_temp_dir("infer-cli"); }

std::string gen_model(const std::string& preset, DType type = DType::F32) {
    return testutil::gen_model(temp_dir(), preset, type, 11);
}

struct Result {
    int code = -1;
    std::string out, err;
};

// Runs `moe ARGS` with stdout and stderr captured to files.
Result run_moe(const std::string& args, const std::string& env = "") {
    const std::string o = (temp_dir() / "stdout.txt").string(), e = (temp_dir() / "stderr.txt").string();
    const std::string cmd = env + " " + std::string(MOE_BINARY) + " " + args + " >" + o + " 2>" + e;
    const int st = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    auto slurp = [](const std::string& p) {
        std::ifstream f(p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    };
    r.out = slurp(o);
    r.err = slurp(e);
    return r;
}

int count_lines_with(const std::string& s, const std::string& what) {
    int n = 0;
    size_t start = 0;
    while (start < s.size()) {
        size_t end = s.find('\n', start);
        if (end == std::string::npos) end = s.size();
        if (s.substr(start, end - start).find(what) != std::string::npos) ++n;
        start = end + 1;
    }
    return n;
}

// Expects exit code 1 and exactly one "error:" line on stderr containing every `needles` entry.
void expect_error(const Result& r, const std::vector<std::string>& needles) {
    EXPECT_EQ(1, r.code) << r.err;
    EXPECT_EQ(1, count_lines_with(r.err, "error:")) << r.err;
    for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << "missing '" << n << "' in: " << r.err;
}

// Copies a GGUF with edits: metadata values replaced, a tensor dropped or re-shaped (data zeros).
struct Edit {
    std::string set_arch;              // new general.architecture
    std::string drop_key;              // metadata key left out
    std::string drop_tensor;
    std::string reshape_tensor;
    std::vector<int64_t> new_shape;
    std::string retype_tensor;  // stored as new_type (data zeroed)
    DType new_type = DType::F32;
};
Edit with(std::string Edit::*field, std::string value) {
    Edit e;
    e.*field = std::move(value);
    return e;
}
Edit reshape(std::string tensor, std::vector<int64_t> shape) {
    Edit e;
    e.reshape_tensor = std::move(tensor);
    e.new_shape = std::move(shape);
    return e;
}
std::string rewrite(const std::string& src, const std::string& name, const Edit& ed) {
    const fs::path dst = temp_dir() / name;
    const auto in = gguf::File::open(src);
    gguf::Writer w(dst.string(), in.alignment());
    for (const auto& kv : in.metadata()) {
        gguf::Value v = kv.value;
        if (kv.key == ed.drop_key) continue;
        if (kv.key == "general.architecture" && !ed.set_arch.empty()) v.str = ed.set_arch;
        w.set(kv.key, v);
    }
    std::vector<const gguf::TensorInfo*> kept;
    for (const auto& t : in.tensors()) {
        if (t.name == ed.drop_tensor) continue;
        if (t.name == ed.reshape_tensor) w.add_tensor(t.name, t.type, ed.new_shape);
        else if (t.name == ed.retype_tensor) w.add_tensor(t.name, ed.new_type, std::vector<int64_t>(t.ne, t.ne + t.n_dims));
        else w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims));
        kept.push_back(&t);
    }
    w.write_header();
    for (size_t i = 0; i < kept.size(); ++i) {
        const TensorView v = in.view(*kept[i]);
        const uint64_t want = w.tensor_bytes(i);
        if (want == v.nbytes()) {
            w.write_data(v.data, want);
        } else {
            std::vector<char> zeros(want, 0);
            w.write_data(zeros.data(), want);
        }
    }
    w.finish();
    return dst.string();
}

std::vector<float> read_floats(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<float> v(b.size() / sizeof(float));
    std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
    return v;
}

}  // namespace

TEST(InferCli, EvalWritesLogitsEqualToInProcessForward) {
    const std::string path = gen_model("tiny-qwen2moe");
    const std::vector<int32_t> toks = {1, 77, 300, 5, 42, 0, 319, 8};
    const std::string out = (temp_dir() / "logits.bin").string();
    const Result r = run_moe("eval -m " + path + " --tokens 1,77,300,5,42,0,319,8 --logits-out " + out + " -t 2");
    ASSERT_EQ(0, r.code) << r.err;
    auto m = model::Model::load(path, {1, 4, 64});
    const int64_t V = m->config().n_vocab;
    ASSERT_EQ(fs::file_size(out), toks.size() * static_cast<size_t>(V) * sizeof(float));
    ThreadPool pool(1);
    runtime::Session s(*m, pool, {64, 1, DType::F32});
    std::vector<float> want(toks.size() * static_cast<size_t>(V));
    s.eval(0, toks, want.data(), true);  // 1 thread, batches of 4: still bitwise equal (forward.h)
    const auto got = read_floats(out);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
}

TEST(InferCli, RunStreamsTextAndStats) {
    const std::string path = gen_model("tiny-mixtral");
    const Result r = run_moe("run -m " + path + " -p 'Once upon a time' -n 12 --seed 3 -t 2");
    ASSERT_EQ(0, r.code) << r.err;
    EXPECT_EQ(0u, r.out.rfind("Once upon a time", 0)) << r.out;
    EXPECT_GT(r.out.size(), std::string("Once upon a time\n").size());
    EXPECT_NE(r.err.find("prompt "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("experts "), std::string::npos) << r.err;      // MoE stage split
    EXPECT_NE(r.err.find("expert load: imbalance"), std::string::npos) << r.err;
    // Same seed -> same text; greedy is deterministic too.
    const Result r2 = run_moe("run -m " + path + " -p 'Once upon a time' -n 12 --seed 3 -t 1");
    EXPECT_EQ(r.out, r2.out);
}

TEST(InferCli, RunWritesRoutingTrace) {
    const std::string path = gen_model("tiny-olmoe");
    const std::string trace = (temp_dir() / "trace.tsv").string();
    const Result r = run_moe("run -m " + path + " -p 'Once upon a time' -n 6 --temp 0 -t 2 --routing-trace " + trace);
    ASSERT_EQ(0, r.code) << r.err;
    EXPECT_NE(r.err.find("routing trace: "), std::string::npos) << r.err;
    auto m = model::Model::load(path, {1, 4, 64});
    const int64_t L = m->config().n_layer, E = m->config().n_expert, k = m->config().n_expert_used;
    std::ifstream f(trace);
    std::string line;
    ASSERT_TRUE(std::getline(f, line));
    EXPECT_EQ(line, "layer\ttoken\texperts\tweights");
    std::map<std::pair<int64_t, int64_t>, int> seen;  // (layer, token) -> records
    int64_t max_token = -1;
    while (std::getline(f, line)) {
        std::istringstream ls(line);
        int64_t layer = -1, token = -1;
        std::string experts, weights;
        ASSERT_TRUE(ls >> layer >> token >> experts >> weights) << line;
        ASSERT_GE(layer, 0);
        ASSERT_LT(layer, L);
        ++seen[{layer, token}];
        max_token = std::max(max_token, token);
        std::set<int64_t> ids;
        std::istringstream es(experts), ws(weights);
        for (std::string v; std::getline(es, v, ',');) {
            const int64_t e = std::stoll(v);
            EXPECT_GE(e, 0);
            EXPECT_LT(e, E);
            ids.insert(e);
        }
        EXPECT_EQ(static_cast<int64_t>(ids.size()), k) << line;  // k distinct experts
        int64_t nw = 0;
        for (std::string v; std::getline(ws, v, ',');) {
            const double w = std::stod(v);
            EXPECT_TRUE(w >= 0 && w <= 1) << line;
            ++nw;
        }
        EXPECT_EQ(nw, k) << line;
    }
    // Every layer routed every position once: the prompt's tokens, then each generated token that
    // was fed back (6 generated -> at least 5 decode steps unless EOS came first).
    ASSERT_GE(max_token, 5);
    EXPECT_EQ(static_cast<int64_t>(seen.size()), L * (max_token + 1));
    for (const auto& [key, n] : seen) EXPECT_EQ(n, 1) << "layer " << key.first << " token " << key.second;
    // An unwritable path fails before any work.
    expect_error(run_moe("run -m " + path + " -p hi --routing-trace /nonexistent-dir/t.tsv"),
                 {"routing trace file", "/nonexistent-dir/t.tsv"});
}

TEST(InferCli, RunWithoutModelUsesBuiltInDefault) {
    const fs::path cache = temp_dir() / "xdg";
    const Result r = run_moe("run -p 'Hello' -n 4 --temp 0", "XDG_CACHE_HOME=" + cache.string());
    ASSERT_EQ(0, r.code) << r.err;
    EXPECT_NE(r.err.find("built-in default model"), std::string::npos) << r.err;
    // The trained Shakespeare MoE of the repository (docs/TRAINING.md); nothing is generated.
    ASSERT_TRUE(fs::exists(MOE_TEST_DATA_DIR "/../../models/shakespeare-moe.gguf"));
    EXPECT_NE(r.err.find("models/shakespeare-moe.gguf"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("qwen3moe 'shakespeare-moe'"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(cache / "moe-engine" / "default-tiny-qwen3moe.gguf"));
    const Result again = run_moe("run -p 'Hello' -n 4 --temp 0", "XDG_CACHE_HOME=" + cache.string());
    ASSERT_EQ(0, again.code) << again.err;
    EXPECT_EQ(r.out, again.out);
}

TEST(InferCli, PerplexityIsFiniteAndAboveOne) {
    const std::string path = gen_model("tiny-olmoe");
    // A short slice of the text: 4 chunks of 64 tokens with the byte-level vocab.
    const std::string text = (temp_dir() / "text.txt").string();
    {
        std::ifstream in(MOE_TEST_DATA_DIR "/text/tinyshakespeare.txt", std::ios::binary);
        ASSERT_TRUE(in) << "missing " MOE_TEST_DATA_DIR "/text/tinyshakespeare.txt";
        std::string s(4000, '\0');
        in.read(s.data(), static_cast<std::streamsize>(s.size()));
        s.resize(static_cast<size_t>(in.gcount()));
        std::ofstream(text, std::ios::binary) << s;
    }
    const Result r = run_moe("perplexity -m " + path + " -f " + text + " --ctx 64 --chunks 4 -t 2");
    ASSERT_EQ(0, r.code) << r.err;
    const size_t at = r.out.find("Final estimate: PPL = ");
    ASSERT_NE(at, std::string::npos) << r.out;
    const double ppl = std::strtod(r.out.c_str() + at + std::strlen("Final estimate: PPL = "), nullptr);
    EXPECT_TRUE(std::isfinite(ppl));
    EXPECT_GT(ppl, 1.0);
    // Too short a text for the context: a clear error.
    expect_error(run_moe("perplexity -m " + path + " -f " + text + " --ctx 4096"), {"needs at least 8192"});
}

TEST(InferCli, BenchPrintsRows) {
    const std::string path = gen_model("tiny-qwen3moe");
    const Result r = run_moe("bench -m " + path + " -p 32 -n 8 -r 2 -t 2 --membw-mib 64");
    ASSERT_EQ(0, r.code) << r.err;
    EXPECT_EQ(1, count_lines_with(r.out, "| 2 | pp32 |")) << r.out;
    EXPECT_EQ(1, count_lines_with(r.out, "| 2 | tg8 |")) << r.out;
    EXPECT_NE(r.out.find(" ± "), std::string::npos);
    EXPECT_NE(r.out.find("stage split"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("peak RSS"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" %"), std::string::npos) << r.out;  // tg row: fraction of the ceiling
    EXPECT_EQ(1, count_lines_with(r.out, "tg8: read bandwidth before and after each repetition")) << r.out;
    EXPECT_EQ(2, count_lines_with(r.out, "64 MiB buffer)")) << r.out;  // --membw-mib: the first sample and the tg row's

    // By default the samples read a buffer the model file's size (footprint_mib), at least 256 MiB.
    const Result d = run_moe("bench -m " + path + " -p 0 -n 2 -r 1 -t 1");
    ASSERT_EQ(0, d.code) << d.err;
    EXPECT_EQ(2, count_lines_with(d.out, "256 MiB buffer)")) << d.out;

    // Without --bw the tg row's fraction comes from the samples around its repetitions: recomputed
    // here from the printed per-rep t/s, samples and active bytes.
    const Result s = run_moe("bench -m " + path + " -p 0 -n 4 -r 3 -t 1 -o json --membw-mib 16");
    ASSERT_EQ(0, s.code) << s.err;
    auto numbers = [&](const std::string& key) {
        std::vector<double> v;
        const size_t at = s.out.find("\"" + key + "\": [");
        if (at == std::string::npos) return v;
        const char* p = s.out.c_str() + s.out.find('[', at) + 1;
        while (*p != ']') {
            char* end = nullptr;
            v.push_back(std::strtod(p, &end));
            p = end;
            while (*p == ',' || *p == ' ') ++p;
        }
        return v;
    };
    EXPECT_NE(s.out.find("\"membw_buffer_mib\": 16, \"bracket_buffer_mib\": 16,"), std::string::npos) << s.out;
    const std::vector<double> tps = numbers("tps_reps"), around = numbers("membw_around_gbs");
    ASSERT_EQ(3u, tps.size()) << s.out;
    ASSERT_EQ(4u, around.size()) << s.out;
    const double active = std::strtod(s.out.c_str() + s.out.find("\"active_bytes_per_token\": ") + 26, nullptr);
    const double frac = std::strtod(s.out.c_str() + s.out.find("\"ceiling_frac\": ") + 16, nullptr);
    double want = 0;
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_GT(around[i], 0.1) << s.out;
        want += tps[i] * active / (0.5 * (around[i] + around[i + 1]) * 1e9) / 3;
    }
    EXPECT_NEAR(want, frac, 1e-3 * want + 1e-4) << s.out;

    const Result j = run_moe("bench -m " + path + " -p 16 -n 4 -r 1 -t 1 -o json --bw 10");
    ASSERT_EQ(0, j.code) << j.err;
    for (const char* key : {"\"tests\"", "\"pp16\"", "\"tg4\"", "\"ceiling_frac\"", "\"membw_gbs\": 10.00", "\"peak_rss_bytes\""})
        EXPECT_NE(j.out.find(key), std::string::npos) << key << "\n" << j.out;
    EXPECT_EQ(std::string::npos, j.out.find("membw_around_gbs")) << j.out;  // --bw: no samples
    EXPECT_NE(j.out.find("\"bracket_buffer_mib\": 0,"), std::string::npos) << j.out;  // ... of no size

    // --kv-type with a list: one session per type side by side, one row per type and test, each
    // row with its type and KV bytes (q8_0: 34 bytes per 32 values, about half of f16's 64)
    const Result kv = run_moe("bench -m " + path + " -p 16 -n 4 -d 8 -r 2 -t 2 -o json --bw 10 --kv-type f16,q8_0");
    ASSERT_EQ(0, kv.code) << kv.err;
    const auto kj = nlohmann::json::parse(kv.out);
    ASSERT_EQ(4u, kj["tests"].size()) << kv.out;
    const char* want_tests[] = {"pp16 @ d8 kv f16", "pp16 @ d8 kv q8_0", "tg4 @ d8 kv f16", "tg4 @ d8 kv q8_0"};
    for (size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(want_tests[i], kj["tests"][i]["test"].get<std::string>()) << kv.out;
        EXPECT_EQ(i % 2 ? "q8_0" : "f16", kj["tests"][i]["kv_type"].get<std::string>()) << kv.out;
        EXPECT_EQ(2u, kj["tests"][i]["tps_reps"].size()) << kv.out;
        EXPECT_GT(kj["tests"][i]["tps_mean"].get<double>(), 0.0) << kv.out;
    }
    const double f16_bytes = kj["tests"][0]["kv_bytes"].get<double>(), q8_bytes = kj["tests"][1]["kv_bytes"].get<double>();
    EXPECT_NEAR(q8_bytes / f16_bytes, 34.0 / 64.0, 0.02) << kv.out;
    const Result kvmd = run_moe("bench -m " + path + " -p 8 -n 2 -r 1 -t 1 --bw 10 --kv-type f32,f16,q8_0");
    ASSERT_EQ(0, kvmd.code) << kvmd.err;
    for (const char* row : {"| pp8 kv f32 |", "| pp8 kv f16 |", "| pp8 kv q8_0 |", "| tg2 kv q8_0 |"})
        EXPECT_EQ(2, count_lines_with(kvmd.out, row)) << row << "\n" << kvmd.out;  // t/s table, stage split
    EXPECT_EQ(1, count_lines_with(kvmd.out, "KV cache q8_0: ")) << kvmd.out;
    expect_error(run_moe("bench -m " + path + " --kv-type f16,q4"), {"'q4'", "f16, q8_0"});
    expect_error(run_moe("bench -m " + path + " --kv-type f16,q8_0 --mem 1G"), {"several types", "--mem"});

    const Result bw = run_moe("bench --membw --membw-mib 16 -t 1 -r 1");
    ASSERT_EQ(0, bw.code) << bw.err;
    EXPECT_NE(bw.out.find("read bandwidth: "), std::string::npos) << bw.out;
    EXPECT_NE(bw.out.find("16 MiB buffer"), std::string::npos) << bw.out;
    // With -m, the buffer a run of that model samples (here the 256 MiB floor).
    const Result bwm = run_moe("bench --membw -m " + path + " -t 1 -r 1");
    ASSERT_EQ(0, bwm.code) << bwm.err;
    EXPECT_NE(bwm.out.find("256 MiB buffer"), std::string::npos) << bwm.out;
    expect_error(run_moe("bench --membw -m " + path + ".absent -t 1"), {"no such file", "--membw-mib"});
    expect_error(run_moe("bench -m " + path + " -o xml"), {"-o 'xml'"});
}

TEST(InferCli, BadInputsAreOneLineErrors) {
    const std::string good = gen_model("tiny-qwen3moe");
    const std::string out = (temp_dir() / "bad.bin").string();
    const std::string eval = " --tokens 1,2,3 --logits-out " + out;

    const std::string unknown = rewrite(good, "unknown-arch.gguf", with(&Edit::set_arch, "mamba9"));
    expect_error(run_moe("eval -m " + unknown + eval), {"mamba9", "not supported", "qwen3moe"});

    const std::string missing = rewrite(good, "missing.gguf", with(&Edit::drop_tensor, "blk.1.attn_k.weight"));
    expect_error(run_moe("eval -m " + missing + eval), {"blk.1.attn_k.weight", "missing", "[64, 64]", missing});

    const std::string shaped =
        rewrite(good, "shaped.gguf", reshape("blk.0.ffn_up_exps.weight", {64, 16, 8}));
    expect_error(run_moe("eval -m " + shaped + eval),
                 {"blk.0.ffn_up_exps.weight", "[64, 16, 8]", "expected [64, 32, 8]", shaped});

    const std::string novocab = rewrite(good, "novocab.gguf", with(&Edit::drop_key, "tokenizer.ggml.tokens"));
    expect_error(run_moe("eval -m " + novocab + eval), {"tokenizer.ggml.tokens"});
    const std::string nomerges = rewrite(good, "nomerges.gguf", with(&Edit::drop_key, "tokenizer.ggml.merges"));
    expect_error(run_moe("run -m " + nomerges + " -p hi"), {"tokenizer.ggml.merges"});

    expect_error(run_moe("eval -m " + good + " --tokens 1,2,320 --logits-out " + out), {"token id 320", "320 tokens"});
    expect_error(run_moe("eval -m " + good + " --tokens 1,x --logits-out " + out), {"'x'"});
    expect_error(run_moe("eval -m " + good + " --tokens 1,2,3,4,5 --ctx 4 --logits-out " + out),
                 {"prompt of 5 tokens exceeds the context of 4"});
    expect_error(run_moe("run -m " + good + " -p 'a long prompt, longer than eight tokens' --ctx 8"),
                 {"exceeds the context of 8"});
    EXPECT_FALSE(fs::exists(out));

    // A weight type without a matmul kernel (q8_1, an activation format) names the tensor, the type
    // and what is supported.
    Edit q81;
    q81.retype_tensor = "blk.0.attn_q.weight";
    q81.new_type = DType::Q8_1;
    const std::string bad_type = rewrite(good, "q8_1.gguf", q81);
    expect_error(run_moe("eval -m " + bad_type + eval),
                 {"blk.0.attn_q.weight", "q8_1", "supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0"});
}

TEST(InferCli, Q8_0WeightsLoadAndRun) {
    const std::string path = gen_model("tiny-qwen3moe", DType::Q8_0);
    const Result r = run_moe("eval -m " + path + " --tokens 1,2,3 --logits-out " + (temp_dir() / "q8.bin").string());
    EXPECT_EQ(0, r.code) << r.err;
}

TEST(InferCli, F16AndBf16WeightsLoad) {
    for (DType t : {DType::F16, DType::BF16}) {
        const std::string path = gen_model("tiny-mixtral", t);
        const Result r = run_moe("eval -m " + path + " --tokens 1,2,3 --logits-out " + (temp_dir() / "h.bin").string());
        EXPECT_EQ(0, r.code) << dtype_name(t) << ": " << r.err;
    }
}
