#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <optional>

#include "core/error.h"
#include "format/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/spm.h"
#include "tokenizer/utf8.h"

namespace moe::tokenizer {

namespace {

struct Fragment {
    std::string_view text;     // raw text when id == kNoToken
    int32_t id = kNoToken;     // a matched special token
};

bool is_special_type(TokenType t) {
    return t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown;
}

}  // namespace

struct Tokenizer::Impl {
    Vocab vocab;
    std::optional<SpmModel> spm;
    std::optional<BpeModel> bpe;
    std::optional<PreTokenizer> pre;
    std::vector<int32_t> specials;                     // longest text first, then lowest id
    std::array<std::vector<int32_t>, 256> by_first;    // specials indexed by their first byte

    // Leftmost-longest split of `text` into raw-text fragments and special tokens.
    std::vector<Fragment> partition(std::string_view text) const {
        std::vector<Fragment> out;
        size_t raw_start = 0;
        for (size_t pos = 0; pos < text.size();) {
            int32_t hit = kNoToken;
            for (int32_t id : by_first[static_cast<unsigned char>(text[pos])]) {
                const std::string& t = vocab.tokens[static_cast<size_t>(id)];
                if (text.compare(pos, t.size(), t) == 0) {
                    hit = id;  // by_first lists are longest first
                    break;
                }
            }
            if (hit == kNoToken) {
                ++pos;
                continue;
            }
            if (pos > raw_start) out.push_back({text.substr(raw_start, pos - raw_start), kNoToken});
            out.push_back({{}, hit});
            pos += vocab.tokens[static_cast<size_t>(hit)].size();
            raw_start = pos;
        }
        if (raw_start < text.size()) out.push_back({text.substr(raw_start), kNoToken});
        return out;
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
        const bool llama3 = v.pre == "llama3" || v.pre == "llama-bpe" || v.pre == "llama-v3";
        impl_->bpe.emplace(v, llama3);
    }
    for (size_t i = 0; i < v.size(); ++i)
        if (is_special_type(v.type_of(static_cast<int32_t>(i))) && !v.tokens[i].empty())
            impl_->specials.push_back(static_cast<int32_t>(i));
    std::stable_sort(impl_->specials.begin(), impl_->specials.end(), [&](int32_t a, int32_t b) {
        return v.tokens[static_cast<size_t>(a)].size() > v.tokens[static_cast<size_t>(b)].size();
    });
    for (int32_t id : impl_->specials)
        impl_->by_first[static_cast<unsigned char>(v.tokens[static_cast<size_t>(id)][0])].push_back(id);
}

Tokenizer Tokenizer::from_gguf(const gguf::File& file) { return Tokenizer(load_vocab(file)); }

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

const Vocab& Tokenizer::vocab() const { return impl_->vocab; }
const std::vector<int32_t>& Tokenizer::special_tokens() const { return impl_->specials; }

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& opts) const {
    const Vocab& v = impl_->vocab;
    std::vector<Fragment> frags;
    if (!text.empty()) {
        if (opts.parse_special) frags = impl_->partition(text);
        else frags.push_back({text, kNoToken});
    }
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 2);
    if (opts.add_bos && v.add_bos) out.push_back(v.bos_id);
    // SPM: a space is prefixed to the text at the start and after every special token.
    bool after_special = true;
    for (const Fragment& f : frags) {
        if (f.id != kNoToken) {
            out.push_back(f.id);
            after_special = true;
            continue;
        }
        if (impl_->spm) {
            impl_->spm->encode(f.text, v.add_space_prefix && after_special, out);
        } else {
            for (std::string_view piece : impl_->pre->split(f.text)) impl_->bpe->encode_piece(piece, out);
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
