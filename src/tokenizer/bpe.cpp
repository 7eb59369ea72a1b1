#include "tokenizer/bpe.h"

#include "core/checked.h"
#include "core/error.h"
#include "tokenizer/merge.h"
#include "tokenizer/utf8.h"

namespace moe::tokenizer {

namespace {

std::string merge_key(std::string_view l, std::string_view r) {
    std::string k = std::to_string(l.size());
    k.push_back(':');
    k.append(l);
    k.append(r);
    return k;
}

// Code point of the byte-mapping character for byte b (GPT-2 encoder.py bytes_to_unicode).
std::array<uint32_t, 256> byte_map_cps() {
    std::array<uint32_t, 256> cp{};
    auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) cp[b] = printable(b) ? static_cast<uint32_t>(b) : next++;
    return cp;
}

// Inverse map: code point (< 0x180) -> byte, or -1.
const std::array<int16_t, 0x180>& char_to_byte() {
    static const std::array<int16_t, 0x180> inv = [] {
        std::array<int16_t, 0x180> a;
        a.fill(-1);
        const auto cp = byte_map_cps();
        for (int b = 0; b < 256; ++b) a[cp[b]] = static_cast<int16_t>(b);
        return a;
    }();
    return inv;
}

}  // namespace

const std::array<std::string, 256>& BpeModel::byte_to_char() {
    static const std::array<std::string, 256> m = [] {
        std::array<std::string, 256> s;
        const auto cp = byte_map_cps();
        for (int b = 0; b < 256; ++b) utf8::append_cp(cp[b], s[b]);
        return s;
    }();
    return m;
}

BpeModel::BpeModel(const Vocab& vocab, bool ignore_merges) : vocab_(vocab), ignore_merges_(ignore_merges) {
    ranks_.reserve(vocab.merges.size());
    for (size_t i = 0; i < vocab.merges.size(); ++i)  // a repeated merge keeps its first (best) rank
        ranks_.emplace(merge_key(vocab.merges[i].first, vocab.merges[i].second), static_cast<int32_t>(i));
}

int32_t BpeModel::rank(std::string_view left, std::string_view right) const {
    auto it = ranks_.find(merge_key(left, right));
    return it == ranks_.end() ? -1 : it->second;
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
    if (piece.empty()) return;
    const auto& map = byte_to_char();
    std::string text;
    text.reserve(piece.size() * 2);
    for (unsigned char b : piece) text += map[b];
    checked_cast<uint32_t>(text.size(), "tokenizer", "pre-tokenizer piece length");

    if (ignore_merges_) {
        const int32_t id = vocab_.find(text);
        if (id != kNoToken) {
            out.push_back(id);
            return;
        }
    }

    std::vector<detail::Symbol> sym;
    sym.reserve(piece.size());
    for (size_t pos = 0; pos < text.size();) {
        const size_t n = utf8::char_len(text, pos);  // 1 or 2 bytes: mapped chars are < U+0180
        detail::Symbol s;
        s.start = static_cast<uint32_t>(pos);
        s.len = static_cast<uint32_t>(n);
        s.prev = static_cast<int32_t>(sym.size()) - 1;
        pos += n;
        s.next = pos == text.size() ? -1 : static_cast<int32_t>(sym.size()) + 1;
        sym.push_back(s);
    }
    auto prio = [&](std::string_view l, std::string_view r) -> std::optional<double> {
        const int32_t rk = rank(l, r);
        if (rk < 0) return std::nullopt;
        return static_cast<double>(rk);
    };
    for (const auto& s : detail::merge_symbols(text, std::move(sym), prio)) {
        const std::string_view sv(text.data() + s.start, s.len);
        int32_t id = vocab_.find(sv);
        if (id != kNoToken) {
            out.push_back(id);
            continue;
        }
        for (size_t pos = 0; pos < sv.size();) {
            const size_t n = utf8::char_len(sv, pos);
            id = vocab_.find(sv.substr(pos, n));
            if (id == kNoToken) id = vocab_.unk_id;
            if (id == kNoToken)
                throw_error("tokenizer", vocab_.source, ": cannot encode '", std::string(sv.substr(pos, n)),
                            "': the BPE vocab has no token for this byte and no unknown token "
                            "(tokenizer.ggml.unknown_token_id)");
            out.push_back(id);
            pos += n;
        }
    }
}

std::string BpeModel::decode_token_text(std::string_view text) const {
    const auto& inv = char_to_byte();
    std::string out;
    out.reserve(text.size());
    size_t pos = 0, n = 0;
    while (pos < text.size()) {
        if (utf8::scan(text, pos, n) == utf8::Scan::Complete) {
            uint32_t cp;
            const auto* p = reinterpret_cast<const unsigned char*>(text.data() + pos);
            if (n == 1) cp = p[0];
            else if (n == 2) cp = ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
            else cp = 0x180;  // 3- and 4-byte characters are never mapped bytes
            if (cp < inv.size() && inv[cp] >= 0) {
                out.push_back(static_cast<char>(inv[cp]));
                pos += n;
                continue;
            }
        }
        out.append(text.data() + pos, n);
        pos += n;
    }
    return out;
}

}  // namespace moe::tokenizer
