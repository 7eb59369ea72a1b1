// Exact-match tests against llama.cpp's tokenizer vectors (tests/data/vocab/*.inp/.out).
// As in llama.cpp's test-tokenizer-0, the vectors are encoded without BOS/EOS (add_special false)
// and without parsing special tokens.
#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vectors_util.h"

using namespace moe::tokenizer;

namespace {

const std::string kVocabDir = MOE_TEST_DATA_DIR "/vocab/";

std::string ids_str(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
    return s;
}

struct Result {
    size_t total = 0, matched = 0, roundtrip = 0;
};

Result run_vectors(const std::string& name) {
    const std::string path = kVocabDir + name;
    const auto file = moe::gguf::File::open(path);
    const Tokenizer tok = Tokenizer::from_gguf(file);
    const auto cases = test::read_vocab_cases(path);
    EXPECT_EQ(cases.size(), 46u) << path;
    Result r;
    EncodeOptions no_special;
    no_special.add_bos = false;
    no_special.add_eos = false;
    for (const auto& c : cases) {
        ++r.total;
        const auto got = tok.encode(c.text, no_special);
        EXPECT_EQ(ids_str(got), ids_str(c.ids)) << name << ": input '" << test::escaped(c.text) << "'";
        if (got == c.ids) ++r.matched;
        // Lossless: every input is valid UTF-8 and these vocabs have byte fallback / byte-level BPE.
        const std::string back = tok.decode(got);
        EXPECT_EQ(back, c.text) << name << ": round trip of '" << test::escaped(c.text) << "'";
        if (back == c.text) ++r.roundtrip;
    }
    std::printf("%s: %zu/%zu vectors match exactly, %zu/%zu round-trip\n", name.c_str(), r.matched, r.total,
                r.roundtrip, r.total);
    return r;
}

}  // namespace

TEST(TokenizerVectors, Gpt2) {
    const Result r = run_vectors("ggml-vocab-gpt-2.gguf");
    EXPECT_EQ(r.matched, r.total);
    EXPECT_EQ(r.roundtrip, r.total);
}

TEST(TokenizerVectors, LlamaSpm) {
    const Result r = run_vectors("ggml-vocab-llama-spm.gguf");
    EXPECT_EQ(r.matched, r.total);
    EXPECT_EQ(r.roundtrip, r.total);
}

TEST(TokenizerVectors, VocabMetadata) {
    const auto spm = Tokenizer::from_gguf(moe::gguf::File::open(kVocabDir + "ggml-vocab-llama-spm.gguf"));
    EXPECT_EQ(spm.vocab().type, ModelType::Spm);
    EXPECT_EQ(spm.size(), 32000u);
    EXPECT_EQ(spm.vocab().bos_id, 1);
    EXPECT_EQ(spm.vocab().eos_id, 2);
    EXPECT_EQ(spm.vocab().unk_id, 0);
    EXPECT_TRUE(spm.vocab().add_bos);
    EXPECT_FALSE(spm.vocab().add_eos);
    EXPECT_TRUE(spm.vocab().add_space_prefix);
    EXPECT_EQ(spm.vocab().type_of(3), TokenType::Byte);

    const auto bpe = Tokenizer::from_gguf(moe::gguf::File::open(kVocabDir + "ggml-vocab-gpt-2.gguf"));
    EXPECT_EQ(bpe.vocab().type, ModelType::Bpe);
    EXPECT_EQ(bpe.vocab().pre, "gpt-2");
    EXPECT_EQ(bpe.size(), 50257u);
    EXPECT_EQ(bpe.vocab().merges.size(), 50000u);
    EXPECT_EQ(bpe.vocab().bos_id, 50256);
    EXPECT_EQ(bpe.vocab().eos_id, 50256);
    EXPECT_FALSE(bpe.vocab().add_bos);  // gpt2 default; the file has no add_bos_token key
    EXPECT_FALSE(bpe.vocab().add_space_prefix);
}

TEST(TokenizerVectors, BosAndSpecialOnRealVocabs) {
    const auto spm = Tokenizer::from_gguf(moe::gguf::File::open(kVocabDir + "ggml-vocab-llama-spm.gguf"));
    // "Hello world" -> ▁Hello ▁world (vector 11 of the file) with BOS 1 in front by default.
    EXPECT_EQ(spm.encode("Hello world"), (std::vector<int32_t>{1, 15043, 3186}));
    EXPECT_EQ(spm.decode(spm.encode("Hello world")), "Hello world");
    // "</s>" is plain text unless parse_special; then it is the EOS control token, and the text
    // after it gets the SPM space prefix.
    const auto plain = spm.encode("</s>", {false, false, false});
    EXPECT_GT(plain.size(), 1u);
    EXPECT_EQ(spm.encode("a</s>b", {false, false, true}),
              (std::vector<int32_t>{spm.encode("a", {false, false, false})[0], 2,
                                    spm.encode("b", {false, false, false})[0]}));
    EXPECT_EQ(spm.decode({2}), "");
    EXPECT_EQ(spm.decode({2}, {true, true}), "</s>");

    const auto bpe = Tokenizer::from_gguf(moe::gguf::File::open(kVocabDir + "ggml-vocab-gpt-2.gguf"));
    const auto as_text = bpe.encode("<|endoftext|>");
    EXPECT_GT(as_text.size(), 1u);
    for (int32_t id : as_text) EXPECT_NE(id, 50256);
    EXPECT_EQ(bpe.decode(as_text), "<|endoftext|>");
    EXPECT_EQ(bpe.encode("<|endoftext|>", {true, true, true}), (std::vector<int32_t>{50256}));
    EXPECT_EQ(bpe.encode("Hello world"), (std::vector<int32_t>{15496, 995}));
}

TEST(TokenizerVectors, StreamingMatchesDecodeOnVectors) {
    for (const char* name : {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf"}) {
        const auto tok = Tokenizer::from_gguf(moe::gguf::File::open(kVocabDir + name));
        for (const auto& c : test::read_vocab_cases(kVocabDir + name)) {
            Detokenizer d(tok);
            std::string streamed;
            for (int32_t id : c.ids) {
                const std::string part = d.push(id);
                EXPECT_TRUE(utf8::is_valid(part)) << name << " '" << test::escaped(c.text) << "'";
                streamed += part;
            }
            streamed += d.flush();
            EXPECT_EQ(streamed, tok.decode(c.ids));
        }
    }
}

TEST(TokenizerVectors, DecodeRejectsOutOfRangeIds) {
    const auto bpe = Tokenizer::from_gguf(moe::gguf::File::open(kVocabDir + "ggml-vocab-gpt-2.gguf"));
    try {
        bpe.decode({15496, 50257});
        FAIL() << "expected moe::Error";
    } catch (const moe::Error& e) {
        EXPECT_EQ(e.component(), "tokenizer");
        EXPECT_NE(std::string(e.what()).find("50257"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("50257 tokens"), std::string::npos) << e.what();
    }
    EXPECT_THROW(bpe.token_to_piece(-1), moe::Error);
}

TEST(TokenizerVectors, ConcurrentEncodeGivesTheSameIds) {
    // encode/decode are const and share the compiled regexes: several threads at once must agree.
    const auto tok = Tokenizer::from_gguf(moe::gguf::File::open(kVocabDir + "ggml-vocab-gpt-2.gguf"));
    const auto cases = test::read_vocab_cases(kVocabDir + "ggml-vocab-gpt-2.gguf");
    EncodeOptions opts;
    opts.add_bos = false;
    std::vector<int> bad(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int rep = 0; rep < 5; ++rep)
                for (const auto& c : cases)
                    if (tok.encode(c.text, opts) != c.ids || tok.decode(c.ids) != c.text) ++bad[t];
        });
    for (auto& th : threads) th.join();
    for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}
