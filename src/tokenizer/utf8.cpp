#include "tokenizer/utf8.h"

namespace moe::tokenizer::utf8 {

size_t char_len(std::string_view s, size_t pos) {
    const size_t n = seq_len(static_cast<unsigned char>(s[pos]));
    return n < s.size() - pos ? n : s.size() - pos;
}

Scan scan(std::string_view s, size_t pos, size_t& n) {
    const auto b0 = static_cast<unsigned char>(s[pos]);
    if (b0 < 0x80) {
        n = 1;
        return Scan::Complete;
    }
    const size_t need = seq_len(b0);
    if (need == 1) {  // continuation byte or C0/C1/F5..FF: never valid as a lead
        n = 1;
        return Scan::Invalid;
    }
    // Allowed range of the second byte (excludes overlongs, surrogates and > U+10FFFF).
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 == 0xE0) lo = 0xA0;
    else if (b0 == 0xED) hi = 0x9F;
    else if (b0 == 0xF0) lo = 0x90;
    else if (b0 == 0xF4) hi = 0x8F;
    for (size_t k = 1; k < need; ++k) {
        if (pos + k >= s.size()) {
            n = k;
            return Scan::Incomplete;
        }
        const auto b = static_cast<unsigned char>(s[pos + k]);
        const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
        if (!ok) {
            n = k;
            return Scan::Invalid;
        }
    }
    n = need;
    return Scan::Complete;
}

bool is_valid(std::string_view s) {
    size_t pos = 0, n = 0;
    while (pos < s.size()) {
        if (scan(s, pos, n) != Scan::Complete) return false;
        pos += n;
    }
    return true;
}

size_t sanitize_append(std::string_view in, bool final, std::string& out) {
    size_t pos = 0, n = 0;
    while (pos < in.size()) {
        switch (scan(in, pos, n)) {
            case Scan::Complete:
                out.append(in.data() + pos, n);
                break;
            case Scan::Invalid:
                out.append(kReplacement);
                break;
            case Scan::Incomplete:
                if (!final) return pos;
                out.append(kReplacement);
                break;
        }
        pos += n;
    }
    return pos;
}

void append_cp(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

}  // namespace moe::tokenizer::utf8
