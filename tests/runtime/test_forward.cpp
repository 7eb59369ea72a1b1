// End-to-end forward pass on `moe gen` tiny presets of every supported architecture:
//  - engine (f32 weights, f32 KV) vs the independent fp64 reference: NMSE <= 1e-6 on every row;
//  - batched prefill == token-by-token decode, bitwise;
//  - two sequences interleaved in one batch == each alone, bitwise;
//  - 1 vs 2 threads, and prefill split into small batches, bitwise;
//  - f16 KV cache close to f32 (bound derived below);
//  - weights stored as f16 / bf16 / q8_0 / q4_0 (read in place by their own kernels) vs the fp64
//    reference run on the same dequantized weights (bounds derived at the test).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "common/temp_dir.h"
#include "core/thread_pool.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quantize_q8_0.h"
#include "model/gen.h"
#include "model/model.h"
#include "runtime/gen_model_util.h"
#include "runtime/reference_forward_util.h"
#include "runtime/session.h"

using namespace moe;
namespace fs = std::filesystem;

namespace {

const char* const kPresets[] = {"tiny-mixtral", "tiny-qwen2moe",  "tiny-qwen3moe",
                                "tiny-olmoe",   "tiny-deepseek2", "tiny-deepseek3", "tiny-gpt-oss"};

const fs::path& temp_dir() { return moe::testutil::binary_temp_dir("forward"); }

// One generated model per preset, shared by the tests of this binary.
std::string model_path(const std::string& preset) {
    return testutil::gen_model(temp_dir(), preset, DType::F32, 7, /*name_type=*/false);
}

// The preset with its weight matrices stored as `type`: f16/bf16/q8_0 straight from `moe gen`
// (norms and routers stay f32); q4_0 by rewriting the f32 file with the reference quantizer
// (every matrix with ne0 % 32 == 0 except the routers, as llama-quantize does).
std::string typed_model_path(const std::string& preset, DType type) {
    if (type != DType::Q4_0) return testutil::gen_model(temp_dir(), preset, type, 7);
    const fs::path p = temp_dir() / (preset + "-" + dtype_name(type) + ".gguf");
    if (fs::exists(p)) return p.string();
    const auto in = gguf::File::open(model_path(preset));
    gguf::Writer w(p.string(), in.alignment());
    for (const auto& kv : in.metadata()) w.set(kv.key, kv.value);
    std::vector<bool> quant;
    for (const auto& t : in.tensors()) {
        const bool q = t.type == DType::F32 && t.n_dims >= 2 && t.ne[0] % 32 == 0 &&
                       t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".weight") == 0 &&
                       t.name.find("ffn_gate_inp") == std::string::npos;
        quant.push_back(q);
        w.add_tensor(t.name, q ? DType::Q4_0 : t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims));
    }
    w.write_header();
    for (size_t i = 0; i < in.tensors().size(); ++i) {
        const TensorView v = in.view(in.tensors()[i]);
        if (!quant[i]) {
            w.write_data(v.data, v.nbytes());
            continue;
        }
        std::vector<char> out(w.tensor_bytes(i));
        const size_t row_out = out.size() / static_cast<size_t>(v.nrows());
        for (int64_t r = 0; r < v.nrows(); ++r)
            ref::quantize_row_q4_0(static_cast<const float*>(v.data) + r * v.ne[0], out.data() + r * row_out, v.ne[0]);
        w.write_data(out.data(), out.size());
    }
    w.finish();
    return p.string();
}

std::vector<int32_t> test_tokens(int64_t n, int64_t n_vocab, uint32_t salt) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    uint32_t s = 12345u + salt;
    for (auto& v : t) {
        s = s * 1664525u + 1013904223u;
        v = static_cast<int32_t>((s >> 8) % static_cast<uint32_t>(n_vocab));
    }
    return t;
}

struct Engine {
    std::unique_ptr<model::Model> model;
    ThreadPool pool;
    runtime::Session session;
    Engine(const std::string& path, int threads, int64_t max_batch, int64_t n_seq = 1, DType kv = DType::F32,
           bool swa_full = false)
        : model(model::Model::load(path, {threads, max_batch, 64})),
          pool(threads),
          session(*model, pool, {64, n_seq, kv, swa_full}) {}
    int64_t V() const { return model->config().n_vocab; }
    std::vector<float> eval_all(const std::vector<int32_t>& toks, int64_t seq = 0) {
        std::vector<float> out(toks.size() * static_cast<size_t>(V()));
        session.eval(seq, toks, out.data(), true);
        return out;
    }
};

class ForwardArch : public ::testing::TestWithParam<const char*> {};

}  // namespace

TEST_P(ForwardArch, MatchesFp64Reference) {
    const std::string path = model_path(GetParam());
    Engine e(path, 2, 32);
    const auto toks = test_tokens(20, e.V(), 1);
    const auto got = e.eval_all(toks);
    const auto file = gguf::File::open(path);
    const auto ref = testref::reference_forward(file, toks);
    ASSERT_EQ(ref.size(), got.size());
    double worst = 0;
    for (size_t i = 0; i < toks.size(); ++i) {
        const size_t V = static_cast<size_t>(e.V());
        const double err = testref::nmse(got.data() + i * V, ref.data() + i * V, V);
        worst = std::max(worst, err);
        // f32 engine vs fp64: per-op relative rounding ~1e-7 accumulates over a few hundred terms
        // per dot product and 2 layers; observed errors are ~1e-12..1e-10, the bound is 1e-6.
        EXPECT_LE(err, 1e-6) << GetParam() << " row " << i;
    }
    std::printf("[ %s ] worst NMSE vs fp64 reference over %zu rows: %.3g\n", GetParam(), toks.size(), worst);
}

TEST_P(ForwardArch, PrefillEqualsDecodeBitwise) {
    const std::string path = model_path(GetParam());
    Engine a(path, 2, 32), b(path, 2, 32);
    const auto toks = test_tokens(17, a.V(), 2);
    const auto all = a.eval_all(toks);
    const size_t V = static_cast<size_t>(a.V());
    std::vector<float> one(V);
    for (size_t i = 0; i < toks.size(); ++i) {
        b.session.eval(0, {toks[i]}, one.data(), false);
        ASSERT_EQ(0, std::memcmp(one.data(), all.data() + i * V, V * sizeof(float))) << "row " << i;
    }
}

TEST_P(ForwardArch, SmallBatchesAndThreadCountsBitwise) {
    const std::string path = model_path(GetParam());
    Engine a(path, 2, 32), b(path, 1, 5);  // b: one thread, prefill cut into batches of 5
    const auto toks = test_tokens(23, a.V(), 3);
    const auto x = a.eval_all(toks), y = b.eval_all(toks);
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * sizeof(float)));
}

TEST_P(ForwardArch, InterleavedSequencesEqualEachAlone) {
    const std::string path = model_path(GetParam());
    Engine both(path, 2, 32, 2), alone(path, 2, 32, 1);
    const auto s0 = test_tokens(9, both.V(), 4), s1 = test_tokens(13, both.V(), 5);
    const size_t V = static_cast<size_t>(both.V());
    // Batch: the first 4 tokens of seq 1, then seq 0 and seq 1 alternating, seq 1's tail at the end.
    std::vector<model::BatchRow> rows;
    size_t i0 = 0, i1 = 0;
    std::vector<std::pair<int, size_t>> who;
    auto push = [&](int s) {
        size_t& i = s == 0 ? i0 : i1;
        const auto& t = s == 0 ? s0 : s1;
        rows.push_back({t[i], static_cast<int32_t>(i), s, true});
        who.emplace_back(s, i++);
    };
    for (int j = 0; j < 4; ++j) push(1);
    while (i0 < s0.size()) push(0), push(1);
    while (i1 < s1.size()) push(1);
    std::vector<float> out(rows.size() * V);
    ASSERT_EQ(static_cast<int64_t>(rows.size()), both.session.forward(rows, out.data()));
    const auto r0 = alone.eval_all(s0);
    alone.session.clear(0);
    const auto r1 = alone.eval_all(s1);
    for (size_t r = 0; r < rows.size(); ++r) {
        const auto& ref = who[r].first == 0 ? r0 : r1;
        ASSERT_EQ(0, std::memcmp(out.data() + r * V, ref.data() + who[r].second * V, V * sizeof(float)))
            << "row " << r << " (seq " << who[r].first << ", token " << who[r].second << ")";
    }
    // Decode continues per sequence after the mixed batch.
    std::vector<float> a(V), b(V);
    both.session.eval(0, {5}, a.data(), false);
    alone.session.clear(0);
    alone.eval_all(s0);
    alone.session.eval(0, {5}, b.data(), false);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), V * sizeof(float)));
}

TEST_P(ForwardArch, F16KvCacheClose) {
    const std::string path = model_path(GetParam());
    Engine a(path, 2, 32), h(path, 2, 32, 1, DType::F16);
    const auto toks = test_tokens(20, a.V(), 6);
    const auto x = a.eval_all(toks), y = h.eval_all(toks);
    // f16 storage of K and V rounds each element with relative error <= 2^-11 (~4.9e-4), i.e. an
    // NMSE of at most ~2.4e-7 on K and V. Scores s = q.k / sqrt(dk) amplify it by |q||k| / |q.k|
    // (large for nearly orthogonal random q, k) and the softmax by the score spread, two layers in a
    // row, so allow a factor of ~400: bound 1e-4 (observed 2e-6 .. 5e-6 on the tiny presets).
    const size_t V = static_cast<size_t>(a.V());
    double worst = 0;
    for (size_t i = 0; i < toks.size(); ++i) {
        const double err = testref::nmse(y.data() + i * V, x.data() + i * V, V);
        worst = std::max(worst, err);
        EXPECT_LE(err, 1e-4) << "row " << i;
    }
    std::printf("[ %s ] worst NMSE f16 KV vs f32 KV: %.3g\n", GetParam(), worst);
}

// q8_0 KV cache (--kv-type q8_0, kernels/ref/kv_q8.h): every K / V element rounds to a step of
// d = max|x| / 127 of its 32-element block, NMSE ~ 2.5e-5 on K and V for roughly Gaussian blocks
// (100x f16's); through scores, softmax, two layers and the tiny presets' near-tied routers that is
// 3e-4 .. 4.4e-3 on the worst row of each preset (observed). Bound 2e-2 per row and 5e-3 on the
// mean over rows; a wrong block layout or scale gives NMSE ~ 1. Prefill and decode still give the
// same bits (the kernel's property, now through the q8 cache writes), also with gpt-oss's sliding
// window and sinks.
TEST_P(ForwardArch, Q8KvCacheCloseAndPrefillEqualsDecode) {
    const std::string path = model_path(GetParam());
    // (tiny-gpt-oss: window 8 and sinks, so rows 8..19 attend past the window)
    Engine a(path, 2, 32), q(path, 2, 32, 1, DType::Q8_0), d(path, 2, 32, 1, DType::Q8_0);
    const auto toks = test_tokens(20, a.V(), 6);
    const auto x = a.eval_all(toks), y = q.eval_all(toks);
    const size_t V = static_cast<size_t>(a.V());
    double worst = 0, mean = 0;
    std::vector<float> one(V);
    for (size_t i = 0; i < toks.size(); ++i) {
        const double err = testref::nmse(y.data() + i * V, x.data() + i * V, V);
        worst = std::max(worst, err);
        mean += err / static_cast<double>(toks.size());
        EXPECT_LE(err, 2e-2) << "row " << i;
        d.session.eval(0, {toks[i]}, one.data(), false);
        ASSERT_EQ(0, std::memcmp(one.data(), y.data() + i * V, V * sizeof(float))) << "decode row " << i;
    }
    EXPECT_GT(worst, 0.0);  // the cache is quantized
    EXPECT_LE(mean, 5e-3);
    std::printf("[ %s ] NMSE q8_0 KV vs f32 KV: worst row %.3g, mean %.3g\n", GetParam(), worst, mean);
}

// Weights read in place at their file type, against the fp64 reference forward on the same
// dequantized weights (so the weight rounding itself is not an error here; what is measured is the
// kernels' arithmetic):
//  - f16 / bf16: the kernels convert each weight exactly and use f32 FMAs like the f32 path, so the
//    f32 bound holds: NMSE <= 1e-6 per row.
//  - q8_0 / q4_0: the int8 kernels also quantize every activation row to int8 per 32 values
//    (step d = max|x|/127, rounding error uniform in +-d/2: per element variance d^2/12, i.e. NMSE
//    ~ (max/127)^2 / 12 / mean(x^2) ~ 2.5e-5 for roughly Gaussian blocks where max ~ 2.2 sd). A row
//    goes through ~5 quantized matmuls in sequence per layer (q/k/v, o, gate/up, down), 2 layers +
//    the head, ~11 in all, and attention softmax and SwiGLU can amplify by a few: ~1e-3. Bound:
//    3e-3 on every row whose routing agrees; a near-tie of two experts (or, with V3's group-limited
//    routing, of two groups) may flip under the activation rounding (a different expert is not an
//    arithmetic error), so at most a quarter of the rows may exceed it, and the mean of the best
//    three quarters must stay under half the bound (a systematic error moves every row; observed
//    on the tiny presets: 0-4 of 20 rows above 3e-3, trimmed means 4e-4..1e-3, worst single row 0.35
//    on tiny-deepseek3 q8_0, a group flip). A wrong block decode would give NMSE ~1.
TEST_P(ForwardArch, StoredTypesMatchFp64ReferenceOnDequantizedWeights) {
    for (DType type : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
        const std::string path = typed_model_path(GetParam(), type);
        Engine e(path, 2, 32);
        const auto toks = test_tokens(20, e.V(), 7);
        const auto got = e.eval_all(toks);
        const auto file = gguf::File::open(path);
        const auto ref = testref::reference_forward(file, toks);
        ASSERT_EQ(ref.size(), got.size());
        const size_t V = static_cast<size_t>(e.V());
        const bool exact_acts = type == DType::F16 || type == DType::BF16;
        const double bound = exact_acts ? 1e-6 : 3e-3;
        double worst = 0, sum = 0;
        int over = 0;
        std::vector<double> errs;
        for (size_t i = 0; i < toks.size(); ++i) {
            const double err = testref::nmse(got.data() + i * V, ref.data() + i * V, V);
            worst = std::max(worst, err);
            sum += err;
            errs.push_back(err);
            if (err > bound) ++over;
        }
        std::sort(errs.begin(), errs.end());
        const size_t keep = errs.size() * 3 / 4;
        double trimmed = 0;
        for (size_t i = 0; i < keep; ++i) trimmed += errs[i] / static_cast<double>(keep);
        if (exact_acts) EXPECT_EQ(0, over) << dtype_name(type) << " worst " << worst;
        else EXPECT_LE(over * 4, static_cast<int>(toks.size())) << dtype_name(type) << " worst " << worst;
        EXPECT_LE(trimmed, bound / 2) << dtype_name(type);
        std::printf("[ %s %s ] NMSE vs fp64 reference on dequantized weights: mean %.3g (best 3/4: %.3g), worst %.3g, "
                    "%d/%zu rows > %.0e\n",
                    GetParam(), dtype_name(type), sum / static_cast<double>(toks.size()), trimmed, worst, over,
                    toks.size(), bound);
    }
}

INSTANTIATE_TEST_SUITE_P(Presets, ForwardArch, ::testing::ValuesIn(kPresets),
                         [](const auto& info) {
                             std::string n = info.param;
                             for (auto& ch : n)
                                 if (ch == '-') ch = '_';
                             return n;
                         });

// Sliding-window layers keep a ring of window + max_batch - 1 rows (+ window - 1 mirrored;
// runtime/kv_cache.h) instead of every position: the same bits as --swa-full for every cache type,
// across several wraps of the ring (tiny-gpt-oss: window 8 on layer 0; max_batch 5: a ring of 12,
// 60 positions), in prefill batches and in decode; a rewind the ring can serve continues with the
// same bits, a deeper one clears the sequence.
TEST(Forward, SlidingWindowRingEqualsFullCache) {
    const std::string path = model_path("tiny-gpt-oss");
    for (DType kv : {DType::F32, DType::F16, DType::Q8_0}) {
        Engine ring(path, 2, 5, 1, kv), full(path, 2, 5, 1, kv, /*swa_full=*/true);
        const KvCache& rc = ring.session.kv().cache();
        ASSERT_EQ(rc.ring(0), 12);  // layer 0 sliding, layer 1 full
        ASSERT_EQ(rc.ring(1), 0);
        ASSERT_EQ(full.session.kv().cache().ring(0), 0);
        EXPECT_LT(rc.bytes(), full.session.kv().cache().bytes());
        const auto toks = test_tokens(60, ring.V(), 11);
        const size_t V = static_cast<size_t>(ring.V());
        const std::vector<int32_t> pre(toks.begin(), toks.begin() + 40);
        const auto x = ring.eval_all(pre), y = full.eval_all(pre);  // batches of 5
        ASSERT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * sizeof(float))) << dtype_name(kv);
        std::vector<float> a(V), b(V);
        auto step = [&](int32_t tok, const char* what) {
            ring.session.eval(0, {tok}, a.data(), false);
            full.session.eval(0, {tok}, b.data(), false);
            ASSERT_EQ(0, std::memcmp(a.data(), b.data(), V * sizeof(float))) << dtype_name(kv) << " " << what;
        };
        for (size_t i = 40; i < toks.size(); ++i) step(toks[i], "decode");
        // length 60: the ring holds 48..59; a rewind to 56 reads keys from 49 on
        ASSERT_EQ(ring.session.kv().cache().truncate(0, 56), 56);
        ASSERT_EQ(full.session.kv().cache().truncate(0, 56), 56);
        for (int32_t t : test_tokens(4, ring.V(), 12)) step(t, "after rewind");
        EXPECT_EQ(ring.session.kv().cache().truncate(0, 30), 0);
        EXPECT_EQ(full.session.kv().cache().truncate(0, 30), 30);
    }
}

TEST(Forward, BadRowsAreErrors) {
    const std::string path = model_path("tiny-qwen3moe");
    Engine e(path, 1, 8);
    std::vector<float> out(static_cast<size_t>(e.V()));
    // token id out of range
    EXPECT_THROW(e.session.eval(0, {static_cast<int32_t>(e.V())}, out.data(), false), Error);
    EXPECT_THROW(e.session.eval(0, {-1}, out.data(), false), Error);
    // position not the next one of the sequence
    EXPECT_THROW(e.session.forward({{1, 3, 0, true}}, out.data()), Error);
    // sequence slot out of range
    EXPECT_THROW(e.session.forward({{1, 0, 1, true}}, out.data()), Error);
    // longer than the context (64): nothing is computed, the cache stays empty
    std::vector<int32_t> longp(65, 1);
    try {
        e.session.eval(0, longp, nullptr, false);
        FAIL() << "no error";
    } catch (const Error& err) {
        EXPECT_NE(std::string(err.what()).find("exceeds the context of 64"), std::string::npos) << err.what();
    }
    EXPECT_EQ(0, e.session.kv().length(0));
}

// Dense llama (no experts): tiny-mixtral rewritten with expert 0's matrices as the dense FFN
// (ffn_gate/ffn_up/ffn_down) and the expert keys dropped; the engine takes its dense path.
TEST(Forward, DenseLlamaMatchesReference) {
    const std::string moe_path = model_path("tiny-mixtral");
    const std::string path = (temp_dir() / "tiny-dense-llama.gguf").string();
    {
        const auto in = gguf::File::open(moe_path);
        gguf::Writer w(path, in.alignment());
        for (const auto& kv : in.metadata())
            if (kv.key != "llama.expert_count" && kv.key != "llama.expert_used_count") w.set(kv.key, kv.value);
        std::vector<std::pair<const gguf::TensorInfo*, uint64_t>> src;  // (tensor, bytes to copy)
        for (const auto& t : in.tensors()) {
            std::string name = t.name;
            std::vector<int64_t> shape(t.ne, t.ne + t.n_dims);
            if (name.find("ffn_gate_inp") != std::string::npos) continue;
            for (const char* part : {"ffn_gate", "ffn_up", "ffn_down"}) {
                const std::string from = std::string(part) + "_exps";
                if (const size_t at = name.find(from); at != std::string::npos) {
                    name.replace(at, from.size(), part);
                    shape.resize(2);
                }
            }
            const size_t i = w.add_tensor(name, t.type, shape);
            src.emplace_back(&t, w.tensor_bytes(i));
        }
        w.write_header();
        for (const auto& [t, bytes] : src) w.write_data(in.view(*t).data, bytes);  // expert 0 = first slice
        w.finish();
    }
    Engine e(path, 2, 8);
    EXPECT_FALSE(e.model->config().is_moe());
    EXPECT_EQ(nullptr, e.model->moe_block(0));
    const auto toks = test_tokens(12, e.V(), 8);
    const auto got = e.eval_all(toks);
    const auto file = gguf::File::open(path);
    const auto ref = testref::reference_forward(file, toks);
    const size_t V = static_cast<size_t>(e.V());
    for (size_t i = 0; i < toks.size(); ++i)
        EXPECT_LE(testref::nmse(got.data() + i * V, ref.data() + i * V, V), 1e-6) << "row " << i;
}
