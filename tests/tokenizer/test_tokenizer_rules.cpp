// Rules of the llama.cpp-compatible tokenizer that the parity strings do not pin down on their
// own: code point classes, lenient UTF-8 decoding, invalid UTF-8 in BPE input, $ in literal
// regexes, the clean_spaces passes, longest-first special-token matching and strip flags.
// Expected values are derived by hand from the rules in docs/TOKENIZER.md.
#include <gtest/gtest.h>

#include "core/rng.h"
#include "format/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_class.h"
#include "tokenizer/utf8.h"

using namespace moe::tokenizer;
using Pieces = std::vector<std::string>;

namespace {

Pieces split(const PreTokenizer& p, const std::string& s) {
    Pieces out;
    std::string joined;
    for (auto v : p.split(s)) out.emplace_back(v), joined += v;
    EXPECT_EQ(joined, s) << "pieces must cover the input";
    return out;
}

const Tokenizer& gpt2() {
    static const Tokenizer t = Tokenizer::from_gguf(moe::gguf::File::open(MOE_TEST_DATA_DIR "/vocab/ggml-vocab-gpt-2.gguf"));
    return t;
}

EncodeOptions plain() {
    EncodeOptions o;
    o.add_bos = o.add_eos = false;
    return o;
}

}  // namespace

TEST(UnicodeClass, CollapsedBytes) {
    using namespace ucls;
    EXPECT_EQ(collapse('a', false), 'a');
    EXPECT_EQ(collapse(0xE9, false), kLetter);     // é
    EXPECT_EQ(collapse(0x301, false), kMark);      // combining acute
    EXPECT_EQ(collapse(0x663, false), kNumber);    // Arabic-Indic three
    EXPECT_EQ(collapse(0xBD, false), kNumber);     // ½ (No)
    EXPECT_EQ(collapse(0x3001, false), kPunct);    // 、
    EXPECT_EQ(collapse(0x20AC, false), kSymbol);   // €
    EXPECT_EQ(collapse(0x1F600, false), kSymbol);  // 😀
    EXPECT_EQ(collapse(0x200D, false), kOther);    // ZWJ (Cf)
    EXPECT_EQ(collapse(0xE000, false), kOther);    // private use
    EXPECT_EQ(collapse(0xA0, false), kSpace);      // no-break space
    EXPECT_EQ(collapse(0x3000, false), kSpace);
    EXPECT_EQ(collapse(0x4E2D, false), kLetter);   // 中
    EXPECT_EQ(collapse(0x4E2D, true), kHan);
    EXPECT_EQ(collapse(0x3042, true), kLetter);    // あ is not Han
    EXPECT_TRUE(is_whitespace(0x85));
    EXPECT_FALSE(is_whitespace(0x200B));           // zero width space is not White_Space
}

TEST(UnicodeClass, LenientDecodingLikeLlamaCpp) {
    using namespace ucls;
    Decoded d;
    decode("a\xC3\xA9\x80" "b\xE2\x82", d);  // é, lone continuation, truncated 3-byte sequence
    EXPECT_EQ(d.cps, (std::vector<uint32_t>{'a', 0xE9, 0xFFFD, 'b', 0xFFFD, 0xFFFD}));
    EXPECT_EQ(d.offsets, (std::vector<uint32_t>{0, 1, 3, 4, 5, 6, 7}));
    decode("\xC0\x80", d);  // overlong NUL: accepted as U+0000 (not validated)
    EXPECT_EQ(d.cps, (std::vector<uint32_t>{0}));
    EXPECT_EQ(normalize_invalid("x\xFFy\xC0\x80"), std::string("x\xEF\xBF\xBDy") + std::string(1, '\0'));
}

TEST(TokenizerRules, InvalidUtf8IsEncodedAsReplacementCharacters) {
    // llama.cpp rebuilds BPE input from code points, so each invalid byte becomes U+FFFD.
    const auto& t = gpt2();
    EXPECT_EQ(t.encode("ab\xFF" "cd", plain()), t.encode("ab\xEF\xBF\xBD" "cd", plain()));
    EXPECT_EQ(t.encode("\x80\x80 x", plain()), t.encode("\xEF\xBF\xBD\xEF\xBF\xBD x", plain()));
    // Random bytes: never throws, always the same as the normalized text.
    moe::Rng rng(7);
    for (int rep = 0; rep < 200; ++rep) {
        std::string s(1 + static_cast<uint32_t>(rng.next()) % 40, '\0');
        for (char& c : s) c = static_cast<char>(static_cast<uint32_t>(rng.next()));
        EXPECT_EQ(t.encode(s, plain()), t.encode(ucls::normalize_invalid(s), plain()));
        EXPECT_TRUE(utf8::is_valid(t.decode(t.encode(s, plain()))));
    }
}

TEST(TokenizerRules, DeepseekLlmLiteralRegexes) {
    // deepseek-llm runs literal-range regexes on code points: newlines first, then letters with
    // an optional leading space, then "\s+$" keeps a trailing space run as one piece; the
    // ideographic space U+3000 is seen as whitespace, so the full-width punctuation range that
    // contains it does not take it.
    const PreTokenizer p("deepseek-llm");
    EXPECT_EQ(split(p, "ab  "), (Pieces{"ab", "  "}));
    EXPECT_EQ(split(p, "ab cd\n"), (Pieces{"ab", " cd", "\n"}));
    EXPECT_EQ(split(p, "\xEF\xBC\x81\xE3\x80\x80\xEF\xBC\x81"), (Pieces{"\xEF\xBC\x81", "\xE3\x80\x80\xEF\xBC\x81"}));
}

TEST(TokenizerRules, CaseClassesAreAsciiOnlyForTekken) {
    // [^a-z] / [^A-Z] lookaheads: a non-ASCII letter counts as upper and lower case.
    const PreTokenizer p("tekken");
    EXPECT_EQ(split(p, "HelloWorld"), (Pieces{"Hello", "World"}));
    EXPECT_EQ(split(p, "\xC3\x89""COLEx"), (Pieces{"\xC3\x89""COLEx"}));  // ÉCOLEx: É upper-or-lower
    EXPECT_EQ(split(p, "ab12"), (Pieces{"ab", "1", "2"}));
}

TEST(TokenizerRules, MarksAreNotLetters) {
    // e + U+0301: llama3's \p{L}+ stops at the mark; qwen35 joins letters and marks.
    EXPECT_EQ(split(PreTokenizer("llama3"), "cafe\xCC\x81s"), (Pieces{"cafe", "\xCC\x81s"}));
    EXPECT_EQ(split(PreTokenizer("qwen35"), "cafe\xCC\x81s"), (Pieces{"cafe\xCC\x81s"}));
}

TEST(TokenizerRules, KimiHanRunsAreSeparate) {
    EXPECT_EQ(split(PreTokenizer("kimi-k2"), "\xE4\xB8\xAD\xE6\x96\x87" "abc"),
              (Pieces{"\xE4\xB8\xAD\xE6\x96\x87", "abc"}));
    EXPECT_EQ(split(PreTokenizer("gpt-4o"), "\xE4\xB8\xAD\xE6\x96\x87" "abc"), (Pieces{"\xE4\xB8\xAD\xE6\x96\x87" "abc"}));
}

TEST(TokenizerRules, CleanSpacesPasses) {
    const auto& t = gpt2();  // gpt-2 uses clean_spaces
    ASSERT_TRUE(t.cleans_spaces());
    DecodeOptions d;
    d.clean_spaces = true;
    auto clean = [&](const std::string& s) { return t.decode(t.encode(s, plain()), d); };
    EXPECT_EQ(clean("Hello , world ! ok ? yes ."), "Hello, world! ok? yes.");
    EXPECT_EQ(clean("it 's we 're they 've I 'm"), "it's we're they've I'm");
    EXPECT_EQ(clean("don 't I 'd we 'll"), "don 't I 'd we 'll");  // kept, as llama.cpp does
    EXPECT_EQ(clean("a ' b"), "a'b");
    EXPECT_EQ(clean("a ' ' b"), "a'' b");  // the skipped space no longer counts for the next '
    EXPECT_EQ(clean("a  ,"), "a ,");       // only the one space right before
    EXPECT_EQ(t.decode(t.encode("Hello , world", plain())), "Hello , world");  // default: lossless
    Vocab v = t.vocab();
    v.pre = "qwen2";  // a family without clean_spaces: the option changes nothing
    const Tokenizer q(std::move(v));
    EXPECT_FALSE(q.cleans_spaces());
    EXPECT_EQ(q.decode(q.encode("Hello , world", plain()), d), "Hello , world");
}

TEST(TokenizerRules, LongestSpecialFirstAndStripFlags) {
    Vocab v;
    v.model = "gpt2";
    v.type = ModelType::Bpe;
    v.pre = "gpt-2";
    const auto& map = BpeModel::byte_to_char();
    for (int b = 0; b < 256; ++b) v.tokens.push_back(map[b]), v.types.push_back(TokenType::Normal);
    auto add = [&](const std::string& t, TokenType ty) {
        v.tokens.push_back(t);
        v.types.push_back(ty);
        return static_cast<int32_t>(v.tokens.size() - 1);
    };
    const int32_t ab = add("ab", TokenType::UserDefined);
    const int32_t bcd = add("bcd", TokenType::UserDefined);
    const int32_t ctl = add("<c>", TokenType::Control);
    v.strip.assign(v.tokens.size(), 0);
    v.strip[static_cast<size_t>(ctl)] = kStripLeft | kStripRight;
    const Tokenizer t(std::move(v));
    auto byte = [](char c) { return static_cast<int32_t>(static_cast<unsigned char>(c)); };
    // "bcd" is longer, so it is cut out first even though "ab" starts earlier.
    EXPECT_EQ(t.encode("abcd", plain()), (std::vector<int32_t>{byte('a'), bcd}));
    EXPECT_EQ(t.encode("abab", plain()), (std::vector<int32_t>{ab, ab}));
    // Control tokens only with parse_special; strip flags eat the whitespace around them.
    EncodeOptions sp = plain();
    sp.parse_special = true;
    EXPECT_EQ(t.encode("x \t<c>\n y", sp), (std::vector<int32_t>{byte('x'), ctl, byte('y')}));
    EXPECT_EQ(t.encode("<c>", plain()).size(), 3u);
}

TEST(TokenizerRules, SpmWordByWordOnlyWhenNoTokenSpansASpace) {
    // A vocab with "a▁b" (a token with the space marker after another character): merges cross
    // spaces, so long texts must not be cut into words (they are for vocabs without such tokens).
    const std::string sp = "\xE2\x96\x81";
    Vocab v;
    v.model = "llama";
    v.type = ModelType::Spm;
    v.add_space_prefix = true;
    for (const auto& [t, score] : std::vector<std::pair<std::string, float>>{
             {"<unk>", 0}, {sp, -1}, {"x", -1}, {"a", -1}, {"b", -1}, {"a" + sp, 1}, {"a" + sp + "b", 2}}) {
        v.tokens.push_back(t);
        v.scores.push_back(score);
    }
    v.unk_id = 0;
    const Tokenizer t(std::move(v));
    std::string text;
    std::vector<int32_t> want;
    for (int i = 0; i < 60; ++i) text += "xa b ", want.insert(want.end(), {1, 2, 6});
    want.push_back(1);  // the final space
    ASSERT_GT(text.size(), 256u);  // long enough for the word-by-word path
    EXPECT_EQ(t.encode(text, plain()), want);
}
