#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <optional>

#include "core/checked.h"
#include "core/error.h"
#include "format/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/spm.h"
#include "tokenizer/unicode_class.h"
#include "tokenizer/utf8.h"

namespace moe::tokenizer {

namespace {

struct Fragment {
    uint32_t off = 0, len = 0;  // raw text [off, off + len) when id == kNoToken
    int32_t id = kNoToken;      // a matched special token
};

bool is_special_type(TokenType t) {
    return t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown;
}

// llama.cpp's three clean-up passes (detokenize with clean_spaces), each over the previous result.
std::string clean_up_spaces(std::string t) {
    auto pass = [](const std::string& in, auto&& keep_prev_space) {
        std::string out;
        out.reserve(in.size());
        for (size_t i = 0; i < in.size(); ++i) {
            if (i > 0 && in[i - 1] == ' ' && !keep_prev_space(in, i) && !out.empty()) out.pop_back();
            out.push_back(in[i]);
        }
        return out;
    };
    // 1: " ?" " !" " ." " ," lose the space.
    t = pass(t, [](const std::string& in, size_t i) {
        const char x = in[i];
        return !(x == '?' || x == '!' || x == '.' || x == ',');
    });
    // 2: " ' " becomes "'" (the space after it is skipped, and then no longer counts as a space
    // before the next character).
    {
        std::string in = t, out;
        for (size_t i = 0; i < in.size(); ++i) {
            if (i > 0 && in[i] == '\'' && i + 1 < in.size() && in[i - 1] == ' ' && in[i + 1] == ' ') {
                out.pop_back();
                out.push_back('\'');
                in[++i] = '\0';
                continue;
            }
            out.push_back(in[i]);
        }
        t = out;
    }
    // 3: " 's" " 'm" " 're" " 've" lose the space (" 't" " 'd" " 'll" keep it).
    return pass(t, [](const std::string& in, size_t i) {
        if (in[i] != '\'' || i + 1 >= in.size()) return true;
        const char x1 = in[i + 1];
        if (x1 == 's' || x1 == 'm') return false;
        if (i + 2 < in.size()) {
            const char x2 = in[i + 2];
            if ((x1 == 'r' || x1 == 'v') && x2 == 'e') return false;
        }
        return true;
    });
}

bool is_c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

}  // namespace

struct Tokenizer::Impl {
    Vocab vocab;
    std::optional<SpmModel> spm;
    std::optional<BpeModel> bpe;
    std::optional<PreTokenizer> pre;
    std::vector<int32_t> specials;  // longest text first, then lowest id

    // Splits `text` into raw fragments and special tokens as llama.cpp does: each special token in
    // turn (longest first) is cut out of every raw fragment at all its occurrences, so a longer
    // token wins over a shorter one wherever they overlap. User-defined tokens are always matched;
    // control and unknown tokens only with parse_special. A token with strip flags also removes
    // whitespace on that side from its neighbour fragment.
    std::vector<Fragment> partition(std::string_view text, bool parse_special) const {
        std::vector<Fragment> frags{{0, static_cast<uint32_t>(text.size()), kNoToken}}, next;
        for (int32_t id : specials) {
            const TokenType t = vocab.type_of(id);
            if (!parse_special && t != TokenType::UserDefined) continue;
            const std::string& tok = vocab.tokens[static_cast<size_t>(id)];
            const uint8_t strip = vocab.strip_of(id);
            next.clear();
            bool any = false;
            for (const Fragment& f : frags) {
                if (f.id != kNoToken) {
                    next.push_back(f);
                    continue;
                }
                uint32_t off = f.off, len = f.len;
                while (len > 0) {
                    const size_t m = text.substr(0, off + len).find(tok, off);
                    if (m == std::string_view::npos) break;
                    any = true;
                    uint32_t left_len = static_cast<uint32_t>(m) - off;
                    if (strip & kStripLeft)
                        while (left_len > 0 && is_c_space(text[off + left_len - 1])) --left_len;
                    if (left_len > 0) next.push_back({off, left_len, kNoToken});
                    next.push_back({0, 0, id});
                    uint32_t r_off = static_cast<uint32_t>(m + tok.size());
                    uint32_t r_len = off + len - r_off;
                    if (strip & kStripRight)
                        while (r_len > 0 && is_c_space(text[r_off])) ++r_off, --r_len;
                    off = r_off;
                    len = r_len;
                }
                if (len > 0) next.push_back({off, len, kNoToken});
            }
            if (any) frags.swap(next);
        }
        return frags;
    }
};

Tokenizer::Tokenizer(Vocab vocab) : impl_(std::make_unique<Impl>()) {
    impl_->vocab = std::move(vocab);
    Vocab& v = impl_->vocab;
    v.finalize();
    if (v.type == ModelType::Spm) {
        impl_->spm.emplace(v);
    } else {
        if (v.pre.empty()) v.pre = "default";
        impl_->pre.emplace(v.pre);
        impl_->bpe.emplace(v, impl_->pre->info().ignore_merges);
    }
    for (size_t i = 0; i < v.size(); ++i)
        if (is_special_type(v.type_of(static_cast<int32_t>(i))) && !v.tokens[i].empty())
            impl_->specials.push_back(static_cast<int32_t>(i));
    std::stable_sort(impl_->specials.begin(), impl_->specials.end(), [&](int32_t a, int32_t b) {
        return v.tokens[static_cast<size_t>(a)].size() > v.tokens[static_cast<size_t>(b)].size();
    });
}

Tokenizer Tokenizer::from_gguf(const gguf::File& file) { return Tokenizer(load_vocab(file)); }

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

const Vocab& Tokenizer::vocab() const { return impl_->vocab; }
bool Tokenizer::cleans_spaces() const { return impl_->pre && impl_->pre->info().clean_spaces; }
const std::vector<int32_t>& Tokenizer::special_tokens() const { return impl_->specials; }

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& opts) const {
    const Vocab& v = impl_->vocab;
    checked_cast<uint32_t>(text.size(), "tokenizer", "text length");
    std::vector<Fragment> frags;
    if (!text.empty()) frags = impl_->partition(text, opts.parse_special);
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 2);
    if (opts.add_bos && v.add_bos) out.push_back(v.bos_id);
    // SPM: a space is prefixed to the text at the start and after every special token.
    bool after_special = true;
    std::string fixed;
    for (const Fragment& f : frags) {
        if (f.id != kNoToken) {
            out.push_back(f.id);
            after_special = true;
            continue;
        }
        std::string_view raw = text.substr(f.off, f.len);
        if (impl_->spm) {
            impl_->spm->encode(raw, v.add_space_prefix && after_special, out);
        } else {
            // Byte-level BPE sees code points: bytes that are not UTF-8 become U+FFFD (as in llama.cpp).
            if (!utf8::is_valid(raw)) {
                fixed = ucls::normalize_invalid(raw);
                raw = fixed;
            }
            impl_->bpe->encode_pieces(impl_->pre->split(raw), out);
        }
        after_special = false;
    }
    if (opts.add_eos && v.add_eos) out.push_back(v.eos_id);
    return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
    const Vocab& v = impl_->vocab;
    if (!v.valid_id(id))
        throw_error("tokenizer", "token id ", id, " is out of range (the vocab has ", v.size(), " tokens, ids 0..",
                    v.size() - 1, ")");
    const std::string& text = v.tokens[static_cast<size_t>(id)];
    switch (v.type_of(id)) {
        case TokenType::Control:
        case TokenType::Unknown:
            return render_special ? text : std::string();
        case TokenType::UserDefined:
            return text;
        case TokenType::Byte: {
            // "<0xXX>"
            if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>') {
                auto hexval = [](char c) -> int {
                    if (c >= '0' && c <= '9') return c - '0';
                    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
                    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
                    return -1;
                };
                const int hi = hexval(text[3]), lo = hexval(text[4]);
                if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
            }
            return text;  // a byte token with another spelling: its text is the byte(s)
        }
        case TokenType::Normal: {
            if (impl_->bpe) return impl_->bpe->decode_token_text(text);
            std::string out;
            out.reserve(text.size());
            for (size_t pos = 0; pos < text.size();) {
                if (text.compare(pos, kSpaceMarker.size(), kSpaceMarker) == 0) {
                    out.push_back(' ');
                    pos += kSpaceMarker.size();
                } else {
                    out.push_back(text[pos++]);
                }
            }
            return out;
        }
        case TokenType::Unused:
        case TokenType::Undefined:
            return std::string();
    }
    return std::string();
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, const DecodeOptions& opts) const {
    Detokenizer d(*this, opts);
    std::string out;
    for (int32_t id : ids) out += d.push(id);
    out += d.flush();
    if (opts.clean_spaces && cleans_spaces()) out = clean_up_spaces(std::move(out));
    return out;
}

Detokenizer::Detokenizer(const Tokenizer& tok, DecodeOptions opts) : tok_(&tok), opts_(opts) {}

std::string Detokenizer::push(int32_t id) {
    std::string piece = tok_->token_to_piece(id, opts_.render_special);
    if (at_start_ && !piece.empty()) {
        if (opts_.strip_leading_space && tok_->vocab().add_space_prefix && piece[0] == ' ') piece.erase(0, 1);
        at_start_ = false;
    }
    pending_ += piece;
    std::string out;
    const size_t used = utf8::sanitize_append(pending_, /*final=*/false, out);
    pending_.erase(0, used);
    return out;
}

std::string Detokenizer::flush() {
    std::string out;
    utf8::sanitize_append(pending_, /*final=*/true, out);
    pending_.clear();
    return out;
}

void Detokenizer::reset() {
    pending_.clear();
    at_start_ = true;
}

}  // namespace moe::tokenizer
