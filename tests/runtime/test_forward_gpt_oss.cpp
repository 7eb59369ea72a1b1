// gpt-oss specifics on tiny-gpt-oss (the shared forward tests in test_forward.cpp run it against
// the fp64 reference, prefill vs decode, interleaved sequences, f16 KV and stored types):
//  - layer 0 slides over a window of 8 keys, layer 1 attends to everything (llama.cpp's pattern);
//  - positions far past the window and past YaRN's original context agree with the fp64 reference,
//    and the window and the sinks change the result (so the reference checks them);
//  - `moe gen --type mxfp4` writes MXFP4 expert stacks (Q8_0 elsewhere) that run close to the
//    reference on the dequantized weights;
//  - variants the forward pass does not run are one clear error naming the key and value.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "model/arch_spec.h"
#include "model/model.h"
#include "runtime/gen_model_util.h"
#include "runtime/reference_forward_util.h"
#include "runtime/session.h"

using namespace moe;
namespace fs = std::filesystem;

namespace {

const fs::path& temp_dir() {
    static const fs::path dir = [] {
        fs::path d = fs::temp_directory_path() / ("moe-test-oss-" + std::to_string(::getpid()));
        fs::create_directories(d);
        return d;
    }();
    return dir;
}
struct RemoveTempDir : ::testing::Environment {
    void TearDown() override { fs::remove_all(temp_dir()); }
};
[[maybe_unused]] auto* const g_env = ::testing::AddGlobalTestEnvironment(new RemoveTempDir);

std::string model_path(DType type = DType::F32) { return testutil::gen_model(temp_dir(), "tiny-gpt-oss", type, 13); }

// Copy of `src` with metadata key `key` replaced (set_value) and tensors passed through `edit`
// (name, f32 data of F32 tensors) before writing.
template <typename SetFn, typename EditFn>
std::string rewrite(const std::string& src, const std::string& key, SetFn&& set_value, EditFn&& edit,
                    const std::string& out_name) {
    const fs::path p = temp_dir() / out_name;
    const auto in = gguf::File::open(src);
    gguf::Writer w(p.string(), in.alignment());
    for (const auto& kv : in.metadata())
        if (kv.key != key) w.set(kv.key, kv.value);
    set_value(w);
    for (const auto& t : in.tensors()) w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims));
    w.write_header();
    for (const auto& t : in.tensors()) {
        const TensorView v = in.view(t);
        std::vector<char> bytes(static_cast<const char*>(v.data), static_cast<const char*>(v.data) + v.nbytes());
        if (t.type == DType::F32) edit(t.name, reinterpret_cast<float*>(bytes.data()), v.nelements());
        w.write_data(bytes.data(), bytes.size());
    }
    w.finish();
    return p.string();
}
auto no_edit = [](const std::string&, float*, int64_t) {};

std::vector<int32_t> tokens(size_t n, int64_t V, uint32_t x) {
    std::vector<int32_t> t(n);
    for (auto& v : t) v = static_cast<int32_t>(((x = x * 1664525u + 1013904223u) >> 8) % static_cast<uint32_t>(V));
    return t;
}

std::vector<float> run(const std::string& path, const std::vector<int32_t>& toks) {
    auto m = model::Model::load(path, {2, 64, 256});
    ThreadPool pool(2);
    runtime::Session s(*m, pool, {256, 1, DType::F32});
    std::vector<float> out(toks.size() * static_cast<size_t>(m->config().n_vocab));
    s.eval(0, toks, out.data(), true);
    return out;
}

double worst_nmse(const std::vector<float>& got, const std::vector<double>& ref, size_t n, size_t V) {
    double worst = 0;
    for (size_t i = 0; i < n; ++i) worst = std::max(worst, testref::nmse(got.data() + i * V, ref.data() + i * V, V));
    return worst;
}

}  // namespace

TEST(GptOss, SlidingAndFullLayersAlternate) {
    auto m = model::Model::load(model_path(), {1, 4, 64});
    const model::LayerDesc& l = m->desc().layer;
    EXPECT_EQ(m->config().sliding_window, 8);
    EXPECT_EQ(l.window(0), 8);  // llama.cpp: layer il slides when il % 2 < 1
    EXPECT_EQ(l.window(1), 0);
    EXPECT_EQ(l.window(2), 8);
    EXPECT_TRUE(l.attn_sinks && l.o_bias && l.qkv_bias && l.post_attn_norm);
    EXPECT_EQ(m->desc().moe.gating, Gating::SoftmaxSelected);
    EXPECT_EQ(m->desc().moe.act, Activation::SwiGLUClamped);
    EXPECT_TRUE(m->desc().moe.has_router_bias && m->desc().moe.has_expert_bias);
}

// 150 positions: far past the window (8) and YaRN's original context (128).
TEST(GptOss, LongPositionsMatchReference) {
    const std::string path = model_path();
    const int64_t V = model::Model::load(path, {1, 4, 64})->config().n_vocab;
    const auto toks = tokens(150, V, 77);
    const auto got = run(path, toks);
    const auto ref = testref::reference_forward(gguf::File::open(path), toks);
    const double w = worst_nmse(got, ref, toks.size(), static_cast<size_t>(V));
    EXPECT_LE(w, 1e-6);
    std::printf("[ tiny-gpt-oss ] worst NMSE vs fp64 reference, positions 0..149: %.3g\n", w);
}

// The reference only checks what changes the output: with the sinks at -1e30 (weight 0) or the
// window widened past the sequence, rows past the window differ clearly from the real model's.
TEST(GptOss, WindowAndSinksChangeTheResult) {
    const std::string path = model_path();
    const int64_t V = model::Model::load(path, {1, 4, 64})->config().n_vocab;
    const auto toks = tokens(40, V, 5);
    const auto base = run(path, toks);
    const std::string no_sinks = rewrite(
        path, "", [](gguf::Writer&) {},
        [](const std::string& n, float* x, int64_t k) {
            if (n.find("attn_sinks") != std::string::npos) std::fill(x, x + k, -1e30f);
        },
        "oss-nosinks.gguf");
    const std::string wide = rewrite(
        path, "gpt-oss.attention.sliding_window", [](gguf::Writer& w) { w.set_u32("gpt-oss.attention.sliding_window", 4096); },
        no_edit, "oss-wide.gguf");
    for (const std::string& p : {no_sinks, wide}) {
        const auto other = run(p, toks);
        const auto ref = testref::reference_forward(gguf::File::open(p), toks);
        const size_t Vs = static_cast<size_t>(V);
        EXPECT_LE(worst_nmse(other, ref, toks.size(), Vs), 1e-6) << p;  // the variant matches its reference
        double past = 0;  // rows past the window: the variant is a different model
        for (size_t i = 10; i < toks.size(); ++i) past = std::max(past, testref::nmse(other.data() + i * Vs, reinterpret_cast<const float*>(base.data()) + i * Vs, Vs));
        EXPECT_GT(past, 1e-4) << p;
    }
}

TEST(GptOss, Mxfp4ExpertsMatchReferenceOnDequantizedWeights) {
    const std::string path = model_path(DType::MXFP4);
    const auto f = gguf::File::open(path);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_exps.weight")->type, DType::MXFP4);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_down_exps.weight")->type, DType::MXFP4);
    EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->type, DType::Q8_0);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_exps.bias")->type, DType::F32);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_inp.weight")->type, DType::F32);
    EXPECT_EQ(f.get_int("general.file_type").value_or(-1), 38);
    const int64_t V = model::Model::load(path, {1, 4, 64})->config().n_vocab;
    const auto toks = tokens(20, V, 9);
    const auto got = run(path, toks);
    const auto ref = testref::reference_forward(f, toks);
    // int8 activations against fp64 on the same (dequantized) weights: the bound of the stored-type
    // test in test_forward.cpp (3e-3 per row, a routing near-tie may flip a row or two).
    std::vector<double> e;
    for (size_t i = 0; i < toks.size(); ++i)
        e.push_back(testref::nmse(got.data() + i * static_cast<size_t>(V), ref.data() + i * static_cast<size_t>(V),
                                  static_cast<size_t>(V)));
    std::sort(e.begin(), e.end());
    double trimmed = 0;
    for (size_t i = 0; i < e.size() * 3 / 4; ++i) trimmed += e[i] / static_cast<double>(e.size() * 3 / 4);
    EXPECT_LE(trimmed, 1.5e-3);
    EXPECT_LE(e[e.size() * 3 / 4], 3e-3);
    std::printf("[ tiny-gpt-oss mxfp4 ] NMSE vs fp64 on dequantized weights: best 3/4 mean %.3g, worst %.3g\n", trimmed,
                e.back());
}

TEST(GptOss, UnsupportedVariantsAreErrors) {
    auto expect_error = [](const std::string& path, const std::vector<std::string>& needles) {
        try {
            model::Model::load(path, {1, 4, 64});
            ADD_FAILURE() << "expected an error for " << path;
        } catch (const Error& e) {
            const std::string msg = e.what();
            for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
        }
    };
    const std::string src = model_path();
    expect_error(rewrite(src, "gpt-oss.rope.scaling.type",
                         [](gguf::Writer& w) { w.set_string("gpt-oss.rope.scaling.type", "linear"); }, no_edit,
                         "oss-linear.gguf"),
                 {"gpt-oss.rope.scaling.type", "linear"});
    expect_error(rewrite(src, "gpt-oss.rope.scaling.type",
                         [](gguf::Writer& w) { w.set_string("gpt-oss.rope.scaling.type", "longrope"); }, no_edit,
                         "oss-longrope.gguf"),
                 {"gpt-oss.rope.scaling.type", "longrope"});
    expect_error(rewrite(src, "gpt-oss.rope.freq_base_swa",
                         [](gguf::Writer& w) { w.set_f32("gpt-oss.rope.freq_base_swa", 10000.0f); }, no_edit,
                         "oss-swa-base.gguf"),
                 {"gpt-oss.rope.freq_base_swa", "10000"});
}
