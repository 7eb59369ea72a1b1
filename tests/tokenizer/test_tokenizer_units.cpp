// Unit tests on small hand-built vocabularies (no files): SPM merging order, byte fallback,
// unknown token, special-token policy, BOS/EOS flags, byte-level BPE merge ranks, streaming
// detokenization of characters split across byte tokens, and Vocab validation.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

using namespace moe::tokenizer;

namespace {

using Ids = std::vector<int32_t>;

const std::string kSp = "\xE2\x96\x81";  // ▁

struct SpmBuilder {
    Vocab v;
    SpmBuilder() {
        v.model = "llama";
        v.type = ModelType::Spm;
        add("<unk>", 0, TokenType::Unknown);
        add("<s>", 0, TokenType::Control);
        add("</s>", 0, TokenType::Control);
        v.unk_id = 0;
        v.bos_id = 1;
        v.eos_id = 2;
        v.add_bos = true;
        v.add_space_prefix = true;
    }
    int32_t add(const std::string& t, float score, TokenType type = TokenType::Normal) {
        v.tokens.push_back(t);
        v.scores.push_back(score);
        v.types.push_back(type);
        return static_cast<int32_t>(v.tokens.size() - 1);
    }
    int32_t id(const std::string& t) const {  // linear search: token_to_id is built by finalize()
        for (size_t i = 0; i < v.tokens.size(); ++i)
            if (v.tokens[i] == t) return static_cast<int32_t>(i);
        return kNoToken;
    }
    int32_t byte(unsigned char b) const {
        static const char* hex = "0123456789ABCDEF";
        return id(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
    }
    void add_bytes() {
        static const char* hex = "0123456789ABCDEF";
        for (int b = 0; b < 256; ++b) add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0, TokenType::Byte);
    }
};

EncodeOptions plain() {
    EncodeOptions o;
    o.add_bos = false;
    o.add_eos = false;
    return o;
}

EncodeOptions special() {
    EncodeOptions o = plain();
    o.parse_special = true;
    return o;
}

}  // namespace

TEST(Spm, HighestScoreMergesFirst) {
    for (bool yz_better : {true, false}) {
        SpmBuilder b;
        b.v.add_space_prefix = false;
        const int32_t x = b.add("x", -10), y = b.add("y", -10), z = b.add("z", -10);
        const int32_t xy = b.add("xy", yz_better ? -2.0f : -1.0f);
        const int32_t yz = b.add("yz", yz_better ? -1.0f : -2.0f);
        Tokenizer tok(b.v);
        if (yz_better) EXPECT_EQ(tok.encode("xyz", plain()), (Ids{x, yz}));
        else EXPECT_EQ(tok.encode("xyz", plain()), (Ids{xy, z}));
        (void)y;
    }
}

TEST(Spm, EqualScoresMergeLeftmostFirst) {
    SpmBuilder b;
    b.v.add_space_prefix = false;
    b.add("x", -10);
    b.add("y", -10);
    const int32_t z = b.add("z", -10);
    const int32_t xy = b.add("xy", -1);
    b.add("yz", -1);
    Tokenizer tok(b.v);
    EXPECT_EQ(tok.encode("xyz", plain()), (Ids{xy, z}));
}

TEST(Spm, SpacePrefixAndSpaceMarker) {
    SpmBuilder b;
    const int32_t sp = b.add(kSp, -3);
    const int32_t a = b.add("a", -5);
    const int32_t spa = b.add(kSp + "a", -1);
    b.add_bytes();
    Tokenizer tok(b.v);
    EXPECT_EQ(tok.encode("a", plain()), (Ids{spa}));
    EXPECT_EQ(tok.encode("a a", plain()), (Ids{spa, spa}));
    EXPECT_EQ(tok.encode(" a", plain()), (Ids{sp, spa}));
    EXPECT_EQ(tok.encode("", plain()), Ids{});
    EXPECT_EQ(tok.encode(""), (Ids{1}));  // BOS only (add_bos true)
    EXPECT_EQ(tok.decode({spa, spa}), "a a");
    EXPECT_EQ(tok.decode({sp, spa}), " a");
    EXPECT_EQ(tok.decode({1, spa}), "a");  // BOS renders as nothing; leading space still stripped
    b.v.add_space_prefix = false;
    Tokenizer no_prefix(b.v);
    EXPECT_EQ(no_prefix.encode("a", plain()), (Ids{a}));
    EXPECT_EQ(no_prefix.decode({spa}), " a");  // nothing to strip when no prefix is added
}

TEST(Spm, ByteFallback) {
    SpmBuilder b;
    b.add(kSp, -1);
    b.add_bytes();
    Tokenizer tok(b.v);
    // "é" = C3 A9 is not a token: encoded as its two byte tokens after "▁".
    EXPECT_EQ(tok.encode("\xC3\xA9", plain()), (Ids{b.id(kSp), b.byte(0xC3), b.byte(0xA9)}));
    EXPECT_EQ(tok.decode(tok.encode("\xC3\xA9", plain())), "\xC3\xA9");
    // A tab and a newline also fall back to bytes.
    EXPECT_EQ(tok.encode("\t\n", plain()), (Ids{b.id(kSp), b.byte(9), b.byte(10)}));
    EXPECT_EQ(tok.token_to_piece(b.byte(0xC3)), "\xC3");
}

TEST(Spm, UnknownTokenWithoutByteFallback) {
    SpmBuilder b;  // no <0xXX> tokens
    const int32_t sp = b.add(kSp, -1);
    const int32_t a = b.add("a", -1);
    Tokenizer tok(b.v);
    // One <unk> per unknown character, not per byte.
    EXPECT_EQ(tok.encode("a\xC3\xA9", plain()), (Ids{sp, a, 0}));
    EXPECT_EQ(tok.decode({sp, a, 0}), "a");
    EXPECT_EQ(tok.decode({sp, a, 0}, {true, true}), "a<unk>");
    b.v.unk_id = kNoToken;
    b.v.types[0] = TokenType::Normal;
    Tokenizer no_unk(b.v);
    EXPECT_THROW(no_unk.encode("\xC3\xA9", plain()), moe::Error);
}

TEST(Special, TextThatLooksSpecialIsTextUnlessAsked) {
    SpmBuilder b;
    b.add(kSp, -1);
    b.add_bytes();
    for (char c : std::string("<>s/|uerab")) b.add(std::string(1, c), -2);
    const int32_t user = b.add("<|user|>", 0, TokenType::UserDefined);
    Tokenizer tok(b.v);
    // Control and unknown tokens are text unless parse_special ...
    for (const char* t : {"<s>", "</s>", "<unk>"}) {
        const Ids ids = tok.encode(t, plain());
        for (int32_t id : ids) {
            EXPECT_NE(tok.vocab().type_of(id), TokenType::Control) << t;
            EXPECT_NE(id, user) << t;
            EXPECT_NE(id, 0) << t;
        }
        EXPECT_EQ(tok.decode(ids), t);
    }
    // ... but user-defined tokens are always matched (as llama.cpp and HF tokenizers do), and the
    // SPM space prefix comes back after them.
    const int32_t sp_ = b.id(kSp), a_ = b.id("a");
    EXPECT_EQ(tok.encode("<|user|>", plain()), (Ids{user}));
    EXPECT_EQ(tok.encode("a<|user|>a", plain()), (Ids{sp_, a_, user, sp_, a_}));
    const int32_t sa = b.id("a"), sb = b.id("b"), sp = b.id(kSp);
    EXPECT_EQ(tok.encode("<s>", special()), (Ids{1}));
    // After a special token the SPM space prefix is added again.
    EXPECT_EQ(tok.encode("a</s>b", special()), (Ids{sp, sa, 2, sp, sb}));
    EXPECT_EQ(tok.encode("<|user|>a", special()), (Ids{user, sp, sa}));
    // Longest token first: "</s>" wins over a shorter match anywhere.
    EXPECT_EQ(tok.encode("</s><s>", special()), (Ids{2, 1}));
    // Control tokens decode to nothing unless asked; user-defined tokens are always text.
    EXPECT_EQ(tok.decode({2, user}), "<|user|>");
    EXPECT_EQ(tok.decode({2, user}, {true, true}), "</s><|user|>");
}

TEST(Special, BosEosFlags) {
    SpmBuilder b;
    const int32_t spa = b.add(kSp + "a", -1);
    b.add(kSp, -1);
    b.add("a", -1);
    b.v.add_eos = true;
    Tokenizer tok(b.v);
    EXPECT_EQ(tok.encode("a"), (Ids{1, spa, 2}));
    EncodeOptions no_bos;
    no_bos.add_bos = false;
    EXPECT_EQ(tok.encode("a", no_bos), (Ids{spa, 2}));
    EXPECT_EQ(tok.encode("a", plain()), (Ids{spa}));
    b.v.add_bos = false;
    b.v.add_eos = false;
    Tokenizer off(b.v);
    EXPECT_EQ(off.encode("a"), (Ids{spa}));  // options only add what the vocab asks for
}

namespace {

// Byte-level BPE vocab: the 256 byte characters, then merged tokens.
struct BpeBuilder {
    Vocab v;
    explicit BpeBuilder(const std::string& pre = "gpt-2") {
        v.model = "gpt2";
        v.type = ModelType::Bpe;
        v.pre = pre;
        for (const auto& c : BpeModel::byte_to_char()) v.tokens.push_back(c);
        v.types.assign(256, TokenType::Normal);
    }
    int32_t add(const std::string& t, TokenType type = TokenType::Normal) {
        v.tokens.push_back(t);
        v.types.push_back(type);
        return static_cast<int32_t>(v.tokens.size() - 1);
    }
    void merge(const std::string& l, const std::string& r) { v.merges.emplace_back(l, r); }
    int32_t byte(unsigned char b) const { return b; }  // the first 256 tokens are the bytes
};

}  // namespace

TEST(Bpe, ByteMappingIsGpt2s) {
    const auto& m = BpeModel::byte_to_char();
    EXPECT_EQ(m[' '], "\xC4\xA0");   // Ġ U+0120
    EXPECT_EQ(m['\n'], "\xC4\x8A");  // Ċ U+010A
    EXPECT_EQ(m['A'], "A");
    EXPECT_EQ(m[0xAD], "\xC5\x83");  // the soft hyphen is not printable: U+0143
    EXPECT_EQ(m[0xFF], "\xC3\xBF");  // ÿ maps to itself
}

TEST(Bpe, LowestRankMergesFirst) {
    for (bool bc_first : {true, false}) {
        BpeBuilder b;
        const int32_t ab = b.add("ab"), bc = b.add("bc");
        if (bc_first) {
            b.merge("b", "c");
            b.merge("a", "b");
        } else {
            b.merge("a", "b");
            b.merge("b", "c");
        }
        Tokenizer tok(b.v);
        if (bc_first) EXPECT_EQ(tok.encode("abc"), (Ids{b.byte('a'), bc}));
        else EXPECT_EQ(tok.encode("abc"), (Ids{ab, b.byte('c')}));
    }
}

TEST(Bpe, MergesChainAndSpaceIsG) {
    BpeBuilder b;
    const std::string G = "\xC4\xA0";
    const int32_t Gh = b.add(G + "h"), Ghi = b.add(G + "hi");
    b.merge(G, "h");
    b.merge(G + "h", "i");
    Tokenizer tok(b.v);
    EXPECT_EQ(tok.encode("hi hi"), (Ids{b.byte('h'), b.byte('i'), Ghi}));
    EXPECT_EQ(tok.decode(tok.encode("hi hi")), "hi hi");
    EXPECT_EQ(tok.decode({Gh}), " h");
    EXPECT_EQ(tok.token_to_piece(Ghi), " hi");
}

TEST(Stream, EmojiSplitAcrossByteTokensIsHeldUntilComplete) {
    BpeBuilder b;
    Tokenizer tok(b.v);
    const std::string emoji = "\xF0\x9F\x98\x80";  // 😀 U+1F600
    const Ids ids = tok.encode("a" + emoji + "b");
    ASSERT_EQ(ids.size(), 6u);  // no merges: one token per byte
    Detokenizer d(tok);
    EXPECT_EQ(d.push(ids[0]), "a");
    EXPECT_EQ(d.push(ids[1]), "");
    EXPECT_EQ(d.push(ids[2]), "");
    EXPECT_EQ(d.push(ids[3]), "");
    EXPECT_EQ(d.push(ids[4]), emoji);
    EXPECT_EQ(d.push(ids[5]), "b");
    EXPECT_EQ(d.flush(), "");
    EXPECT_EQ(tok.decode(ids), "a" + emoji + "b");
}

TEST(Stream, SpmByteTokensAndInvalidBytes) {
    SpmBuilder b;
    b.add(kSp, -1);
    const int32_t a = b.add("a", -1);
    b.add_bytes();
    Tokenizer tok(b.v);
    const std::string fffd = "\xEF\xBF\xBD";
    Detokenizer d(tok);
    // A truncated 4-byte sequence followed by a letter: U+FFFD as soon as the letter proves it
    // cannot complete, then the letter.
    EXPECT_EQ(d.push(b.byte(0xF0)), "");
    EXPECT_EQ(d.push(b.byte(0x9F)), "");
    EXPECT_EQ(d.push(a), fffd + "a");
    // A lone continuation byte is replaced at once.
    EXPECT_EQ(d.push(b.byte(0x80)), fffd);
    // An incomplete tail is replaced at flush.
    EXPECT_EQ(d.push(b.byte(0xE2)), "");
    EXPECT_EQ(d.push(b.byte(0x82)), "");
    EXPECT_EQ(d.flush(), fffd);
    // Every output of a random byte stream is valid UTF-8, and the stream equals decode().
    uint32_t s = 12345;
    Ids ids;
    for (int i = 0; i < 2000; ++i) {
        s = s * 1103515245u + 12345u;
        ids.push_back(b.byte(static_cast<unsigned char>((s >> 16) & 0xFF)));
    }
    Detokenizer d2(tok);
    std::string streamed;
    for (int32_t id : ids) {
        const std::string part = d2.push(id);
        ASSERT_TRUE(utf8::is_valid(part));
        streamed += part;
    }
    streamed += d2.flush();
    EXPECT_TRUE(utf8::is_valid(streamed));
    EXPECT_EQ(streamed, tok.decode(ids));
}

TEST(Utf8, ValidationAndReplacement) {
    EXPECT_TRUE(utf8::is_valid("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
    EXPECT_FALSE(utf8::is_valid("\xC0\xAF"));          // overlong
    EXPECT_FALSE(utf8::is_valid("\xED\xA0\x80"));      // surrogate
    EXPECT_FALSE(utf8::is_valid("\xF4\x90\x80\x80"));  // > U+10FFFF
    EXPECT_FALSE(utf8::is_valid("\xE2\x82"));          // truncated
    std::string out;
    EXPECT_EQ(utf8::sanitize_append("x\xE2\x82", false, out), 1u);
    EXPECT_EQ(out, "x");
    out.clear();
    utf8::sanitize_append("\xE2\x82x\xFF", true, out);
    EXPECT_EQ(out, "\xEF\xBF\xBDx\xEF\xBF\xBD");  // one U+FFFD per maximal invalid subpart
}

TEST(VocabValidation, HandBuiltVocabErrorsNameTheKey) {
    auto expect_error = [](Vocab v, const std::string& needle) {
        try {
            Tokenizer t(std::move(v));
            ADD_FAILURE() << "expected an error mentioning " << needle;
        } catch (const moe::Error& e) {
            EXPECT_EQ(e.component(), "tokenizer");
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    {
        SpmBuilder b;
        b.v.scores.pop_back();
        expect_error(b.v, "tokenizer.ggml.scores");
    }
    {
        SpmBuilder b;
        b.v.types.push_back(TokenType::Normal);
        expect_error(b.v, "tokenizer.ggml.token_type");
    }
    {
        SpmBuilder b;
        b.add("a", 0);
        b.add("a", 0);
        expect_error(b.v, "twice");
    }
    {
        SpmBuilder b;
        b.v.eos_id = 99;
        expect_error(b.v, "tokenizer.ggml.eos_token_id");
    }
    {
        SpmBuilder b;
        b.v.bos_id = kNoToken;
        expect_error(b.v, "add_bos_token");
    }
    {
        SpmBuilder b;
        b.v.scores.clear();
        expect_error(b.v, "tokenizer.ggml.scores is missing");
    }
    {
        BpeBuilder b("gpt-4o-unheard-of");
        expect_error(b.v, "qwen2");  // the message lists the supported pre-tokenizers
    }
    {
        Vocab v;
        expect_error(v, "tokenizer.ggml.tokens is empty");
    }
}
