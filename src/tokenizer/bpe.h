#pragma once
// Byte-level BPE (tokenizer.ggml.model = "gpt2"). Each pre-tokenizer piece is mapped byte by byte
// to the GPT-2 "bytes to unicode" alphabet (printable bytes map to themselves, the other 68 bytes to
// U+0100.. in order, so a space becomes "Ġ"), cut into those characters, and the adjacent pair with
// the lowest merge rank (index in tokenizer.ggml.merges) is merged first (ties: leftmost) until no
// pair has a rank. Each final symbol is a vocab token; if not (broken vocab), its characters are
// looked up one by one, then the unknown token is used.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace moe::tokenizer {

class BpeModel {
public:
    // `ignore_merges`: a piece that is itself a vocab token is emitted whole without merging
    // (llama.cpp does this for the Llama 3 pre-tokenizer).
    BpeModel(const Vocab& vocab, bool ignore_merges);
    // Encodes one pre-tokenizer piece (raw UTF-8 or any bytes).
    void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
    // Inverse of the byte mapping for a token's text: each mapped character becomes its byte;
    // characters outside the mapping are copied unchanged.
    std::string decode_token_text(std::string_view text) const;

    // The GPT-2 byte -> character mapping (UTF-8 of the character for each byte).
    static const std::array<std::string, 256>& byte_to_char();

private:
    int32_t rank(std::string_view left, std::string_view right) const;
    const Vocab& vocab_;
    bool ignore_merges_;
    // Merge key: decimal length of the left side, ':', left, right (unambiguous for any bytes).
    std::unordered_map<std::string, int32_t, Vocab::TextHash, std::equal_to<>> ranks_;
};

}  // namespace moe::tokenizer
