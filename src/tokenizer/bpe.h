#pragma once
// Byte-level BPE (tokenizer.ggml.model = "gpt2"). Each pre-tokenizer piece is mapped byte by byte
// to the GPT-2 "bytes to unicode" alphabet (printable bytes map to themselves, the other 68 bytes to
// U+0100.. in order, so a space becomes "Ġ"), cut into those characters, and the adjacent pair with
// the lowest merge rank (index in tokenizer.ggml.merges) is merged first (ties: leftmost) until no
// pair has a rank. Each final symbol is a vocab token; if not (broken vocab), its characters are
// looked up one by one, then the unknown token is used.
//
// Speed: symbols are ids, not strings. Every string that occurs in a merge (both sides and their
// concatenation) gets an id at construction (its token id, or an id past the vocab for a string
// that is not a token), so a merge is one hash lookup of an id pair. Repeated pieces within one
// encode_pieces() call are encoded once (a cache local to the call).
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
    // (llama.cpp does this for the Llama 3 and Tekken pre-tokenizers).
    BpeModel(const Vocab& vocab, bool ignore_merges);
    // Encodes one pre-tokenizer piece (raw UTF-8 or any bytes).
    void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
    // Encodes pieces in order (same ids as encode_piece on each).
    void encode_pieces(const std::vector<std::string_view>& pieces, std::vector<int32_t>& out) const;
    // Inverse of the byte mapping for a token's text: each mapped character becomes its byte;
    // characters outside the mapping are copied unchanged.
    std::string decode_token_text(std::string_view text) const;

    // The GPT-2 byte -> character mapping (UTF-8 of the character for each byte).
    static const std::array<std::string, 256>& byte_to_char();

private:
    struct Merge {
        int32_t rank;
        int32_t result;
    };
    int32_t intern(const std::string& s);
    std::string_view text_of(int32_t id) const;
    void emit(int32_t id, std::vector<int32_t>& out) const;

    const Vocab& vocab_;
    bool ignore_merges_;
    int32_t n_vocab_;
    std::array<int32_t, 256> byte_sym_{};                     // byte -> symbol id of its character
    std::unordered_map<std::string, int32_t> extra_ids_;      // non-token strings -> id >= n_vocab_
    std::vector<std::string> extra_text_;                     // id - n_vocab_ -> string
    std::unordered_map<uint64_t, Merge> merges_;              // (left id << 32 | right id) -> merge
};

}  // namespace moe::tokenizer
