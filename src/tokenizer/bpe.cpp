#include "tokenizer/bpe.h"

#include <algorithm>

#include "core/checked.h"
#include "core/error.h"
#include "tokenizer/utf8.h"

namespace moe::tokenizer {

namespace {

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

BpeModel::BpeModel(const Vocab& vocab, bool ignore_merges)
    : vocab_(vocab), ignore_merges_(ignore_merges), n_vocab_(static_cast<int32_t>(vocab.size())) {
    const auto& map = byte_to_char();
    for (int b = 0; b < 256; ++b) byte_sym_[b] = intern(map[b]);
    merges_.reserve(vocab.merges.size());
    std::string joined;
    for (size_t i = 0; i < vocab.merges.size(); ++i) {
        const auto& [l, r] = vocab.merges[i];
        const int32_t lid = intern(l), rid = intern(r);
        joined.assign(l).append(r);
        const int32_t res = intern(joined);
        // A repeated merge keeps its first (best) rank.
        merges_.emplace((static_cast<uint64_t>(lid) << 32) | static_cast<uint32_t>(rid),
                        Merge{static_cast<int32_t>(i), res});
    }
}

int32_t BpeModel::intern(const std::string& s) {
    const int32_t id = vocab_.find(s);
    if (id != kNoToken) return id;
    auto [it, inserted] = extra_ids_.emplace(s, n_vocab_ + static_cast<int32_t>(extra_text_.size()));
    if (inserted) extra_text_.push_back(s);
    return it->second;
}

std::string_view BpeModel::text_of(int32_t id) const {
    return id < n_vocab_ ? std::string_view(vocab_.tokens[static_cast<size_t>(id)])
                         : std::string_view(extra_text_[static_cast<size_t>(id - n_vocab_)]);
}

// A final symbol: its token, or (a string that is not a token: broken vocab) its characters one
// by one, then the unknown token.
void BpeModel::emit(int32_t id, std::vector<int32_t>& out) const {
    if (id < n_vocab_) {
        out.push_back(id);
        return;
    }
    const std::string_view sv = text_of(id);
    for (size_t pos = 0; pos < sv.size();) {
        const size_t n = utf8::char_len(sv, pos);
        int32_t t = vocab_.find(sv.substr(pos, n));
        if (t == kNoToken) t = vocab_.unk_id;
        if (t == kNoToken)
            throw_error("tokenizer", vocab_.source, ": cannot encode '", std::string(sv.substr(pos, n)),
                        "': the BPE vocab has no token for this byte and no unknown token "
                        "(tokenizer.ggml.unknown_token_id)");
        out.push_back(t);
        pos += n;
    }
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
    if (piece.empty()) return;
    checked_cast<uint32_t>(piece.size(), "tokenizer", "pre-tokenizer piece length");
    if (ignore_merges_) {
        const auto& map = byte_to_char();
        std::string text;
        text.reserve(piece.size() * 2);
        for (unsigned char b : piece) text += map[b];
        const int32_t id = vocab_.find(text);
        if (id != kNoToken) {
            out.push_back(id);
            return;
        }
    }
    // Symbols: one per byte (each byte's character), linked; candidates in a min-heap by
    // (rank, left position); a candidate is stale when either side changed since it was queued.
    struct Sym {
        int32_t id, prev, next;
    };
    struct Cand {
        int32_t rank, left, right, lid, rid, result;
    };
    struct Worse {
        bool operator()(const Cand& a, const Cand& b) const {
            return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
        }
    };
    const auto n = static_cast<int32_t>(piece.size());
    std::vector<Sym> sym(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i)
        sym[i] = Sym{byte_sym_[static_cast<unsigned char>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1};
    std::vector<Cand> heap;
    heap.reserve(static_cast<size_t>(n));
    auto try_add = [&](int32_t l, int32_t r) {
        if (l < 0 || r < 0) return;
        const auto it = merges_.find((static_cast<uint64_t>(sym[l].id) << 32) | static_cast<uint32_t>(sym[r].id));
        if (it == merges_.end()) return;
        heap.push_back(Cand{it->second.rank, l, r, sym[l].id, sym[r].id, it->second.result});
        std::push_heap(heap.begin(), heap.end(), Worse{});
    };
    for (int32_t i = 1; i < n; ++i) try_add(i - 1, i);
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), Worse{});
        const Cand c = heap.back();
        heap.pop_back();
        Sym& l = sym[c.left];
        if (l.id != c.lid || l.next != c.right || sym[c.right].id != c.rid) continue;  // stale
        Sym& r = sym[c.right];
        l.id = c.result;
        l.next = r.next;
        r.id = -1;  // merged away
        if (r.next >= 0) sym[r.next].prev = c.left;
        try_add(l.prev, c.left);
        try_add(c.left, l.next);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) emit(sym[i].id, out);
}

void BpeModel::encode_pieces(const std::vector<std::string_view>& pieces, std::vector<int32_t>& out) const {
    if (pieces.size() < 64) {  // short prompts: no cache
        for (std::string_view p : pieces) encode_piece(p, out);
        return;
    }
    // Long texts repeat most words: remember each short piece's ids (a range of `out`).
    std::unordered_map<std::string_view, std::pair<size_t, size_t>> cache;
    cache.reserve(pieces.size() / 4);
    for (std::string_view p : pieces) {
        if (p.size() > 32) {
            encode_piece(p, out);
            continue;
        }
        const auto it = cache.find(p);
        if (it != cache.end()) {
            const auto [begin, len] = it->second;
            for (size_t k = 0; k < len; ++k) out.push_back(out[begin + k]);
            continue;
        }
        const size_t begin = out.size();
        encode_piece(p, out);
        cache.emplace(p, std::make_pair(begin, out.size() - begin));
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
