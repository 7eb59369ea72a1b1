// Pre-tokenizer splits on sample strings. Expected splits are derived by hand from the regexes
// (leftmost alternative that matches at each position, greedy quantifiers with backtracking):
//   gpt-2:  's|'t|'re|'ve|'m|'ll|'d | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S)
//   llama3: contractions (any case) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n]*
//           | \s*[\r\n]+ | \s+(?!\S) | \s+
//   qwen2:  as llama3 but \p{N} (one digit per piece)
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/pretokenize.h"

using moe::tokenizer::PreTokenizer;
using Pieces = std::vector<std::string>;

namespace {

Pieces split(const PreTokenizer& p, const std::string& s) {
    Pieces out;
    std::string joined;
    for (auto v : p.split(s)) {
        out.emplace_back(v);
        joined += v;
    }
    EXPECT_EQ(joined, s) << "pieces must cover the input exactly";
    return out;
}

}  // namespace

TEST(PreTokenize, Llama3DigitsInGroupsOfThree) {
    PreTokenizer p("llama3");
    EXPECT_EQ(split(p, "12345 abc"), (Pieces{"123", "45", " abc"}));
    EXPECT_EQ(split(p, "1234567"), (Pieces{"123", "456", "7"}));
    EXPECT_EQ(split(p, "x 42"), (Pieces{"x", " ", "42"}));  // a space never joins a number
    PreTokenizer alias("llama-bpe");
    EXPECT_EQ(split(alias, "12345"), (Pieces{"123", "45"}));
}

TEST(PreTokenize, Qwen2OneDigitPerPiece) {
    PreTokenizer p("qwen2");
    EXPECT_EQ(split(p, "12345 abc"), (Pieces{"1", "2", "3", "4", "5", " abc"}));
    EXPECT_EQ(split(p, "v2.0"), (Pieces{"v", "2", ".", "0"}));
}

TEST(PreTokenize, Contractions) {
    PreTokenizer l3("llama3"), q("qwen2"), g("gpt-2");
    EXPECT_EQ(split(l3, "I'm here"), (Pieces{"I", "'m", " here"}));
    EXPECT_EQ(split(l3, "DON'T"), (Pieces{"DON", "'T"}));
    EXPECT_EQ(split(q, "we'LL"), (Pieces{"we", "'LL"}));
    // gpt-2 only knows lower-case contractions: "'" is punctuation, then "T" a word.
    EXPECT_EQ(split(g, "DON'T"), (Pieces{"DON", "'", "T"}));
    EXPECT_EQ(split(g, "they're"), (Pieces{"they", "'re"}));
}

TEST(PreTokenize, WhitespaceRuns) {
    PreTokenizer l3("llama3"), g("gpt-2");
    // \s+(?!\S) backs off one space so the last one joins the next word.
    EXPECT_EQ(split(l3, "a   b"), (Pieces{"a", "  ", " b"}));
    EXPECT_EQ(split(g, "   Hello"), (Pieces{"  ", " Hello"}));
    EXPECT_EQ(split(l3, "a  "), (Pieces{"a", "  "}));  // trailing run: all of it
    // Newlines: \s*[\r\n]+ takes the newline run; spaces before a word split as above.
    EXPECT_EQ(split(l3, "a\n\nb"), (Pieces{"a", "\n\n", "b"}));
    EXPECT_EQ(split(l3, "hello\n  world"), (Pieces{"hello", "\n", " ", " world"}));
    // Punctuation keeps following newlines: " ?[^\s\p{L}\p{N}]+[\r\n]*".
    EXPECT_EQ(split(l3, "end.\n\nNext"), (Pieces{"end", ".\n\n", "Next"}));
    // gpt-2 has no \s+ fallback: a lone tab before a word is an unmatched gap, kept as a piece.
    EXPECT_EQ(split(g, "\tHello"), (Pieces{"\t", "Hello"}));
    EXPECT_EQ(split(g, "Hello!!! ok"), (Pieces{"Hello", "!!!", " ok"}));
}

TEST(PreTokenize, CjkAndUnicodeClasses) {
    PreTokenizer l3("llama3"), q("qwen2"), g("gpt-2");
    // Han characters are \p{L} (Lo): one run.
    EXPECT_EQ(split(l3, "你好世界"), (Pieces{"你好世界"}));
    // A full-width comma is not a letter, so "[^\r\n\p{L}\p{N}]?\p{L}+" attaches it to the next word.
    EXPECT_EQ(split(q, "你好，世界"), (Pieces{"你好", "，世界"}));
    // gpt-2: " ?[^\s\p{L}\p{N}]+" makes the comma its own piece.
    EXPECT_EQ(split(g, "你好，世界"), (Pieces{"你好", "，", "世界"}));
    // Non-ASCII letters and digits: "é" is \p{L}, Arabic-Indic digits are \p{N}.
    EXPECT_EQ(split(l3, "café ١٢٣٤"), (Pieces{"café", " ", "١٢٣", "٤"}));
    // U+3000 (ideographic space) is \s with UCP.
    EXPECT_EQ(split(g, "a\xE3\x80\x80\xE3\x80\x80" "b"), (Pieces{"a", "\xE3\x80\x80", "\xE3\x80\x80", "b"}));
}

TEST(PreTokenize, DefaultChain) {
    PreTokenizer d("default");
    // Punctuation runs are cut out first, then the gpt-2 regex, then digit runs, then 3-digit groups.
    EXPECT_EQ(split(d, "Hi, 12345!"), (Pieces{"Hi", ",", " ", "123", "45", "!"}));
}

TEST(PreTokenize, InvalidUtf8AndLongInputs) {
    PreTokenizer l3("llama3");
    const std::string bad = "ab\xFF\xFE" "cd \xC3";
    const Pieces pieces = split(l3, bad);  // covers the input; invalid bytes never match
    EXPECT_EQ(pieces.front(), "ab");
    // A very long run (JIT stack limits) must not fail.
    const std::string big(200000, 'a');
    EXPECT_EQ(split(l3, big).size(), 1u);
    std::string spaces(100000, ' ');
    spaces += "x";
    EXPECT_EQ(split(l3, spaces).size(), 2u);
    EXPECT_EQ(split(l3, "").size(), 0u);
}

TEST(PreTokenize, UnknownNameListsSupported) {
    try {
        PreTokenizer p("no-such-pre");
        FAIL() << "expected moe::Error";
    } catch (const moe::Error& e) {
        const std::string m = e.what();
        EXPECT_EQ(e.component(), "tokenizer");
        for (const char* n : {"no-such-pre", "tekken", "gpt-2", "llama3", "qwen2", "default", "kimi-k2", "deepseek-v3"})
            EXPECT_NE(m.find(n), std::string::npos) << m;
    }
}
