// Parity with llama.cpp on every supported pre-tokenizer and both vocabulary models.
// tests/data/tokenizer/strings.inp holds the strings (llama.cpp's 46 tokenizer test strings plus
// ones that hit each regex branch: CJK, Arabic, Hebrew, emoji with ZWJ, combining marks, digit runs
// of 1..12, contractions in both cases, runs of spaces/tabs/newlines, special-looking text, mixed
// scripts). Each <config>.out holds llama.cpp's ids for them (scripts/tokenizer/gen-vectors.sh,
// provenance in tests/data/README.md). Configs:
//   <vocab>          a real vocab file, special tokens not parsed (as test-tokenizer-0)
//   <vocab>.special  the same with parse_special (control tokens matched in the text)
//   gpt-2@<pre>      the gpt-2 vocabulary with tokenizer.ggml.pre = <pre> (every name we support)
//   gpt-neox@olmo    the GPT-NeoX vocabulary (178 user-defined tokens) as OLMoE declares it
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vectors_util.h"

using namespace moe::tokenizer;

namespace {

const std::string kData = MOE_TEST_DATA_DIR;

std::string ids_str(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
    return s;
}

const std::vector<std::string>& strings() {
    static const std::vector<std::string> s = [] {
        std::vector<std::string> out;
        const std::string inp = test::read_file(kData + "/tokenizer/strings.inp");
        const std::string sep = "\n__ggml_vocab_test__\n";
        for (size_t pos = 0; pos < inp.size();) {
            const size_t next = inp.find(sep, pos);
            out.push_back(inp.substr(pos, next - pos));
            pos = next + sep.size();
        }
        return out;
    }();
    return s;
}

std::vector<std::vector<int32_t>> expected(const std::string& config) {
    std::ifstream f(kData + "/tokenizer/" + config + ".out");
    EXPECT_TRUE(f) << "missing " << config << ".out";
    std::vector<std::vector<int32_t>> rows;
    for (std::string line; std::getline(f, line);) {
        std::istringstream ls(line);
        std::vector<int32_t> row;
        for (long v; ls >> v;) row.push_back(static_cast<int32_t>(v));
        rows.push_back(row);
    }
    return rows;
}

Vocab vocab(const std::string& name) {
    return load_vocab(moe::gguf::File::open(kData + "/vocab/ggml-vocab-" + name + ".gguf"));
}

struct Tally {
    size_t total = 0, same = 0, roundtrip = 0;
};

// Encodes every string and compares with the config's expected ids; checks decode(encode(s)) == s
// when `roundtrip` (every string is representable in these vocabs when special tokens are not parsed).
Tally check(const Tokenizer& tok, const std::string& config, bool parse_special, bool roundtrip) {
    const auto want = expected(config);
    const auto& in = strings();
    EXPECT_EQ(want.size(), in.size()) << config;
    EncodeOptions o;
    o.add_bos = o.add_eos = false;
    o.parse_special = parse_special;
    Tally t;
    for (size_t i = 0; i < in.size() && i < want.size(); ++i) {
        ++t.total;
        const auto got = tok.encode(in[i], o);
        EXPECT_EQ(ids_str(got), ids_str(want[i])) << config << ": string " << i << " '" << test::escaped(in[i]) << "'";
        t.same += got == want[i];
        if (roundtrip) {
            const std::string back = tok.decode(got);
            EXPECT_EQ(back, in[i]) << config << ": round trip of string " << i;
            t.roundtrip += back == in[i];
        }
    }
    std::printf("%-24s %zu/%zu ids equal to llama.cpp%s\n", config.c_str(), t.same, t.total,
                roundtrip ? (", " + std::to_string(t.roundtrip) + " round-trip").c_str() : "");
    return t;
}

}  // namespace

TEST(TokenizerParity, RealVocabularies) {
    for (const char* name : {"gpt-2", "llama-spm", "gpt-neox", "deepseek-coder", "phi-3"}) {
        const Tokenizer tok(vocab(name));
        const Tally plain = check(tok, name, false, true);
        EXPECT_EQ(plain.same, plain.total) << name;
        const Tally special = check(tok, std::string(name) + ".special", true, false);
        EXPECT_EQ(special.same, special.total) << name;
    }
}

TEST(TokenizerParity, LongTextsTakeTheWordCachePaths) {
    // long.inp: 16 KB of Shakespeare and all strings joined (x3): long enough for the per-call
    // piece cache (BPE) and the word-by-word path (SPM); ids must not change.
    const std::string inp = test::read_file(kData + "/tokenizer/long.inp");
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> texts;
    for (size_t pos = 0; pos < inp.size();) {
        const size_t next = inp.find(sep, pos);
        texts.push_back(inp.substr(pos, next - pos));
        pos = next + sep.size();
    }
    ASSERT_EQ(texts.size(), 2u);
    EncodeOptions o;
    o.add_bos = o.add_eos = false;
    for (const char* name : {"gpt-2", "llama-spm", "gpt-neox", "deepseek-coder", "phi-3"}) {
        const Tokenizer tok(vocab(name));
        const auto want = expected(std::string(name) + ".long");
        ASSERT_EQ(want.size(), texts.size()) << name;
        for (size_t i = 0; i < texts.size(); ++i) {
            const auto got = tok.encode(texts[i], o);
            EXPECT_TRUE(got == want[i]) << name << ": long text " << i << " differs (" << got.size() << " vs "
                                        << want[i].size() << " ids)";
            EXPECT_EQ(tok.decode(got), texts[i]) << name;
        }
    }
}

TEST(TokenizerParity, EveryPreTokenizerOnGpt2Vocab) {
    const Vocab base = vocab("gpt-2");
    std::ifstream names(kData + "/tokenizer/pre-names.txt");
    size_t n = 0;
    for (std::string pre; std::getline(names, pre);) {
        if (pre.empty()) continue;
        ++n;
        Vocab v = base;
        v.pre = pre;
        const Tokenizer tok(std::move(v));
        const Tally t = check(tok, "gpt-2@" + pre, false, true);
        EXPECT_EQ(t.same, t.total) << pre;
    }
    // The list covers every name the engine accepts.
    EXPECT_EQ(n, PreTokenizer::supported().size());
}

TEST(TokenizerParity, TokenAttributeRules) {
    // gpt-2 + appended gpt-oss / Qwen / FIM style tokens (scripts/tokenizer/gen-vectors.sh):
    // llama.cpp makes <|im_end|> and <|fim_prefix|> (user-defined in the file) control, and
    // <|channel|> <|message|> <|start|> <|constrain|> <|end|> (control in the file) user-defined.
    // The GGUF is rebuilt here with the same appended tokens.
    Vocab v = vocab("gpt-2");
    const std::vector<std::pair<const char*, TokenType>> added = {
        {"<|channel|>", TokenType::Control},    {"<|message|>", TokenType::Control},
        {"<|start|>", TokenType::Control},      {"<|constrain|>", TokenType::Control},
        {"<|end|>", TokenType::Control},        {"<|return|>", TokenType::Control},
        {"<|call|>", TokenType::Control},       {"<|im_end|>", TokenType::UserDefined},
        {"<|fim_prefix|>", TokenType::UserDefined}, {"<|user_tok|>", TokenType::UserDefined},
        {"<unused_1>", TokenType::Control}};
    const auto dir = std::filesystem::temp_directory_path() / ("moe_tok_attrs_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "attrs.gguf").string();
    {
        moe::gguf::Writer w(path);
        w.set_string("general.architecture", "gpt2");
        w.set_string("general.name", "gpt-2");
        w.set_string("tokenizer.ggml.model", "gpt2");
        w.set_string("tokenizer.ggml.pre", "gpt-4o");
        std::vector<std::string> toks = v.tokens;
        std::vector<int32_t> types(v.tokens.size());
        for (size_t i = 0; i < types.size(); ++i) types[i] = static_cast<int32_t>(v.type_of(static_cast<int32_t>(i)));
        for (const auto& [t, ty] : added) toks.push_back(t), types.push_back(static_cast<int32_t>(ty));
        w.set_string_array("tokenizer.ggml.tokens", toks);
        w.set_i32_array("tokenizer.ggml.token_type", types);
        std::vector<std::string> merges;
        for (const auto& [l, r] : v.merges) merges.push_back(l + " " + r);
        w.set_string_array("tokenizer.ggml.merges", merges);
        w.set_u32("tokenizer.ggml.bos_token_id", 50256);
        w.set_u32("tokenizer.ggml.eos_token_id", 50256);
        w.write_header();
        w.finish();
    }
    const Tokenizer tok(load_vocab(moe::gguf::File::open(path)));
    std::filesystem::remove_all(dir);
    const int32_t base = 50257;
    EXPECT_EQ(tok.vocab().type_of(base + 0), TokenType::UserDefined);  // <|channel|>
    EXPECT_EQ(tok.vocab().type_of(base + 4), TokenType::UserDefined);  // <|end|>
    EXPECT_EQ(tok.vocab().type_of(base + 5), TokenType::Control);      // <|return|>
    EXPECT_EQ(tok.vocab().type_of(base + 7), TokenType::Control);      // <|im_end|>
    EXPECT_EQ(tok.vocab().type_of(base + 8), TokenType::Control);      // <|fim_prefix|>
    EXPECT_EQ(tok.vocab().type_of(base + 9), TokenType::UserDefined);  // <|user_tok|>
    const Tally plain = check(tok, "gpt-2+attrs", false, true);
    EXPECT_EQ(plain.same, plain.total);
    const Tally special = check(tok, "gpt-2+attrs.special", true, false);
    EXPECT_EQ(special.same, special.total);
}

TEST(TokenizerParity, GptNeoxAsOlmo) {
    // OLMoE ships the GPT-NeoX vocabulary with pre "olmo": its user-defined tokens (runs of
    // spaces) must be matched before BPE even though special tokens are not parsed.
    Vocab v = vocab("gpt-neox");
    v.pre = "olmo";
    const Tokenizer tok(std::move(v));
    const Tally t = check(tok, "gpt-neox@olmo", false, true);
    EXPECT_EQ(t.same, t.total);
}

TEST(TokenizerParity, SplitsEqualLlamaCppForEveryRegexSet) {
    // Ids alone can hide a wrong split (different pieces, same merges); splits/<set>.out holds the
    // byte lengths of the pieces llama.cpp's own splitter cuts each string into.
    std::set<std::string> done;
    for (const auto& row : detail::pre_table()) {
        if (!done.insert(row.set->id).second) continue;
        const PreTokenizer pre(row.name);
        std::ifstream f(kData + "/tokenizer/splits/" + row.set->id + ".out");
        ASSERT_TRUE(f) << "missing splits/" << row.set->id << ".out";
        size_t i = 0, same = 0;
        for (std::string line; std::getline(f, line); ++i) {
            ASSERT_LT(i, strings().size());
            std::string got;
            for (std::string_view p : pre.split(strings()[i])) got += (got.empty() ? "" : " ") + std::to_string(p.size());
            EXPECT_EQ(got, line) << row.set->id << ": string " << i << " '" << test::escaped(strings()[i]) << "'";
            same += got == line;
        }
        EXPECT_EQ(i, strings().size());
        std::printf("split %-16s %zu/%zu equal to llama.cpp\n", row.set->id, same, i);
    }
    EXPECT_GE(done.size(), 16u);
}

TEST(TokenizerParity, DecodeWithCleanSpacesEqualsLlamaDetokenize) {
    // <config>.detok: llama_detokenize of llama.cpp's ids (hex per string). Our decode with the
    // opt-in clean_spaces must give the same text (clean-up applies where the family uses it:
    // gpt-2 and GPT-NeoX yes, qwen2 / deepseek / SPM no).
    auto hex = [](const std::string& s) {
        static const char* d = "0123456789abcdef";
        std::string h;
        for (unsigned char c : s) h += d[c >> 4], h += d[c & 15];
        return h;
    };
    const Vocab gpt2 = vocab("gpt-2");
    Vocab qwen = gpt2;
    qwen.pre = "qwen2";
    std::vector<std::pair<std::string, Tokenizer>> toks;
    for (const char* name : {"gpt-2", "llama-spm", "gpt-neox", "deepseek-coder", "phi-3"}) toks.emplace_back(name, Tokenizer(vocab(name)));
    toks.emplace_back("gpt-2@qwen2", Tokenizer(std::move(qwen)));
    EncodeOptions o;
    o.add_bos = o.add_eos = false;
    DecodeOptions d;
    d.clean_spaces = true;
    size_t cleaned = 0;
    for (const auto& [config, tok] : toks) {
        std::ifstream f(kData + "/tokenizer/" + config + ".detok");
        ASSERT_TRUE(f) << config;
        size_t i = 0, same = 0;
        for (std::string line; std::getline(f, line); ++i) {
            const auto ids = tok.encode(strings()[i], o);
            const std::string got = tok.decode(ids, d);
            EXPECT_EQ(hex(got), line) << config << ": string " << i << " '" << test::escaped(strings()[i]) << "' -> '"
                                      << test::escaped(got) << "'";
            same += hex(got) == line;
            cleaned += tok.cleans_spaces() && got != tok.decode(ids);
        }
        std::printf("%-16s decode %zu/%zu equal to llama_detokenize\n", config.c_str(), same, i);
    }
    EXPECT_GT(cleaned, 0u);  // the clean-up did change some texts
}
