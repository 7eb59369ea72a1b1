// deepseek2 (MLA) specifics on the tiny presets (the shared forward tests in test_forward.cpp run
// them against the fp64 reference, prefill vs decode, interleaved sequences, f16 KV, stored types):
//  - the KV cache holds only the latent and the rope key per token and layer (no V buffer);
//  - YaRN's attention scale: mscale^2 / sqrt(nope + rope) from the file's yarn_log_multiplier;
//  - positions past YaRN's original context agree with the fp64 reference;
//  - variants the forward pass does not run are one clear error naming the key and value;
//  - a latent of 256 with attn_kv_b in Q4_K and Q6_K (V2-Lite's Q4_K_M types), and again in Q8_0
//    and Q5_K (Q8_0 / Q5_K_M files): head_fused::supported, so decode runs its single wave over
//    chunks of heads with the rows decoded in registers (checked where the CPU has AVX-512);
//    decode equals prefill bit for bit and stays close to the fp64 reference.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "common/temp_dir.h"
#include "core/thread_pool.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "kernels/cpu/dense_isa.h"
#include "kernels/cpu/head_rows.h"
#include "kernels/ref/quant_formats.h"
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

// tiny-deepseek2 with kv_lora_rank 256 and 8 heads (two chunks of kAttentionHeadsPerItem in decode's
// wave): the kv_a, kv_b, q and output tensors made anew (random), attn_kv_b in kv_b[i] in block i
// (3 blocks); every other tensor copied.
std::string wide_latent_model(const DType (&kv_b)[3], const std::string& name) {
    const fs::path p = temp_dir() / name;
    if (fs::exists(p)) return p.string();
    const auto in = gguf::File::open(model_path("tiny-deepseek2"));
    const int64_t r = 256, H = 8, old_H = 4;
    gguf::Writer w(p.string(), in.alignment());
    const std::string a = "deepseek2.attention.";
    for (const auto& kv : in.metadata())
        if (kv.key != a + "kv_lora_rank" && kv.key != a + "head_count" && kv.key != a + "head_count_kv" &&
            kv.key != a + "key_length" && kv.key != a + "value_length")
            w.set(kv.key, kv.value);
    w.set_u32(a + "kv_lora_rank", static_cast<uint32_t>(r));
    w.set_u32(a + "head_count", static_cast<uint32_t>(H));
    w.set_u32(a + "head_count_kv", static_cast<uint32_t>(H));
    w.set_u32(a + "key_length", 32);    // nope 16 + rope 16
    w.set_u32(a + "value_length", 16);  // no longer n_embd / H
    struct Out {
        const gguf::TensorInfo* t;
        std::vector<int64_t> ne;
        DType type;
    };
    std::vector<Out> outs;
    auto has = [](const gguf::TensorInfo& t, const char* s) { return t.name.find(s) != std::string::npos; };
    for (const auto& t : in.tensors()) {
        Out o{&t, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.type};
        if (has(t, "attn_kv_a_mqa")) o.ne[1] = r + (t.ne[1] - 32);  // (c, k_pe)
        if (has(t, "attn_kv_a_norm")) o.ne[0] = r;
        if (has(t, "attn_q.")) o.ne[1] = t.ne[1] / old_H * H;
        if (has(t, "attn_output")) o.ne[0] = t.ne[0] / old_H * H;
        if (has(t, "attn_kv_b")) {
            o.ne[0] = r;
            o.ne[1] = t.ne[1] / old_H * H;
            const size_t dot = t.name.find('.', 4);
            o.type = kv_b[std::stoi(t.name.substr(4, dot - 4))];
        }
        outs.push_back(o);
        w.add_tensor(t.name, o.type, o.ne);
    }
    w.write_header();
    Rng rng(256);
    for (const Out& o : outs) {
        const gguf::TensorInfo& t = *o.t;
        if (o.ne == std::vector<int64_t>(t.ne, t.ne + t.n_dims) && o.type == t.type) {
            w.write_data(in.view(t).data, t.nbytes);
            continue;
        }
        const int64_t K = o.ne[0], rows = o.ne.size() > 1 ? o.ne[1] : 1;
        const bool norm = o.ne.size() == 1;
        std::vector<float> x(static_cast<size_t>(K));
        std::vector<uint8_t> row(row_bytes(o.type, static_cast<uint64_t>(K)));
        for (int64_t i = 0; i < rows; ++i) {
            for (auto& v : x) v = norm ? rng.uniform(0.8f, 1.2f) : rng.uniform(-1.0f, 1.0f) / std::sqrt(static_cast<float>(K));
            EXPECT_TRUE(ref::quantize_row(o.type, x.data(), row.data(), K));
            w.write_data(row.data(), row.size());
        }
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

namespace {

// Decode (one token at a time) equals prefill bit for bit on the latent-256 model with kv_b in
// kv_b[i] in block i, and prefill stays close to the fp64 reference. Where the CPU has AVX-512
// every layer's k_b and v_b take the fused one-wave decode (attention_mla's condition).
void latent256_decode_equals_prefill(const DType (&kv_b)[3], const std::string& name) {
    const std::string path = wide_latent_model(kv_b, name);
    auto a = model::Model::load(path, {2, 64, 64}), b = model::Model::load(path, {2, 64, 64});
    ASSERT_EQ(a->config().kv_lora_rank, 256);
    ASSERT_EQ(a->config().n_head, 8);
    const kernels::Isa isa = a->kernels().isa();
    const bool wave = isa == kernels::Isa::Avx512 && cpu::dense_use_avx512(isa);
    for (int il = 0; il < 3; ++il) {
        const auto& l = a->weights().layers[static_cast<size_t>(il)];
        ASSERT_EQ(l.k_b.type, kv_b[il]);
        ASSERT_EQ(l.v_b.type, kv_b[il]);
        EXPECT_EQ(cpu::head_rows_decode_supported(l.k_b, isa), wave) << "layer " << il;
        EXPECT_EQ(cpu::head_rows_decode_supported(l.v_b, isa), wave) << "layer " << il;
    }
    ThreadPool pool(2);
    runtime::Session sa(*a, pool, {64, 1, DType::F32}), sb(*b, pool, {64, 1, DType::F32});
    const int64_t V = a->config().n_vocab;
    std::vector<int32_t> toks(40);
    uint32_t x = 7;
    for (auto& t : toks) t = static_cast<int32_t>((x = x * 1664525u + 1013904223u) >> 8) % static_cast<int32_t>(V);
    std::vector<float> all(toks.size() * static_cast<size_t>(V)), one(static_cast<size_t>(V));
    sa.eval(0, toks, all.data(), true);
    for (size_t i = 0; i < toks.size(); ++i) {
        sb.eval(0, {toks[i]}, one.data(), false);
        ASSERT_EQ(0, std::memcmp(one.data(), all.data() + i * V, sizeof(float) * V)) << "token " << i;
    }
    const auto ref = testref::reference_forward(gguf::File::open(path), toks);
    double worst = 0;
    for (size_t i = 0; i < toks.size(); ++i)
        worst = std::max(worst, testref::nmse(all.data() + i * V, ref.data() + i * V, static_cast<size_t>(V)));
    EXPECT_LE(worst, 1e-6);
    std::printf("[ tiny-deepseek2, latent 256, %s / %s / %s kv_b, %s decode ] worst NMSE vs fp64 reference: %.3g\n",
                dtype_name(kv_b[0]), dtype_name(kv_b[1]), dtype_name(kv_b[2]), wave ? "one-wave fused" : "buffered", worst);
}

}  // namespace

TEST(Mla, QuantizedLatent256DecodeEqualsPrefill) {
    latent256_decode_equals_prefill({DType::Q4_K, DType::Q4_K, DType::Q6_K}, "tiny-deepseek2-latent256.gguf");
}

// Q8_0 and Q5_K kv_b (Q8_0 and Q5_K_M files), each in both forms (k_b columns, v_b rows).
TEST(Mla, QuantizedLatent256Q8Q5KDecodeEqualsPrefill) {
    latent256_decode_equals_prefill({DType::Q8_0, DType::Q5_K, DType::Q8_0}, "tiny-deepseek2-latent256-q8-q5k.gguf");
}
