// moe gen: every tiny preset in every dtype round-trips through the GGUF reader with the catalog's
// names/shapes/types and llama.cpp's metadata keys; reproducibility; Q8_0 error bound; router
// decisiveness; --layers; --vocab.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "closed_form_util.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "kernels/ref/quantize_q8_0.h"
#include "model/config.h"
#include "model/gen.h"
#include "model/param_count.h"
#include "model/presets.h"
#include "model/vocab_builtin.h"

using namespace moe;
using namespace moe::model;

namespace {

const char* kTiny[] = {"tiny-mixtral", "tiny-qwen2moe", "tiny-qwen3moe", "tiny-olmoe"};
const DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};

std::string tmp(const std::string& name) { return ::testing::TempDir() + "moe_gen_" + name + ".gguf"; }

GenResult gen(const std::string& preset, DType t, uint64_t seed, const std::string& out, int64_t layers = 0,
              const std::string& vocab = "") {
    GenSpec s;
    s.preset = preset;
    s.type = t;
    s.seed = seed;
    s.output = out;
    s.layers = layers;
    s.vocab_file = vocab;
    s.threads = 2;
    return generate(s);
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// Row `r` of a tensor as f32 (F32/F16/BF16/Q8_0).
std::vector<float> read_row(const gguf::File& f, const gguf::TensorInfo& t, int64_t r) {
    const TensorView v = f.view(t);
    const int64_t n = t.ne[0];
    std::vector<float> out(static_cast<size_t>(n));
    const auto* p = static_cast<const unsigned char*>(v.data) + static_cast<uint64_t>(r) * v.row_bytes();
    for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        switch (t.type) {
            case DType::F32: std::memcpy(&out[i], p + 4 * i, 4); break;
            case DType::F16: std::memcpy(&h, p + 2 * i, 2); out[i] = fp16_to_fp32(h); break;
            case DType::BF16: std::memcpy(&h, p + 2 * i, 2); out[i] = bf16_to_fp32(h); break;
            default: break;
        }
    }
    if (t.type == DType::Q8_0) ref::dequantize_row_q8_0(p, out.data(), n);
    return out;
}

}  // namespace

TEST(Gen, EveryTinyPresetAndTypeRoundTrips) {
    for (const char* preset : kTiny) {
        for (DType type : kTypes) {
            SCOPED_TRACE(std::string(preset) + " " + dtype_name(type));
            const std::string path = tmp(std::string(preset) + "_" + dtype_name(type));
            const GenResult r = gen(preset, type, 7, path);
            const gguf::File f = gguf::File::open(path);
            const ModelConfig& c = r.config;
            const auto cat = tensor_catalog(c);

            // Tensors: same names, order, shapes as the catalog; types by llama.cpp's rule.
            ASSERT_EQ(f.tensors().size(), cat.size());
            for (size_t i = 0; i < cat.size(); ++i) {
                const auto& t = f.tensors()[i];
                EXPECT_EQ(t.name, cat[i].name);
                EXPECT_EQ(std::vector<int64_t>(t.ne, t.ne + t.n_dims), cat[i].shape) << t.name;
                EXPECT_EQ(t.type, storage_type(t.name, cat[i].shape, type)) << t.name;
            }

            // Metadata keys, with the types llama.cpp reads them as.
            const std::string a = c.arch + ".";
            EXPECT_EQ(f.get_string("general.architecture"), c.arch);
            auto is = [&](const std::string& key, gguf::ValueType vt) {
                const gguf::Value* v = f.find(key);
                ASSERT_NE(v, nullptr) << key;
                EXPECT_EQ(v->type, vt) << key;
            };
            is("general.name", gguf::ValueType::STRING);
            is("general.file_type", gguf::ValueType::U32);
            EXPECT_EQ(f.get_uint("general.file_type"), file_type_of(type));
            if (type == DType::Q8_0) EXPECT_EQ(f.get_uint("general.quantization_version"), 2u);
            else EXPECT_EQ(f.find("general.quantization_version"), nullptr);
            for (const char* k : {"context_length", "embedding_length", "block_count", "feed_forward_length",
                                  "attention.head_count", "attention.head_count_kv", "expert_count", "expert_used_count",
                                  "rope.dimension_count"})
                is(a + k, gguf::ValueType::U32);
            is(a + "attention.layer_norm_rms_epsilon", gguf::ValueType::F32);
            is(a + "rope.freq_base", gguf::ValueType::F32);
            if (c.arch == kArchQwen3Moe) {
                is(a + "expert_feed_forward_length", gguf::ValueType::U32);
                is(a + "attention.key_length", gguf::ValueType::U32);  // head_dim 32 != 64/4
            }
            if (c.arch == kArchQwen2Moe) is(a + "expert_shared_feed_forward_length", gguf::ValueType::U32);
            is("tokenizer.ggml.model", gguf::ValueType::STRING);
            is("tokenizer.ggml.pre", gguf::ValueType::STRING);
            is("tokenizer.ggml.tokens", gguf::ValueType::ARRAY);
            is("tokenizer.ggml.token_type", gguf::ValueType::ARRAY);
            is("tokenizer.ggml.merges", gguf::ValueType::ARRAY);
            is("tokenizer.ggml.bos_token_id", gguf::ValueType::U32);
            EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens")->size(), static_cast<size_t>(c.n_vocab));

            // Config read back == config written; counts: file == catalog == closed form.
            const ModelConfig back = config_from_gguf(f);
            EXPECT_EQ(back.arch, c.arch);
            EXPECT_EQ(back.n_vocab, c.n_vocab);
            EXPECT_EQ(back.n_layer, c.n_layer);
            EXPECT_EQ(back.n_ff_exp, c.n_ff_exp);
            EXPECT_EQ(back.n_ff_shexp, c.n_ff_shexp);
            EXPECT_EQ(back.head_dim_k, c.head_dim_k);
            EXPECT_EQ(back.n_head_kv, c.n_head_kv);
            EXPECT_EQ(back.qk_norm, c.qk_norm);
            EXPECT_EQ(back.qkv_bias, c.qkv_bias);
            EXPECT_EQ(back.expert_weights_norm, c.expert_weights_norm);
            const ParamCounts from_file = count_params(describe_gguf(f), back);
            const ParamCounts from_cat = count_params(describe_catalog(cat, type), c);
            const ClosedForm cf = closed_form_counts(c);
            EXPECT_EQ(from_file.total, from_cat.total);
            EXPECT_EQ(from_file.active, from_cat.active);
            EXPECT_EQ(from_file.resident_bytes, from_cat.resident_bytes);
            EXPECT_EQ(from_file.total, cf.total);
            EXPECT_EQ(from_file.active, cf.active);
            EXPECT_EQ(r.n_params, cf.total);
            EXPECT_EQ(from_file.resident_bytes, r.data_bytes);
            std::remove(path.c_str());
        }
    }
}

TEST(Gen, SameSeedSameBytesDifferentSeedDifferent) {
    const std::string a = tmp("seed_a"), b = tmp("seed_b"), c = tmp("seed_c");
    gen("tiny-qwen2moe", DType::Q8_0, 42, a);
    gen("tiny-qwen2moe", DType::Q8_0, 42, b);
    gen("tiny-qwen2moe", DType::Q8_0, 43, c);
    const std::string A = slurp(a), B = slurp(b), C = slurp(c);
    EXPECT_FALSE(A.empty());
    EXPECT_EQ(A, B);
    EXPECT_EQ(A.size(), C.size());
    EXPECT_NE(A, C);
    // Thread count does not change the bytes.
    GenSpec s;
    s.preset = "tiny-qwen2moe";
    s.type = DType::Q8_0;
    s.seed = 42;
    s.output = b;
    s.threads = 1;
    generate(s);
    EXPECT_EQ(slurp(b), A);
    for (const auto& p : {a, b, c}) std::remove(p.c_str());
}

// Q8_0 vs F32 of the same seed: per block, |x - d q| <= d/2 (rounding to the nearest step) plus the
// fp16 rounding of d (relative error <= 2^-11, times |q| <= 127): bound = amax/127 * (0.5 + 127/2048).
TEST(Gen, Q8_0IsCloseToF32) {
    const std::string pf = tmp("q_f32"), pq = tmp("q_q8");
    gen("tiny-mixtral", DType::F32, 5, pf);
    gen("tiny-mixtral", DType::Q8_0, 5, pq);
    const gguf::File ff = gguf::File::open(pf), fq = gguf::File::open(pq);
    int checked = 0;
    for (const auto& tq : fq.tensors()) {
        if (tq.type != DType::Q8_0) continue;
        const gguf::TensorInfo* tf = ff.find_tensor(tq.name);
        ASSERT_NE(tf, nullptr);
        const int64_t nrows = tq.ne[1] * tq.ne[2] * tq.ne[3];
        for (int64_t r = 0; r < nrows; r += 7) {
            const auto x = read_row(ff, *tf, r), y = read_row(fq, tq, r);
            for (size_t b = 0; b < x.size(); b += 32) {
                float amax = 0;
                for (size_t j = b; j < b + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
                const float bound = amax / 127.0f * (0.5f + 127.0f / 2048.0f) * 1.0001f;
                for (size_t j = b; j < b + 32; ++j) ASSERT_LE(std::fabs(x[j] - y[j]), bound) << tq.name << " row " << r;
            }
            ++checked;
        }
    }
    EXPECT_GT(checked, 100);
    std::remove(pf.c_str());
    std::remove(pq.c_str());
}

// Router logits for unit-variance inputs have std kRouterScale (8); the expected gap between the two
// largest of 8 standard normals is ~0.57, so ~4.5 logits. Require a mean gap > 2 over 500 inputs.
TEST(Gen, RouterIsDecisive) {
    const std::string p = tmp("router");
    const GenResult r = gen("tiny-olmoe", DType::F32, 3, p);
    const gguf::File f = gguf::File::open(p);
    const gguf::TensorInfo* t = f.find_tensor("blk.1.ffn_gate_inp.weight");
    ASSERT_NE(t, nullptr);
    const int64_t D = t->ne[0], E = t->ne[1];
    Rng rng(99);
    double gap_sum = 0;
    const int kInputs = 500;
    for (int s = 0; s < kInputs; ++s) {
        std::vector<float> x(static_cast<size_t>(D));
        for (auto& v : x) v = rng.normal();
        std::vector<double> logits;
        for (int64_t e = 0; e < E; ++e) {
            const auto w = read_row(f, *t, e);
            double acc = 0;
            for (int64_t i = 0; i < D; ++i) acc += static_cast<double>(w[i]) * x[i];
            logits.push_back(acc);
        }
        std::sort(logits.rbegin(), logits.rend());
        gap_sum += logits[0] - logits[1];
    }
    EXPECT_GT(gap_sum / kInputs, 2.0);
    EXPECT_EQ(r.config.n_expert, 8);
    std::remove(p.c_str());
}

TEST(Gen, LayersOverride) {
    const std::string p = tmp("layers");
    gen("tiny-qwen3moe", DType::F16, 1, p, 1);
    const gguf::File f = gguf::File::open(p);
    EXPECT_EQ(f.get_uint("qwen3moe.block_count"), 1u);
    EXPECT_NE(f.find_tensor("blk.0.ffn_up_exps.weight"), nullptr);
    EXPECT_EQ(f.find_tensor("blk.1.ffn_up_exps.weight"), nullptr);
    EXPECT_EQ(config_from_gguf(f).n_layer, 1);
    std::remove(p.c_str());
    // Real-size preset, one block: shapes are the real ones (checked without writing weights).
    GenSpec s;
    s.preset = "mixtral-8x7b";
    s.layers = 1;
    const ModelConfig c = gen_config(s);
    EXPECT_EQ(c.n_layer, 1);
    EXPECT_EQ(c.n_vocab, 32000);
    s.layers = -1;
    EXPECT_THROW(gen_config(s), moe::Error);
}

TEST(Gen, VocabFromGpt2File) {
    const std::string vocab = std::string(MOE_TEST_DATA_DIR) + "/vocab/ggml-vocab-gpt-2.gguf";
    const gguf::File vf = gguf::File::open(vocab);
    const auto src_tokens = vf.get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(src_tokens);
    const std::string p = tmp("vocab");
    gen("tiny-mixtral", DType::Q8_0, 1, p, 0, vocab);
    const gguf::File f = gguf::File::open(p);
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens"), src_tokens);
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.merges"), vf.get_string_array("tokenizer.ggml.merges"));
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), vf.get_string("tokenizer.ggml.model"));
    EXPECT_EQ(f.find_tensor("token_embd.weight")->ne[1], static_cast<int64_t>(src_tokens->size()));
    EXPECT_EQ(config_from_gguf(f).n_vocab, static_cast<int64_t>(src_tokens->size()));
    std::remove(p.c_str());
}

TEST(Gen, BadSpecs) {
    GenSpec s;
    s.preset = "no-such-preset";
    s.output = tmp("bad");
    try {
        generate(s);
        ADD_FAILURE() << "no error";
    } catch (const moe::Error& e) {
        EXPECT_NE(std::string(e.what()).find("tiny-qwen3moe"), std::string::npos) << e.what();
    }
    s.preset = "tiny-olmoe";
    s.type = DType::Q4_K;
    EXPECT_THROW(generate(s), moe::Error);
    s.type = DType::F32;
    s.vocab_file = std::string(MOE_TEST_DATA_DIR) + "/configs/mixtral-8x7b-v0.1_config.json";
    EXPECT_THROW(generate(s), moe::Error);  // not a GGUF
}

// The catalog of a real llama.cpp-written file's config lists exactly that file's tensors.
TEST(Catalog, MatchesRealLlamaFile) {
    const gguf::File f = gguf::File::open(std::string(MOE_TEST_DATA_DIR) + "/models/llama-2-tiny-random.gguf");
    const ModelConfig c = config_from_gguf(f);
    EXPECT_EQ(c.arch, "llama");
    EXPECT_EQ(c.n_expert, 0);
    std::map<std::string, std::vector<int64_t>> want, got;
    for (const auto& t : tensor_catalog(c)) want[t.name] = t.shape;
    for (const auto& t : f.tensors()) got[t.name] = std::vector<int64_t>(t.ne, t.ne + t.n_dims);
    EXPECT_EQ(got, want);
    const ParamCounts pc = count_params(describe_gguf(f), c);
    EXPECT_EQ(pc.total, pc.active);
    EXPECT_EQ(pc.total, count_params(describe_catalog(tensor_catalog(c), DType::F16), c).total);
    // Its tensors are stored the way storage_type() says for f16 weights.
    for (const auto& t : f.tensors())
        EXPECT_EQ(t.type, storage_type(t.name, std::vector<int64_t>(t.ne, t.ne + t.n_dims), DType::F16)) << t.name;
}

// Hostile GGUF metadata: config_from_gguf names the file and the key.
TEST(ConfigFromGguf, ErrorsNameTheKey) {
    auto write = [](const std::string& path, const std::function<void(gguf::Writer&)>& fill) {
        gguf::Writer w(path);
        fill(w);
        w.write_header();
        w.finish();
    };
    auto error_of = [](const std::string& path) -> std::string {
        try {
            config_from_gguf(gguf::File::open(path));
        } catch (const moe::Error& e) {
            return e.what();
        }
        return "";
    };
    const std::string p = tmp("hostile");
    write(p, [](gguf::Writer& w) { w.set_string("general.architecture", "bert"); });
    std::string e = error_of(p);
    EXPECT_NE(e.find("unsupported architecture 'bert'"), std::string::npos) << e;
    EXPECT_NE(e.find("qwen3moe"), std::string::npos) << e;

    write(p, [](gguf::Writer& w) {
        w.set_string("general.architecture", "qwen3moe");
        w.set_u32("qwen3moe.context_length", 128);
        w.set_u32("qwen3moe.embedding_length", 64);
    });
    e = error_of(p);
    EXPECT_NE(e.find("'qwen3moe.block_count' is missing"), std::string::npos) << e;
    EXPECT_NE(e.find(p), std::string::npos) << e;

    write(p, [](gguf::Writer& w) {
        w.set_string("general.architecture", "olmoe");
        w.set_u32("olmoe.context_length", 128);
        w.set_u32("olmoe.embedding_length", 64);
        w.set_u32("olmoe.block_count", 2);
        w.set_u32("olmoe.attention.head_count", 4);
        w.set_f32("olmoe.attention.layer_norm_rms_epsilon", 1e-5f);
        w.set_u32("olmoe.feed_forward_length", 32);
        w.set_u32("olmoe.expert_count", 8);
        w.set_u32("olmoe.expert_used_count", 9);  // k > E
        w.set_u32("olmoe.vocab_size", 100);
    });
    e = error_of(p);
    EXPECT_NE(e.find("n_expert_used"), std::string::npos) << e;
    std::remove(p.c_str());
}

TEST(BuiltinVocab, ValidByteLevelBpe) {
    EXPECT_EQ(builtin_vocab_size(), 320);
    const VocabData v = builtin_vocab(320);
    ASSERT_EQ(v.tokens.size(), 320u);
    EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");  // U+0120 'Ġ'
    EXPECT_EQ(byte_to_unicode('\n'), "\xC4\x8A");  // U+010A 'Ċ'
    EXPECT_EQ(byte_to_unicode('a'), "a");
    EXPECT_EQ(byte_to_unicode(0xAD), "\xC5\x83");  // soft hyphen is the 68th remapped byte: U+0143
    std::set<std::string> uniq(v.tokens.begin(), v.tokens.end());
    EXPECT_EQ(uniq.size(), v.tokens.size());
    for (const auto& m : v.merges) {
        const size_t sp = m.find(' ');
        ASSERT_NE(sp, std::string::npos);
        EXPECT_TRUE(uniq.count(m.substr(0, sp)) && uniq.count(m.substr(sp + 1)) && uniq.count(m.substr(0, sp) + m.substr(sp + 1)))
            << m;
    }
    EXPECT_EQ(v.tokens[v.bos], "<s>");
    EXPECT_EQ(v.token_types[v.eos], 3);
    const VocabData big = builtin_vocab(1000);
    EXPECT_EQ(big.tokens.size(), 1000u);
    EXPECT_EQ(big.token_types.back(), 5);
    EXPECT_THROW(builtin_vocab(100), moe::Error);
}

// Bit-exact Q8_0 (ggml's reference algorithm): x_j = (j - 16) / 4 -> amax 4, d = 4/127 stored as
// fp16 0x2808 (2^-5 * (1 + 8/1024)); q_j = round-half-away(x_j * (1/d)) with 1/d taken in f32 from
// the unrounded d, i.e. ~(j - 16) * 7.9375 (j = 8, 24 sit at +-63.5 and round away from zero when
// 1/d rounds up, as it does for f32 4/127).
TEST(QuantizeQ8_0, BitExact) {
    float x[32];
    for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) / 4.0f;
    unsigned char out[34];
    ref::quantize_row_q8_0(x, out, 32);
    uint16_t d;
    std::memcpy(&d, out, 2);
    EXPECT_EQ(d, 0x2808);
    const float id = 1.0f / (4.0f / 127.0f);
    for (int j = 0; j < 32; ++j) {
        const double v = static_cast<double>(x[j] * id);
        const int expect = static_cast<int>(v < 0 ? -std::floor(-v + 0.5) : std::floor(v + 0.5));
        EXPECT_EQ(static_cast<int8_t>(out[2 + j]), expect) << j;
        EXPECT_NEAR(expect, (j - 16) * 7.9375, 0.5 + 1e-4) << j;
    }
    EXPECT_EQ(static_cast<int8_t>(out[2]), -127);  // x = -4 = -amax
    float y[32];
    ref::dequantize_row_q8_0(out, y, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], fp16_to_fp32(0x2808) * static_cast<int8_t>(out[2 + j]));
    // All-zero block: d = 0, q = 0.
    float z[32] = {};
    ref::quantize_row_q8_0(z, out, 32);
    for (unsigned char b : out) EXPECT_EQ(b, 0);
}
