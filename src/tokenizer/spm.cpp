#include "tokenizer/spm.h"

#include <string>
#include <unordered_map>

#include "core/checked.h"
#include "core/error.h"
#include "tokenizer/merge.h"
#include "tokenizer/utf8.h"

namespace moe::tokenizer {

SpmModel::SpmModel(const Vocab& vocab) : vocab_(vocab) {
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        const char name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
        int32_t id = vocab_.find(name);
        if (id == kNoToken) id = vocab_.find(std::string(1, static_cast<char>(b)));
        byte_ids_[b] = id;
    }
    // Can a token contain "▁" right after another character (other than "▁")? If not, merges
    // never cross such a "▁" and encode() may work word by word.
    space_cuts_ = true;
    for (const std::string& t : vocab.tokens)
        for (size_t pos = t.find(kSpaceMarker, 1); pos != std::string::npos && space_cuts_;
             pos = t.find(kSpaceMarker, pos + 1))
            if (!is_marker_end(t, pos)) space_cuts_ = false;
}

void SpmModel::emit_bytes(std::string_view s, std::vector<int32_t>& out) const {
    bool all_bytes = true;
    for (unsigned char b : s) all_bytes = all_bytes && byte_ids_[b] != kNoToken;
    if (all_bytes) {
        for (unsigned char b : s) out.push_back(byte_ids_[b]);
        return;
    }
    // No byte fallback for this character: one unknown token for it (as SentencePiece does).
    if (vocab_.unk_id == kNoToken)
        throw_error("tokenizer", vocab_.source, ": cannot encode '", std::string(s),
                    "': the vocab has neither byte tokens (<0xXX>) for it nor an unknown token "
                    "(tokenizer.ggml.unknown_token_id)");
    out.push_back(vocab_.unk_id);
}

void SpmModel::encode(std::string_view raw, bool space_prefix, std::vector<int32_t>& out) const {
    // Escape spaces: ' ' -> "▁".
    std::string text;
    text.reserve(raw.size() + raw.size() / 4 + 3);
    if (space_prefix) text += kSpaceMarker;
    for (char c : raw) {
        if (c == ' ') text += kSpaceMarker;
        else text.push_back(c);
    }
    if (text.empty()) return;
    checked_cast<uint32_t>(text.size(), "tokenizer", "text length");

    if (!space_cuts_ || text.size() < 256) {
        encode_chunk(text, out);
        return;
    }
    // Merges never cross a "▁" that follows another character (no token contains one, checked at
    // construction), so the text is encoded word by word with the same result, and repeated words
    // are encoded once (a cache local to this call).
    std::unordered_map<std::string_view, std::pair<size_t, size_t>> cache;
    const std::string_view all(text);
    size_t start = 0;
    auto flush = [&](size_t end) {
        const std::string_view w = all.substr(start, end - start);
        start = end;
        if (w.size() > 64) return encode_chunk(w, out);
        const auto it = cache.find(w);
        if (it != cache.end()) {
            for (size_t k = 0; k < it->second.second; ++k) out.push_back(out[it->second.first + k]);
            return;
        }
        const size_t begin = out.size();
        encode_chunk(w, out);
        cache.emplace(w, std::make_pair(begin, out.size() - begin));
    };
    for (size_t pos = 1; pos + kSpaceMarker.size() <= all.size(); ++pos)
        if (all.compare(pos, kSpaceMarker.size(), kSpaceMarker) == 0 && !is_marker_end(all, pos)) flush(pos);
    flush(all.size());
}

// True when the bytes just before `pos` are a "▁" (then a "▁" at pos may continue a token).
bool SpmModel::is_marker_end(std::string_view text, size_t pos) {
    return pos >= kSpaceMarker.size() && text.compare(pos - kSpaceMarker.size(), kSpaceMarker.size(), kSpaceMarker) == 0;
}

void SpmModel::encode_chunk(std::string_view text, std::vector<int32_t>& out) const {
    std::vector<detail::Symbol> sym;
    sym.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const size_t n = utf8::char_len(text, pos);
        detail::Symbol s;
        s.start = static_cast<uint32_t>(pos);
        s.len = static_cast<uint32_t>(n);
        s.prev = static_cast<int32_t>(sym.size()) - 1;
        pos += n;
        s.next = pos == text.size() ? -1 : static_cast<int32_t>(sym.size()) + 1;
        sym.push_back(s);
    }
    // Adjacent symbols are adjacent in `text`, so their concatenation is a view (no copy).
    auto prio = [&](std::string_view l, std::string_view r) -> std::optional<float> {
        const int32_t id = vocab_.find(std::string_view(l.data(), l.size() + r.size()));
        if (id == kNoToken) return std::nullopt;
        return -vocab_.score(id);  // higher score merges first
    };
    for (const auto& s : detail::merge_symbols(text, std::move(sym), prio)) {
        const std::string_view piece(text.data() + s.start, s.len);
        const int32_t id = vocab_.find(piece);
        if (id != kNoToken) out.push_back(id);
        else emit_bytes(piece, out);
    }
}

}  // namespace moe::tokenizer
