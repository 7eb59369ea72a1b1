#pragma once
// Code point classes for the regex pre-tokenizers, with the semantics llama.cpp's tokenizer has
// (the reference our token ids are checked against), so that ids match on every input:
//  - decoding: a byte that does not start a well-formed sequence (by llama.cpp's lenient rules:
//    lead byte plus the right number of continuation bytes) becomes U+FFFD and consumes one byte;
//  - categories: the Unicode general category (ICU) folded to letter / number / punctuation /
//    mark / symbol / other, and White_Space from PropList.txt as the whitespace set;
//  - "collapsed" text: one byte per code point. ASCII stays itself, non-ASCII whitespace becomes
//    0x0B, every other non-ASCII code point becomes its category byte (0xD0..0xD6). A regex over
//    \p{L}, \p{N}, ... is then run on these bytes with each \p{X} rewritten as a byte class (see
//    pretokenize.cpp). This is how llama.cpp evaluates its regexes, so e.g. a combining mark is
//    never part of \p{L} and a non-ASCII letter counts as both [^a-z] and [^A-Z].
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moe::tokenizer::ucls {

// Category bytes of collapsed text (values as llama.cpp's, plus Han for kimi-k2).
enum : uint8_t {
    kOther = 0xD0,   // control, format, private use, surrogate, unassigned, line/paragraph separator
    kNumber = 0xD1,  // Nd Nl No
    kLetter = 0xD2,  // Lu Ll Lt Lm Lo
    kPunct = 0xD3,   // Pc Pd Ps Pe Pi Pf Po
    kMark = 0xD4,    // Mn Mc Me
    kSymbol = 0xD5,  // Sm Sc Sk So
    kHan = 0xD6,     // a letter that is a Han ideograph (only when asked for, see collapse())
    kSpace = 0x0B,   // non-ASCII White_Space
};

bool is_whitespace(uint32_t cp);
bool is_han(uint32_t cp);  // CJK Unified Ideographs + extensions A..F + compatibility ideographs
// Collapsed byte of one code point (ASCII code points return themselves).
uint8_t collapse(uint32_t cp, bool han);

// Text decoded into code points, with the byte offset where each starts (size n + 1).
struct Decoded {
    std::vector<uint32_t> cps;
    std::vector<uint32_t> offsets;
};
// Lenient decoding as described above (never fails; invalid bytes -> U+FFFD, one per byte).
void decode(std::string_view text, Decoded& out);
// Re-encodes the lenient decoding of `text` (so invalid bytes become EF BF BD): what llama.cpp
// tokenizes in place of text that is not valid UTF-8.
std::string normalize_invalid(std::string_view text);

}  // namespace moe::tokenizer::ucls
