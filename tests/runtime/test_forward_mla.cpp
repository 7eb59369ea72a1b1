// deepseek2 (MLA) specifics on the tiny presets (the shared forward tests in test_forward.cpp run
// them against the fp64 reference, prefill vs decode, interleaved sequences, f16 KV, stored types):
//  - the KV cache holds only the latent and the rope key per token and layer (no V buffer);
//  - YaRN's attention scale: mscale^2 / sqrt(nope + rope) from the file's yarn_log_multiplier;
//  - positions past YaRN's original context agree with the fp64 reference;
//  - variants the forward pass does not run are one clear error naming the key and value.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "common/temp_dir.h"
#include "core/thread_pool.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "model/model.h"
#include "runtime/gen_model_util.h"
#include "runtime/reference_forward_util.h"
#include "runtime/session.h"

using namespace moe;
namespace fs = std::filesystem;

namespace {

const fs::path& temp_dir() { return moe::testutil::binary_temp_dir("mla"); }

std::string model_path(const std::string& preset) { return testutil::gen_model(temp_dir(), preset, DType::F32, 11); }

// Copy of `src` with metadata key `key` set to a string value (tensors unchanged).
std::string with_string_key(const std::string& src, const std::string& key, const std::string& value,
                            const std::string& out_name) {
    const fs::path p = temp_dir() / out_name;
    const auto in = gguf::File::open(src);
    gguf::Writer w(p.string(), in.alignment());
    for (const auto& kv : in.metadata())
        if (kv.key != key) w.set(kv.key, kv.value);
    w.set_string(key, value);
    for (const auto& t : in.tensors()) w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims));
    w.write_header();
    for (const auto& t : in.tensors()) {
        const TensorView v = in.view(t);
        w.write_data(v.data, v.nbytes());
    }
    w.finish();
    return p.string();
}

}  // namespace

TEST(Mla, CacheHoldsOnlyLatentAndRopeKey) {
    for (const char* preset : {"tiny-deepseek2", "tiny-deepseek3"}) {
        auto m = model::Model::load(model_path(preset), {2, 8, 256});
        const model::ModelConfig& c = m->config();
        ThreadPool pool(2);
        runtime::Session s(*m, pool, {256, 1, DType::F32});
        const KvCacheSpec& k = s.kv().cache().spec();
        EXPECT_EQ(k.n_head_kv, 1);
        EXPECT_EQ(k.head_dim_k, c.kv_lora_rank + c.qk_rope_head_dim);
        EXPECT_EQ(k.head_dim_v, 0);
        // 256 positions x (32 + 16) f32 x 3 layers, no V: 4x smaller than n_head (4) full K+V heads.
        EXPECT_EQ(s.kv().cache().bytes(), static_cast<uint64_t>(c.n_layer * 256 * (c.kv_lora_rank + c.qk_rope_head_dim) * 4));
    }
}

TEST(Mla, YarnAttentionScaleFromFile) {
    auto m = model::Model::load(model_path("tiny-deepseek2"), {1, 4, 64});
    const model::ModelConfig& c = m->config();
    ASSERT_EQ(c.rope_scaling, model::RopeScaling::Yarn);
    const double mscale = 1.0 + c.rope_yarn_log_mul * std::log(c.rope_scaling_factor);
    EXPECT_GT(mscale, 1.05);  // the preset's factor 4 and 0.0707 make it matter
    EXPECT_NEAR(m->desc().layer.attn_scale, mscale * mscale / std::sqrt(32.0), 1e-6);
    // cos/sin magnitude cancelled: attn_factor * (1 + 0.1 ln factor) == 1
    EXPECT_NEAR(m->desc().rope.attn_factor * (1.0 + 0.1 * std::log(c.rope_scaling_factor)), 1.0, 1e-6);
}

// Positions up to 150, past the preset's YaRN original context (128), against the fp64 reference.
TEST(Mla, LongPositionsMatchReference) {
    const std::string path = model_path("tiny-deepseek2");
    auto m = model::Model::load(path, {2, 64, 256});
    ThreadPool pool(2);
    runtime::Session s(*m, pool, {256, 1, DType::F32});
    const int64_t V = m->config().n_vocab;
    std::vector<int32_t> toks(150);
    uint32_t x = 99;
    for (auto& t : toks) t = static_cast<int32_t>((x = x * 1664525u + 1013904223u) >> 8) % static_cast<int32_t>(V);
    std::vector<float> got(toks.size() * static_cast<size_t>(V));
    s.eval(0, toks, got.data(), true);
    const auto ref = testref::reference_forward(gguf::File::open(path), toks);
    double worst = 0;
    for (size_t i = 0; i < toks.size(); i += 7) {
        const double e = testref::nmse(got.data() + i * V, ref.data() + i * V, static_cast<size_t>(V));
        worst = std::max(worst, e);
        EXPECT_LE(e, 1e-6) << "position " << i;
    }
    std::printf("[ tiny-deepseek2 ] worst NMSE vs fp64 reference, positions 0..149 (every 7th): %.3g\n", worst);
}

TEST(Mla, UnsupportedRopeScalingIsAnError) {
    const std::string bad = with_string_key(model_path("tiny-deepseek2"), "deepseek2.rope.scaling.type", "linear",
                                            "ds2-linear.gguf");
    try {
        model::Model::load(bad, {1, 4, 64});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("deepseek2.rope.scaling.type"), std::string::npos) << msg;
        EXPECT_NE(msg.find("linear"), std::string::npos) << msg;
    }
    const std::string bad2 = with_string_key(model_path("tiny-deepseek2"), "deepseek2.rope.scaling.type", "longrope",
                                             "ds2-longrope.gguf");
    EXPECT_THROW(model::Model::load(bad2, {1, 4, 64}), Error);
}
