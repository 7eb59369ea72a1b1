#pragma once
// Regex pre-tokenizer for byte-level BPE vocabularies, selected by tokenizer.ggml.pre.
// Uses PCRE2 (UTF + UCP, so \p{L}, \p{N} and \s are Unicode classes; JIT when available). The
// regexes are those of the original tokenizers as llama.cpp runs them (case-insensitive
// contractions spelled out as '[sS] etc.). Each regex of a pre-tokenizer is compiled once per
// PreTokenizer object; split() is const and thread-safe.
//
// Split semantics: a pre-tokenizer is a chain of regexes. Each regex is applied to every piece
// produced by the previous one; a piece is cut into its matches and the gaps between them, and
// gaps are kept as pieces (no text is ever dropped), so concatenating the pieces gives the input.
// Input need not be valid UTF-8: invalid bytes never match and end up in gap pieces.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace moe::tokenizer {

class PreTokenizer {
public:
    // Throws moe::Error("tokenizer") listing the supported names when `name` is unknown.
    explicit PreTokenizer(const std::string& name);
    ~PreTokenizer();
    PreTokenizer(PreTokenizer&&) noexcept;
    PreTokenizer& operator=(PreTokenizer&&) noexcept;

    const std::string& name() const;
    // Pieces are views into `text`.
    std::vector<std::string_view> split(std::string_view text) const;

    // Names accepted by the constructor (aliases included).
    static const std::vector<std::string>& supported();
    static bool is_supported(const std::string& name);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace moe::tokenizer
