#include "tokenizer/unicode_class.h"

#include <unicode/uchar.h>

#include "tokenizer/utf8.h"

namespace moe::tokenizer::ucls {

// White_Space (Unicode PropList.txt).
bool is_whitespace(uint32_t cp) {
    if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
    switch (cp) {
        case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
            return true;
        default:
            return cp >= 0x2000 && cp <= 0x200A;
    }
}

bool is_han(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2EBEF) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

uint8_t collapse(uint32_t cp, bool han) {
    if (cp < 0x80) return static_cast<uint8_t>(cp);
    if (is_whitespace(cp)) return kSpace;
    // ICU's general category (Debian libicu); folded into the classes the regexes use.
    switch (u_charType(static_cast<UChar32>(cp))) {
        case U_UPPERCASE_LETTER:
        case U_LOWERCASE_LETTER:
        case U_TITLECASE_LETTER:
        case U_MODIFIER_LETTER:
        case U_OTHER_LETTER:
            return han && is_han(cp) ? kHan : kLetter;
        case U_NON_SPACING_MARK:
        case U_ENCLOSING_MARK:
        case U_COMBINING_SPACING_MARK:
            return kMark;
        case U_DECIMAL_DIGIT_NUMBER:
        case U_LETTER_NUMBER:
        case U_OTHER_NUMBER:
            return kNumber;
        case U_DASH_PUNCTUATION:
        case U_START_PUNCTUATION:
        case U_END_PUNCTUATION:
        case U_CONNECTOR_PUNCTUATION:
        case U_OTHER_PUNCTUATION:
        case U_INITIAL_PUNCTUATION:
        case U_FINAL_PUNCTUATION:
            return kPunct;
        case U_MATH_SYMBOL:
        case U_CURRENCY_SYMBOL:
        case U_MODIFIER_SYMBOL:
        case U_OTHER_SYMBOL:
            return kSymbol;
        default:
            return kOther;
    }
}

namespace {

// One code point at text[pos] by llama.cpp's lenient rules; n = bytes consumed.
uint32_t decode_one(std::string_view s, size_t pos, size_t& n) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
    const size_t left = s.size() - pos;
    const unsigned char b0 = p[0];
    n = 1;
    if (b0 < 0x80) return b0;
    auto cont = [&](size_t k) { return k < left && (p[k] & 0xC0) == 0x80; };
    if ((b0 & 0x40) == 0) return 0xFFFD;  // continuation byte as lead
    if ((b0 & 0x20) == 0) {
        if (!cont(1)) return 0xFFFD;
        n = 2;
        return ((b0 & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    }
    if ((b0 & 0x10) == 0) {
        if (!cont(1) || !cont(2)) return 0xFFFD;
        n = 3;
        return ((b0 & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    }
    if ((b0 & 0x08) == 0) {
        if (!cont(1) || !cont(2) || !cont(3)) return 0xFFFD;
        const uint32_t cp = ((b0 & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
        if (cp > 0x10FFFF) return 0xFFFD;  // llama.cpp fails on these; we take one byte as U+FFFD
        n = 4;
        return cp;
    }
    return 0xFFFD;
}

}  // namespace

void decode(std::string_view text, Decoded& out) {
    out.cps.clear();
    out.offsets.clear();
    out.cps.reserve(text.size());
    out.offsets.reserve(text.size() + 1);
    size_t pos = 0;
    while (pos < text.size()) {
        const auto c = static_cast<unsigned char>(text[pos]);
        out.offsets.push_back(static_cast<uint32_t>(pos));
        if (c < 0x80) {  // ASCII fast path
            out.cps.push_back(c);
            ++pos;
            continue;
        }
        size_t n = 1;
        out.cps.push_back(decode_one(text, pos, n));
        pos += n;
    }
    out.offsets.push_back(static_cast<uint32_t>(text.size()));
}

std::string normalize_invalid(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 8);
    size_t pos = 0;
    while (pos < text.size()) {
        size_t n = 1;
        const uint32_t cp = decode_one(text, pos, n);
        if (cp >= 0xD800 && cp <= 0xDFFF) {  // a surrogate: written as three bytes, as llama.cpp does
            out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else {
            utf8::append_cp(cp, out);
        }
        pos += n;
    }
    return out;
}

}  // namespace moe::tokenizer::ucls
