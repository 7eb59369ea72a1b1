// Reading real third-party GGUF files (written by llama.cpp's converters) and the mmap path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "format/gguf.h"

namespace {

using moe::gguf::File;
using moe::gguf::ValueType;

const std::string kTiny = MOE_TEST_DATA_DIR "/models/llama-2-tiny-random.gguf";
const std::string kGpt2Vocab = MOE_TEST_DATA_DIR "/vocab/ggml-vocab-gpt-2.gguf";
const std::string kSpmVocab = MOE_TEST_DATA_DIR "/vocab/ggml-vocab-llama-spm.gguf";

TEST(GgufRead, TinyLlamaHeaderAndMetadata) {
    const File f = File::open(kTiny);
    EXPECT_EQ(f.path(), kTiny);
    EXPECT_TRUE(f.version() == 2 || f.version() == 3);
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.get_uint("llama.block_count"), 1u);
    EXPECT_EQ(f.get_uint("llama.embedding_length"), 8u);
    EXPECT_GT(*f.get_float("llama.attention.layer_norm_rms_epsilon"), 0.0);
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens);
    EXPECT_EQ(tokens->size(), 32000u);
    EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores")->size(), 32000u);
    EXPECT_EQ(f.get_i32_array("tokenizer.ggml.token_type")->size(), 32000u);
    EXPECT_EQ(f.find("no.such.key"), nullptr);
    EXPECT_FALSE(f.get_uint("no.such.key"));
    // Typed getters refuse an incompatible type and name the key.
    try {
        (void)f.get_uint("general.architecture");
        FAIL() << "expected moe::Error";
    } catch (const moe::Error& e) {
        EXPECT_NE(std::string(e.what()).find("'general.architecture' has type string"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)f.get_string_array("tokenizer.ggml.scores"), moe::Error);
}

TEST(GgufRead, TinyLlamaTensors) {
    const File f = File::open(kTiny);
    const auto* emb = f.find_tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->type, moe::DType::F16);
    EXPECT_EQ(emb->n_dims, 2);
    EXPECT_EQ(emb->ne[0], 8);
    EXPECT_EQ(emb->ne[1], 32000);
    EXPECT_EQ(emb->nbytes, 8u * 32000u * 2u);
    EXPECT_EQ(f.data_offset() % f.alignment(), 0u);
    uint64_t total = 0;
    for (const auto& t : f.tensors()) {
        EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
        EXPECT_LE(f.data_offset() + t.offset + t.nbytes, f.file_size()) << t.name;
        total += t.nbytes;
    }
    EXPECT_GT(total, 0u);
    // The view points into the mapping and has ggml strides; values are finite random weights.
    const moe::TensorView v = f.view(*emb);
    EXPECT_EQ(v.nb[1], 16u);
    EXPECT_EQ(v.nbytes(), emb->nbytes);
    const auto* h = v.as<const uint16_t>();
    bool any_nonzero = false;
    for (int k = 0; k < 8 * 32000; ++k) {
        const float x = moe::fp16_to_fp32(h[k]);
        ASSERT_TRUE(std::isfinite(x));
        any_nonzero |= x != 0.0f;
    }
    EXPECT_TRUE(any_nonzero);
    EXPECT_NE(f.find_tensor("output_norm.weight"), nullptr);
}

void check_vocab(const File& f, const std::string& model, bool merges) {
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), model);
    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens);
    EXPECT_GT(tokens->size(), 1000u);
    if (const auto scores = f.get_f32_array("tokenizer.ggml.scores")) {
        EXPECT_EQ(scores->size(), tokens->size());
    }
    const auto types = f.get_i32_array("tokenizer.ggml.token_type");
    ASSERT_TRUE(types);
    EXPECT_EQ(types->size(), tokens->size());
    for (int32_t t : *types) EXPECT_TRUE(t >= 1 && t <= 6) << t;
    const auto m = f.get_string_array("tokenizer.ggml.merges");
    EXPECT_EQ(m.has_value(), merges);
    if (merges) {
        EXPECT_GT(m->size(), 1000u);
        EXPECT_NE((*m)[0].find(' '), std::string::npos) << (*m)[0];
    }
    EXPECT_TRUE(f.tensors().empty());
}

TEST(GgufRead, Gpt2Vocab) {
    const File f = File::open(kGpt2Vocab);
    check_vocab(f, "gpt2", true);
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens")->size(), 50257u);
}

TEST(GgufRead, LlamaSpmVocab) {
    const File f = File::open(kSpmVocab);
    check_vocab(f, "llama", false);
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens")->size(), 32000u);
    EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores")->size(), 32000u);
}

TEST(GgufRead, ValueToString) {
    const File f = File::open(kTiny);
    EXPECT_EQ(f.find("general.architecture")->to_string(), "\"llama\"");
    const std::string toks = f.find("tokenizer.ggml.tokens")->to_string(2);
    EXPECT_NE(toks.find("(32000 elements)"), std::string::npos) << toks;
    EXPECT_EQ(f.find("tokenizer.ggml.tokens")->type_string(), "array[string]");
}

}  // namespace
