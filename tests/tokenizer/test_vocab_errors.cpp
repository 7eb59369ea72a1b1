// Bad vocabularies: small vocab-only GGUFs written with moe::gguf::Writer into a temp dir. Each
// must fail with a moe::Error from the "tokenizer" component that names the offending key, never
// crash. A well-formed file of the same shape is the positive control.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <optional>

#include "core/error.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "tokenizer/tokenizer.h"

using namespace moe::tokenizer;
namespace fs = std::filesystem;

namespace {

// A valid SPM vocab; `edit` may change or drop keys before the file is written.
struct Keys {
    std::string model = "llama";
    std::optional<std::string> pre;
    std::optional<std::vector<std::string>> tokens = std::vector<std::string>{"<unk>", "<s>", "</s>", "\xE2\x96\x81" "a", "a"};
    std::optional<std::vector<float>> scores = std::vector<float>{0, 0, 0, -1, -2};
    std::optional<std::vector<int32_t>> types = std::vector<int32_t>{2, 3, 3, 1, 1};
    std::optional<std::vector<std::string>> merges;
    std::optional<uint32_t> bos = 1, eos = 2;
    bool write_model = true;
};

class VocabErrors : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("moe_tok_test_" + std::to_string(::getpid()));
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::string write(const std::string& name, const Keys& k) {
        const std::string path = (dir_ / name).string();
        moe::gguf::Writer w(path);
        w.set_string("general.architecture", "llama");
        if (k.write_model) w.set_string("tokenizer.ggml.model", k.model);
        if (k.pre) w.set_string("tokenizer.ggml.pre", *k.pre);
        if (k.tokens) w.set_string_array("tokenizer.ggml.tokens", *k.tokens);
        if (k.scores) w.set_f32_array("tokenizer.ggml.scores", *k.scores);
        if (k.types) w.set_i32_array("tokenizer.ggml.token_type", *k.types);
        if (k.merges) w.set_string_array("tokenizer.ggml.merges", *k.merges);
        if (k.bos) w.set_u32("tokenizer.ggml.bos_token_id", *k.bos);
        if (k.eos) w.set_u32("tokenizer.ggml.eos_token_id", *k.eos);
        w.write_header();
        w.finish();
        return path;
    }

    // Loads `k` and expects a "[tokenizer]" error whose text contains every needle.
    void expect_error(const std::string& name, const Keys& k, std::vector<std::string> needles) {
        const std::string path = write(name, k);
        try {
            const auto f = moe::gguf::File::open(path);
            Tokenizer t = Tokenizer::from_gguf(f);
            ADD_FAILURE() << name << ": loaded without error";
        } catch (const moe::Error& e) {
            EXPECT_EQ(e.component(), "tokenizer") << e.what();
            for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
        }
    }

    fs::path dir_;
};

Keys bpe_keys() {
    Keys k;
    k.model = "gpt2";
    k.pre = "gpt-2";
    k.tokens = std::vector<std::string>{"a", "b", "ab", "<|endoftext|>"};
    k.scores.reset();
    k.types = std::vector<int32_t>{1, 1, 1, 3};
    k.merges = std::vector<std::string>{"a b"};
    k.bos = 3;
    k.eos = 3;
    return k;
}

}  // namespace

TEST_F(VocabErrors, WellFormedFilesLoad) {
    const auto spm = Tokenizer::from_gguf(moe::gguf::File::open(write("ok_spm.gguf", Keys{})));
    EXPECT_EQ(spm.encode("a"), (std::vector<int32_t>{1, 3}));
    const auto bpe = Tokenizer::from_gguf(moe::gguf::File::open(write("ok_bpe.gguf", bpe_keys())));
    EXPECT_EQ(bpe.encode("ab"), (std::vector<int32_t>{2}));
    EXPECT_EQ(bpe.decode({2, 3}), "ab");
}

TEST_F(VocabErrors, MissingTokens) {
    Keys k;
    k.tokens.reset();
    expect_error("no_tokens.gguf", k, {"tokenizer.ggml.tokens", "missing"});
}

TEST_F(VocabErrors, MissingModel) {
    Keys k;
    k.write_model = false;
    expect_error("no_model.gguf", k, {"tokenizer.ggml.model", "missing", "llama", "gpt2"});
}

TEST_F(VocabErrors, ScoresLengthMismatch) {
    Keys k;
    k.scores = std::vector<float>{0, 0, 0};
    expect_error("scores_len.gguf", k, {"tokenizer.ggml.scores", "3", "5"});
}

TEST_F(VocabErrors, TokenTypeLengthMismatchAndBadValue) {
    Keys k;
    k.types = std::vector<int32_t>{1, 1};
    expect_error("types_len.gguf", k, {"tokenizer.ggml.token_type", "2", "5"});
    k.types = std::vector<int32_t>{1, 1, 1, 9, 1};
    expect_error("types_val.gguf", k, {"tokenizer.ggml.token_type[3]", "9"});
}

TEST_F(VocabErrors, SpmWithoutScores) {
    Keys k;
    k.scores.reset();
    expect_error("spm_no_scores.gguf", k, {"tokenizer.ggml.scores", "missing"});
}

TEST_F(VocabErrors, UnknownModelType) {
    Keys k;
    k.model = "wordpiece-xl";
    expect_error("model.gguf", k, {"tokenizer.ggml.model", "wordpiece-xl", "'llama'", "'gpt2'"});
}

TEST_F(VocabErrors, UnknownPreTokenizer) {
    Keys k = bpe_keys();
    k.pre = "gpt-5-imaginary";
    expect_error("pre.gguf", k, {"tokenizer.ggml.pre", "gpt-5-imaginary", "olmo", "deepseek-v3", "gpt-2", "llama3", "qwen2"});
}

TEST_F(VocabErrors, MergesMalformed) {
    for (const std::string bad : {"ab", "a b c", "a ", " ab"}) {
        Keys k = bpe_keys();
        k.merges = std::vector<std::string>{"a b", bad};
        expect_error("merges.gguf", k, {"tokenizer.ggml.merges[1]", "malformed"});
    }
    Keys k = bpe_keys();
    k.merges.reset();
    expect_error("no_merges.gguf", k, {"tokenizer.ggml.merges", "missing"});
}

TEST_F(VocabErrors, SpecialIdOutOfRange) {
    Keys k;
    k.eos = 5;
    expect_error("eos.gguf", k, {"tokenizer.ggml.eos_token_id", "5", "5 tokens"});
}

TEST_F(VocabErrors, DuplicateToken) {
    Keys k;
    k.tokens = std::vector<std::string>{"<unk>", "<s>", "</s>", "a", "a"};
    expect_error("dup.gguf", k, {"tokenizer.ggml.tokens", "twice", "3", "4"});
}

TEST_F(VocabErrors, WrongValueTypeIsAnError) {
    // The GGUF reader already checks the types of known tokenizer keys; either layer may report
    // it, but it must be a moe::Error naming the key.
    const std::string path = (dir_ / "type.gguf").string();
    {
        moe::gguf::Writer w(path);
        w.set_string("general.architecture", "llama");
        w.set_string("tokenizer.ggml.model", "llama");
        w.set_i32_array("tokenizer.ggml.tokens", {1, 2, 3});
        w.write_header();
        w.finish();
    }
    try {
        const auto f = moe::gguf::File::open(path);
        Tokenizer t = Tokenizer::from_gguf(f);
        FAIL() << "loaded a vocab whose tokens are integers";
    } catch (const moe::Error& e) {
        EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.tokens"), std::string::npos) << e.what();
    }
}
