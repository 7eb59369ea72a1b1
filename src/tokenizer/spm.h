#pragma once
// SentencePiece-style tokenizer (tokenizer.ggml.model = "llama"), with the semantics of
// llama.cpp's SPM vocab: spaces become U+2581 "▁", the text is cut into UTF-8 characters, and the
// adjacent pair whose concatenation is the highest-scoring vocab token is merged first (ties: the
// leftmost pair) until no pair forms a token. A final symbol that is not a token is emitted as
// byte tokens <0xXX> (byte fallback) when the vocab has them for all its bytes, else as one
// unknown token.
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace moe::tokenizer {

class SpmModel {
public:
    explicit SpmModel(const Vocab& vocab);
    // Encodes one raw-text fragment (no special tokens in it). `space_prefix` prepends one space
    // first (done by the caller's policy, see Tokenizer::encode).
    void encode(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const;
    // Id of the byte-fallback token of `b` ("<0xXX>", else the one-byte token), or kNoToken.
    int32_t byte_token(uint8_t b) const { return byte_ids_[b]; }

private:
    void emit_bytes(std::string_view s, std::vector<int32_t>& out) const;
    void encode_chunk(std::string_view escaped, std::vector<int32_t>& out) const;
    static bool is_marker_end(std::string_view text, size_t pos);
    const Vocab& vocab_;
    std::array<int32_t, 256> byte_ids_{};
    bool space_cuts_ = false;  // no token has "▁" after another character: encode word by word
};

// "▁" (U+2581), the SentencePiece space marker.
inline constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";

}  // namespace moe::tokenizer
