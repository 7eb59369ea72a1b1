#pragma once
// Regex pre-tokenizer for byte-level BPE vocabularies, selected by tokenizer.ggml.pre.
//
// Each name maps to a chain of regexes (pretokenize_table.cpp; names that share regexes share one
// set) and to per-name flags. The regexes are evaluated as llama.cpp evaluates them, so that our
// token ids equal its ids (unicode_class.h): a regex that uses \p{...} runs on "collapsed" text,
// one byte per code point standing for its class; any other regex runs on the code points (PCRE2,
// 32-bit units) with non-ASCII whitespace seen as U+000B and ASCII-only \s. PCRE2 patterns are
// compiled (JIT when available) once per PreTokenizer; split() is const and thread-safe.
//
// Split semantics: each regex of the chain is applied to every piece produced by the previous
// one; a piece is cut into its matches and the gaps between them, and gaps are kept as pieces
// (no text is ever dropped), so concatenating the pieces gives the input. Bytes that are not
// UTF-8 count as one U+FFFD each (the caller encodes such text via ucls::normalize_invalid).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace moe::tokenizer {

// Flags llama.cpp attaches to a pre-tokenizer name (they affect more than the split).
struct PreInfo {
    bool ignore_merges = false;  // a piece that is itself a token is emitted whole
    bool add_bos = false;        // default of tokenizer.ggml.add_bos_token
    bool clean_spaces = true;    // decoding may remove spaces before punctuation (opt-in here)
};

class PreTokenizer {
public:
    // Throws moe::Error("tokenizer") listing the supported names when `name` is unknown.
    explicit PreTokenizer(const std::string& name);
    ~PreTokenizer();
    PreTokenizer(PreTokenizer&&) noexcept;
    PreTokenizer& operator=(PreTokenizer&&) noexcept;

    const std::string& name() const;
    const PreInfo& info() const;
    // Pieces are views into `text`.
    std::vector<std::string_view> split(std::string_view text) const;

    // Names accepted by the constructor (aliases included).
    static const std::vector<std::string>& supported();
    static bool is_supported(const std::string& name);
    // Flags of a supported name; nullptr when unknown.
    static const PreInfo* find_info(const std::string& name);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

namespace detail {
// One regex set of the table: the regexes in order; `han` adds the Han class (kimi-k2).
struct PreSet {
    const char* id;
    std::vector<const char*> regexes;
    bool han = false;
};
struct PreName {
    const char* name;
    const PreSet* set;
    PreInfo info;
};
const std::vector<PreName>& pre_table();  // pretokenize_table.cpp
}  // namespace detail

}  // namespace moe::tokenizer
