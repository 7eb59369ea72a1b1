#pragma once
// UTF-8 helpers for the tokenizer: character lengths, strict validation (no overlongs, surrogates
// or code points above U+10FFFF) and replacement of invalid bytes with U+FFFD, one replacement per
// maximal invalid subpart (the Unicode / WHATWG recommendation).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace moe::tokenizer::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the character a lead byte announces (1..4); 1 for bytes that cannot start one.
inline size_t seq_len(unsigned char lead) {
    if (lead < 0x80) return 1;
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead >= 0xE0 && lead <= 0xEF) return 3;
    if (lead >= 0xF0 && lead <= 0xF4) return 4;
    return 1;
}

// Length in bytes of the character at s[pos] for splitting text into characters: the announced
// length, clipped to the end of the input (invalid bytes count as one-byte characters).
size_t char_len(std::string_view s, size_t pos);

enum class Scan { Complete, Incomplete, Invalid };
// Checks the sequence starting at s[pos]. Complete: a valid character of `n` bytes. Invalid: the
// first `n` bytes are a maximal invalid subpart. Incomplete: the input ends inside a character
// whose first `n` bytes are valid so far (more bytes could complete it).
Scan scan(std::string_view s, size_t pos, size_t& n);

bool is_valid(std::string_view s);

// Appends the valid prefix of `in` to `out`, replacing invalid subparts with U+FFFD. Returns the
// number of bytes consumed: all of `in`, except for an incomplete character at its end when
// `final` is false (the caller keeps those bytes for the next call).
size_t sanitize_append(std::string_view in, bool final, std::string& out);

// Appends the UTF-8 encoding of code point `cp` (< 0x110000, not a surrogate).
void append_cp(uint32_t cp, std::string& out);

}  // namespace moe::tokenizer::utf8
