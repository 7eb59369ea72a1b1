// --repack (model::ExpertCacheOptions::repack): the routed experts as with --repack-experts, plus the
// dense projections and the lm head of a Q4_K / Q6_K model repacked once at load into panels that
// every call reads (Forward::Proj::panels), their blocks released from the mapping:
//  - logits bitwise equal to the block kernels', for a batched prefill, a 2-row call and
//    single-token decode steps;
//  - after the repack the dense blocks are never read: overwriting them changes nothing, while
//    corrupting the panels changes the logits.
// The model: `moe gen` small-olmoe (rows of 512 values: whole super-blocks), one layer, rewritten with
// the matrix types of a Q4_K_M file (Q4_K attention q/k/o and expert gate/up; Q6_K attn_v, expert down
// and the lm head), of a Q5_K_M file (Q5_K where Q4_K_M has Q4_K), or every matrix Q8_0, Q4_0 or
// Q5_0 (llama.cpp's --pure; Q5_0 has no quantizer here: random valid blocks at each row's scale); and
// `moe gen tiny-gpt-oss --type mxfp4` (one layer): MXFP4 experts, every other matrix Q8_0 with K = 64
// or 128, not whole 256-value super-blocks (the Q8_0 panels of any K % 32 == 0, as gpt-oss-20b's K = 2880).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "core/rng.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quant_random.h"
#include "model/gen.h"
#include "model/model.h"
#include "runtime/session.h"

using namespace moe;
namespace fs = std::filesystem;

namespace {

const fs::path& temp_dir() {
    return testutil::binary_temp_dir("forward-repack");
}

// The model kinds (the test's parameter): Q4_K_M-like, every matrix Q8_0 (the Q8_0 panels, whose
// decode GEMV reads Q8_0's activation rows) or Q4_0 (likewise), Q5_K_M-like, every matrix Q5_0, tiny gpt-oss.
enum Kind { kQ4KM, kQ8, kQ40, kQ5KM, kQ50, kGptOss, kKinds };
const char* const kKindName[kKinds] = {"Q4_K_M", "Q8_0", "Q4_0", "Q5_K_M", "Q5_0", "GPTOSS_MXFP4"};

// The type of a tensor of the F32 file in a file of kind k (F32 kept for vectors, the router, token_embd).
DType q4km_type(const gguf::TensorInfo& t, int k) {
    if (t.n_dims < 2 || t.ne[0] % 256 != 0 || t.name == "token_embd.weight" ||
        t.name.find("ffn_gate_inp") != std::string::npos)
        return t.type;
    if (k == kQ8) return DType::Q8_0;
    if (k == kQ40) return DType::Q4_0;
    if (k == kQ50) return DType::Q5_0;
    if (t.name == "output.weight" || t.name.find("attn_v.") != std::string::npos ||
        t.name.find("ffn_down") != std::string::npos)
        return DType::Q6_K;
    return k == kQ5KM ? DType::Q5_K : DType::Q4_K;
}

// Written once per test binary and kind.
std::string write_model(int q8) {
    const fs::path f32 = temp_dir() / "small-olmoe-f32.gguf",
                   out = temp_dir() / ("small-olmoe-" + std::string(kKindName[q8]) + ".gguf");
    model::GenSpec g;
    g.preset = "small-olmoe";
    g.layers = 1;
    g.seed = 21;
    g.output = f32.string();
    g.threads = 2;
    if (q8 == kGptOss) {  // written as it is by gen
        g.preset = "tiny-gpt-oss";
        g.type = DType::MXFP4;
        g.output = out.string();
        model::generate(g);
        return out.string();
    }
    model::generate(g);
    const gguf::File in = gguf::File::open(f32.string());
    gguf::Writer w(out.string());
    for (const auto& kv : in.metadata()) w.set(kv.key, kv.value);
    std::vector<DType> types;
    for (const auto& t : in.tensors()) {
        types.push_back(q4km_type(t, q8));
        w.add_tensor(t.name, types.back(), std::vector<int64_t>(t.ne, t.ne + t.n_dims));
    }
    w.write_header();
    std::vector<uint8_t> row;
    for (size_t i = 0; i < in.tensors().size(); ++i) {
        const gguf::TensorInfo& t = in.tensors()[i];
        const auto* src = static_cast<const uint8_t*>(in.view(t).data);
        if (types[i] == t.type) {
            w.write_data(src, t.nbytes);
            continue;
        }
        const int64_t K = t.ne[0], rows = t.ne[1] * t.ne[2] * t.ne[3];
        row.resize(row_bytes(types[i], static_cast<uint64_t>(K)));
        Rng rng(0x50 + i);
        for (int64_t r = 0; r < rows; ++r) {
            const float* x = reinterpret_cast<const float*>(src) + r * K;
            if (ref::can_quantize(types[i])) {
                EXPECT_TRUE(ref::quantize_row(types[i], x, row.data(), K));
            } else {
                float amax = 0;
                for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x[k]));
                EXPECT_TRUE(ref::fill_random_blocks(types[i], rng, row.data(), K / dtype_info(types[i]).block, amax));
            }
            w.write_data(row.data(), row.size());
        }
    }
    w.finish();
    return out.string();
}

const std::string& q4km_model(int q8) {
    static std::string path[kKinds];
    if (path[q8].empty()) path[q8] = write_model(q8);
    return path[q8];
}

std::unique_ptr<model::Model> load(bool repack, int q8) {
    model::ModelOptions mo;
    mo.n_threads = 2;
    mo.max_batch = 32;
    mo.n_ctx = 64;
    mo.cache.repack = repack;
    return model::Model::load(q4km_model(q8), mo);
}

const std::vector<int32_t> kPrompt = {5,  17,  200, 42, 9,   77, 128, 3,  250, 11,
                                      64, 199, 23,  8,  150, 31, 2,   90, 121, 240};
const std::vector<int32_t> kPair = {44, 101};
const std::vector<int32_t> kSteps = {7, 222, 56};

// Logits of a batched prefill (every row), a 2-row call, then single-token decode steps.
std::vector<float> run(model::Model& m) {
    ThreadPool pool(2);
    runtime::Session s(m, pool, {64, 1, DType::F32});
    const size_t V = static_cast<size_t>(m.config().n_vocab);
    std::vector<float> out((kPrompt.size() + kPair.size() + kSteps.size()) * V);
    s.eval(0, kPrompt, out.data(), true);
    s.eval(0, kPair, out.data() + kPrompt.size() * V, true);
    for (size_t i = 0; i < kSteps.size(); ++i)
        s.eval(0, {kSteps[i]}, out.data() + (kPrompt.size() + kPair.size() + i) * V, false);
    return out;
}

bool panels_here() {
    return kernels::qmm_has_avx512(DType::Q4_K) && kernels::panel::panel_gemv_usable();
}

// The dense matrices of the one-layer model that --repack turns into panels.
std::vector<const TensorView*> dense_matrices(const model::Model& m) {
    const model::LayerWeights& w = m.weights().layers[0];
    return {&w.wq, &w.wk, &w.wv, &w.wo, &m.weights().output};
}

class ForwardRepack : public testing::TestWithParam<int> {};  // param: the model's Kind

TEST_P(ForwardRepack, LogitsEqualTheBlockKernelsBitForBit) {
    auto plain = load(false, GetParam()), packed = load(true, GetParam());
    EXPECT_EQ(plain->dense_panel_bytes(), 0u);
    EXPECT_EQ(plain->dense_panels(plain->weights().layers[0].wq.data), nullptr);
    if (!panels_here()) {
        EXPECT_EQ(packed->dense_panel_bytes(), 0u) << "panels made on a CPU without the panel kernels";
        GTEST_SKIP() << "no AVX-512 VNNI + GFNI on this CPU: --repack makes no panels here";
    }
    // q, k, v, o and the head repacked, at ceil(N / 16) panels each; their blocks released, and
    // Model::released (moe bench's page touch skips those) says so; the experts repacked as well
    size_t want = 0;
    for (const TensorView* t : dense_matrices(*packed)) {
        SCOPED_TRACE(t->name);
        EXPECT_NE(packed->dense_panels(t->data), nullptr);
        if (GetParam() == kGptOss) {
            EXPECT_EQ(t->type, DType::Q8_0);
            EXPECT_NE(t->ne[0] % 256, 0) << "the test wants Q8_0 rows of K % 256 != 0";
        }
        // (only whole pages are released: tiny-gpt-oss's k and v, 32 x 68 bytes, hold none)
        if (t->nb[1] * t->ne[1] >= 2 * static_cast<size_t>(::sysconf(_SC_PAGESIZE))) {
            EXPECT_TRUE(packed->released(static_cast<const char*>(t->data) + t->nb[1] * t->ne[1] / 2));
        }
        want += (kernels::panel::panel_matrix_bytes(t->type, t->ne[1], t->ne[0]) + 63) / 64 * 64;
    }
    EXPECT_EQ(packed->dense_matrices(), 5u);
    EXPECT_EQ(packed->dense_panel_bytes(), want);
    EXPECT_GT(packed->dense_released_bytes(), 0u);
    EXPECT_GT(packed->panel_bytes(), 0u);  // the experts too (tiny gpt-oss: MXFP4 panels)
    EXPECT_FALSE(packed->released(packed->weights().token_embd.data));

    const std::vector<float> a = run(*plain), b = run(*packed);
    ASSERT_EQ(a.size(), b.size());
    const size_t V = static_cast<size_t>(plain->config().n_vocab);
    for (size_t r = 0; r < a.size() / V; ++r)
        ASSERT_EQ(0, std::memcmp(a.data() + r * V, b.data() + r * V, V * sizeof(float)))
            << "logits row " << r;
}

// The blocks live in the file's private read-only mapping: made writable (copy on write, the file
// is untouched) and overwritten after the repack, they must not matter; the panels must.
TEST_P(ForwardRepack, CallsReadThePanelsAndNeverTheDenseBlocks) {
    if (!panels_here()) GTEST_SKIP() << "no AVX-512 VNNI + GFNI on this CPU: --repack makes no panels here";
    auto m = load(true, GetParam());
    const std::vector<float> want = run(*m);
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    for (const TensorView* t : dense_matrices(*m)) {
        auto* p = static_cast<uint8_t*>(const_cast<void*>(t->data));
        const size_t n = t->nb[1] * static_cast<size_t>(t->ne[1]);
        const uintptr_t lo = reinterpret_cast<uintptr_t>(p) / page * page;
        const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page * page;
        ASSERT_EQ(0, ::mprotect(reinterpret_cast<void*>(lo), hi - lo, PROT_READ | PROT_WRITE)) << t->name;
        for (size_t i = 0; i < n; i += 7) p[i] ^= 0x5A;
        ASSERT_EQ(0, ::mprotect(reinterpret_cast<void*>(lo), hi - lo, PROT_READ)) << t->name;
    }
    const std::vector<float> same = run(*m);
    ASSERT_EQ(0, std::memcmp(want.data(), same.data(), want.size() * sizeof(float)))
        << "corrupted blocks were read";

    // the first 64 level bytes of every panel of attn_q (all 16 rows of each) flipped: the batched
    // prefill and every decode step change
    const TensorView& wq = m->weights().layers[0].wq;
    auto* pq = const_cast<uint8_t*>(m->dense_panels(wq.data));
    const size_t one = kernels::panel::panel_bytes(wq.type, wq.ne[0]);
    for (int64_t pi = 0; pi < (wq.ne[1] + 15) / 16; ++pi)
        for (size_t b = 0; b < 64; ++b) pq[static_cast<size_t>(pi) * one + b] ^= 0xFF;
    const std::vector<float> bad = run(*m);
    const size_t V = static_cast<size_t>(m->config().n_vocab);
    EXPECT_NE(0, std::memcmp(want.data(), bad.data(), kPrompt.size() * V * sizeof(float)))
        << "prefill ignored the panels";
    const size_t last = want.size() - V;
    EXPECT_NE(0, std::memcmp(want.data() + last, bad.data() + last, V * sizeof(float)))
        << "decode ignored the panels";
}

// The CLI's default (ExpertCacheOptions::repack_auto): the same panels as --repack where the file
// fits the memory limit, hence the same logits as the blocks; and the rule itself on made-up limits.
TEST_P(ForwardRepack, RepackAutoIsRepackWhereTheFileFits) {
    model::ModelOptions mo;
    mo.n_threads = 2;
    mo.max_batch = 32;
    mo.n_ctx = 64;
    mo.cache.repack_auto = true;
    auto plain = load(false, GetParam()), packed = load(true, GetParam()), deflt = model::Model::load(q4km_model(GetParam()), mo);
    // this machine's memory holds a file of a few MiB many times over
    const bool made = packed->panel_bytes() + packed->dense_panel_bytes() > 0;  // none on a path without panels
    EXPECT_NE(deflt->repack_note().find(made ? "repacked by default" : "nothing repacked"), std::string::npos)
        << deflt->repack_note();
    EXPECT_TRUE(deflt->options().cache.repack);
    EXPECT_EQ(deflt->panel_bytes(), packed->panel_bytes());
    EXPECT_EQ(deflt->dense_panel_bytes(), packed->dense_panel_bytes());
    EXPECT_EQ(deflt->dense_matrices(), packed->dense_matrices());
    EXPECT_TRUE(plain->repack_note().empty());
    const std::vector<float> a = run(*plain), b = run(*deflt);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(RepackByDefault, OnlyWithoutMemAndWhereTheFileFitsTheLimitWithAMargin) {
    const MemLimit lim{8ull << 30, "cgroup v2 /sys/fs/cgroup/t/memory.max"};
    const uint64_t fits = auto_memory_budget(lim);
    std::string note;
    EXPECT_TRUE(model::repack_by_default(0, fits, &lim, &note));
    EXPECT_NE(note.find("repacked by default"), std::string::npos) << note;
    EXPECT_NE(note.find("8192 MiB"), std::string::npos) << note;
    EXPECT_FALSE(model::repack_by_default(0, fits + 1, &lim, &note));
    EXPECT_NE(note.find("does not fit"), std::string::npos) << note;
    EXPECT_NE(note.find("--repack forces it"), std::string::npos) << note;
    EXPECT_NE(note.find("memory.max"), std::string::npos) << note;
    EXPECT_FALSE(model::repack_by_default(1ull << 30, 1 << 20, &lim, &note));
    EXPECT_NE(note.find("--mem"), std::string::npos) << note;
    EXPECT_FALSE(model::repack_by_default(0, 1 << 20, nullptr, &note));
    EXPECT_NE(note.find("no memory limit"), std::string::npos) << note;
}

// A tiny gpt-oss written with MXFP4 experts (llama-quantize's MXFP4_MOE: every other matrix Q8_0,
// rows of 64 values, so those stay on their blocks): the routed experts (K = 64 gate/up, 32 down:
// MXFP4 panels step by 32-value blocks) become panels serving every call, their blocks released;
// the logits equal the blocks', and overwriting the expert blocks after the load changes nothing.
const std::string& gptoss_mxfp4_model() {
    static std::string path;
    if (path.empty()) {
        model::GenSpec g;
        g.preset = "tiny-gpt-oss";
        g.type = DType::MXFP4;
        g.seed = 23;
        g.output = (temp_dir() / "tiny-gpt-oss-mxfp4.gguf").string();
        g.threads = 2;
        model::generate(g);
        path = g.output;
    }
    return path;
}

TEST(ForwardRepackMxfp4, GptOssExpertLogitsEqualTheBlocksAndTheBlocksAreNeverRead) {
    model::ModelOptions mo;
    mo.n_threads = 2;
    mo.max_batch = 32;
    mo.n_ctx = 64;
    auto plain = model::Model::load(gptoss_mxfp4_model(), mo);
    mo.cache.repack = true;
    auto packed = model::Model::load(gptoss_mxfp4_model(), mo);
    if (!panels_here()) GTEST_SKIP() << "no AVX-512 VNNI + GFNI on this CPU: --repack makes no panels here";
    EXPECT_EQ(plain->panel_bytes(), 0u);
    EXPECT_GT(packed->panel_bytes(), 0u);
    EXPECT_GT(packed->released_bytes(), 0u);
    for (const model::LayerWeights& l : packed->weights().layers)
        for (const TensorView* t : {&l.moe.gate_exps, &l.moe.up_exps, &l.moe.down_exps}) {
            ASSERT_EQ(t->type, DType::MXFP4) << t->name;
            EXPECT_TRUE(packed->released(static_cast<const char*>(t->data) + t->nb[2] / 2)) << t->name;
        }
    const std::vector<float> a = run(*plain), b = run(*packed);
    ASSERT_EQ(a.size(), b.size());
    const size_t V = static_cast<size_t>(plain->config().n_vocab);
    for (size_t r = 0; r < a.size() / V; ++r)
        ASSERT_EQ(0, std::memcmp(a.data() + r * V, b.data() + r * V, V * sizeof(float))) << "logits row " << r;
    // the expert blocks overwritten (copy on write, the file is untouched): the same logits
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    for (const model::LayerWeights& l : packed->weights().layers)
        for (const TensorView* t : {&l.moe.gate_exps, &l.moe.up_exps, &l.moe.down_exps}) {
            auto* p = static_cast<uint8_t*>(const_cast<void*>(t->data));
            const size_t n = t->nb[2] * static_cast<size_t>(t->ne[2]);
            const uintptr_t lo = reinterpret_cast<uintptr_t>(p) / page * page;
            const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page * page;
            ASSERT_EQ(0, ::mprotect(reinterpret_cast<void*>(lo), hi - lo, PROT_READ | PROT_WRITE)) << t->name;
            for (size_t i = 0; i < n; i += 7) p[i] ^= 0x5A;
            ASSERT_EQ(0, ::mprotect(reinterpret_cast<void*>(lo), hi - lo, PROT_READ)) << t->name;
        }
    const std::vector<float> c = run(*packed);
    ASSERT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(float))) << "corrupted expert blocks were read";
}

INSTANTIATE_TEST_SUITE_P(Types, ForwardRepack, testing::Range(0, static_cast<int>(kKinds)), [](const testing::TestParamInfo<int>& i) {
    return std::string(kKindName[i.param]);
});

}  // namespace
