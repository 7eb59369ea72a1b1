// Built-in byte-level BPE vocabulary (see vocab_builtin.h).
#include "model/vocab_builtin.h"

#include <set>
#include <utility>

#include "core/error.h"

namespace moe::model {
namespace {

// Merges as (left, right) raw byte strings; each side must already be a token when its merge is
// added, and the merged string becomes the next token.
const std::pair<const char*, const char*> kMerges[] = {
    {" ", "t"}, {" ", "a"}, {"h", "e"}, {"i", "n"}, {"r", "e"}, {"o", "n"}, {" t", "he"}, {"e", "r"},
    {" ", "s"}, {"a", "t"}, {" ", "w"}, {" ", "o"}, {"e", "n"}, {" ", "c"}, {"i", "t"}, {"i", "s"},
    {"a", "n"}, {"o", "r"}, {"e", "s"}, {" ", "b"}, {"e", "d"}, {" ", "f"}, {"in", "g"}, {" ", "p"},
    {"o", "u"}, {" a", "n"}, {"a", "l"}, {"a", "r"}, {" t", "o"}, {" ", "m"}, {" o", "f"}, {" ", "in"},
    {" ", "d"}, {" ", "h"}, {" an", "d"}, {"i", "c"}, {"a", "s"}, {"l", "e"}, {" t", "h"}, {"i", "on"},
    {"o", "m"}, {"l", "l"}, {"en", "t"}, {" ", "n"}, {" ", "l"}, {"s", "t"}, {" ", "re"}, {"v", "e"},
    {" ", "e"}, {"r", "o"}, {"l", "y"}, {" b", "e"}, {" ", "g"}, {" ", "T"}, {"c", "t"}, {" ", "S"},
    {"i", "d"}, {"o", "t"}, {" ", "I"}, {"u", "t"}, {"e", "t"}, {" ", "A"},
};
constexpr int kNumMerges = sizeof(kMerges) / sizeof(kMerges[0]);
static_assert(kNumMerges == 62, "builtin vocab is 256 bytes + 62 merges + 2 specials = 320");

std::string utf8(uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

std::string to_unicode(const std::string& raw) {
    std::string s;
    for (unsigned char c : raw) s += byte_to_unicode(c);
    return s;
}

}  // namespace

int64_t builtin_vocab_size() { return 256 + kNumMerges + 2; }

std::string byte_to_unicode(uint8_t b) {
    // GPT-2: printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) map to themselves; the other 68
    // bytes map, in increasing byte order, to U+0100, U+0101, ...
    auto printable = [](int x) { return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255); };
    if (printable(b)) return utf8(b);
    uint32_t n = 0;
    for (int x = 0; x < b; ++x)
        if (!printable(x)) ++n;
    return utf8(256 + n);
}

VocabData builtin_vocab(int64_t n_vocab) {
    if (n_vocab < builtin_vocab_size())
        throw_error("gen", "vocabulary size ", n_vocab, " is smaller than the built-in vocabulary (", builtin_vocab_size(),
                    " tokens)");
    VocabData v;
    std::set<std::string> known;
    for (int b = 0; b < 256; ++b) {
        v.tokens.push_back(byte_to_unicode(static_cast<uint8_t>(b)));
        v.token_types.push_back(1);
        known.insert(v.tokens.back());
    }
    for (const auto& [l, r] : kMerges) {
        const std::string left = to_unicode(l), right = to_unicode(r), merged = left + right;
        MOE_ASSERT(known.count(left) && known.count(right) && !known.count(merged), "bad builtin merge ", l, "+", r);
        v.merges.push_back(left + " " + right);
        v.tokens.push_back(merged);
        v.token_types.push_back(1);
        known.insert(merged);
    }
    v.bos = static_cast<uint32_t>(v.tokens.size());
    v.tokens.push_back("<s>");
    v.token_types.push_back(3);
    v.eos = static_cast<uint32_t>(v.tokens.size());
    v.tokens.push_back("</s>");
    v.token_types.push_back(3);
    for (int64_t i = static_cast<int64_t>(v.tokens.size()); i < n_vocab; ++i) {
        v.tokens.push_back("<unused_" + std::to_string(i) + ">");
        v.token_types.push_back(5);
    }
    return v;
}

}  // namespace moe::model
