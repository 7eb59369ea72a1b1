// The BPE learner: the engine's tokenizer (and so llama.cpp, which reads the same keys) encodes every
// piece of the training text exactly as the learner segmented it; decode(encode(s)) == s on text it
// never saw; the vocabulary has the asked size and survives a GGUF round trip.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "core/rng.h"
#include "tokenizer/tokenizer.h"
#include "train/bpe_learn.h"

using namespace moe;

namespace {
std::string shakespeare(size_t bytes) {
    std::ifstream in(MOE_TEST_DATA_DIR "/text/tinyshakespeare.txt", std::ios::binary);
    EXPECT_TRUE(in) << "missing " MOE_TEST_DATA_DIR "/text/tinyshakespeare.txt";
    std::string s(std::istreambuf_iterator<char>(in), {});
    return s.substr(0, bytes);
}
}  // namespace

TEST(TrainBpe, EngineEncodeReproducesLearnerSegmentation) {
    const std::string text = shakespeare(60000);
    const train::BpeLearned b = train::learn_bpe(text, 400);
    ASSERT_EQ(b.tokens.size(), 400u);
    EXPECT_EQ(b.tokens[static_cast<size_t>(b.eos)], "<|endoftext|>");
    EXPECT_GE(b.merges.size(), 400u - 257u);
    const tokenizer::Tokenizer tok(train::to_vocab(b));
    tokenizer::EncodeOptions eo;
    eo.add_bos = eo.add_eos = false;
    ASSERT_GT(b.pieces.size(), 1000u);
    size_t multi = 0;
    for (const auto& [piece, seg] : b.pieces) {
        ASSERT_EQ(tok.encode(piece, eo), seg) << "piece '" << piece << "'";
        multi += seg.size() < piece.size();
    }
    EXPECT_GT(multi, b.pieces.size() / 2) << "merges should shorten most pieces";
    // Whole text: fewer tokens than bytes, exact round trip.
    const auto ids = tok.encode(text, eo);
    EXPECT_LT(ids.size() * 3, text.size() * 2);  // > 1.5 bytes per token
    EXPECT_EQ(tok.decode(ids), text);
}

TEST(TrainBpe, RoundTripsUnseenTextAndBytes) {
    const train::BpeLearned b = train::learn_bpe(shakespeare(30000), 300);
    const tokenizer::Tokenizer tok(train::to_vocab(b));
    tokenizer::EncodeOptions eo;
    eo.add_bos = eo.add_eos = false;
    Rng r(5);
    for (int i = 0; i < 20; ++i) {
        std::string s;
        const int n = 1 + static_cast<int>(r.below(200));
        for (int j = 0; j < n; ++j) s.push_back(static_cast<char>(r.below(2) ? 'a' + r.below(26) : 32 + r.below(95)));
        EXPECT_EQ(tok.decode(tok.encode(s, eo)), s);
    }
    const std::string utf8 = "Zoë says “hello” — 世界\n\t\n";
    EXPECT_EQ(tok.decode(tok.encode(utf8, eo)), utf8);
}

TEST(TrainBpe, DeterministicAndRejectsBadSizes) {
    const std::string text = shakespeare(20000);
    const auto a = train::learn_bpe(text, 300), b = train::learn_bpe(text, 300);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.merges, b.merges);
    EXPECT_THROW(train::learn_bpe(text, 100), Error);
    EXPECT_THROW(train::learn_bpe("", 300), Error);
    try {
        train::learn_bpe(text, 256);
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("[train] --vocab-size"), std::string::npos) << e.what();
    }
}
