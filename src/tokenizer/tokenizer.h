#pragma once
// Tokenizer facade: text <-> token ids for a vocabulary read from GGUF metadata (docs/TOKENIZER.md).
//
//   auto tok = Tokenizer::from_gguf(gguf::File::open(path));
//   std::vector<int32_t> ids = tok.encode("Hello");               // BOS if the vocab says so
//   std::string text = tok.decode(ids);                           // valid UTF-8
//   Detokenizer stream(tok); for (id : ids) out += stream.push(id); out += stream.flush();
//
// User-defined tokens are always recognised in the input text (as llama.cpp and HF tokenizers
// do); control and unknown tokens only with EncodeOptions::parse_special, otherwise text such as
// "<|endoftext|>" is ordinary text.
// All methods are const and safe to call from several threads at once.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace moe::gguf {
class File;
}

namespace moe::tokenizer {

struct EncodeOptions {
    bool add_bos = true;         // prepend BOS when the vocab's add_bos_token says so
    bool add_eos = true;         // append EOS when the vocab's add_eos_token says so
    bool parse_special = false;  // also match control/unknown token texts (user-defined: always)
};

struct DecodeOptions {
    bool render_special = false;       // print the text of control/unknown tokens (else nothing)
    bool strip_leading_space = true;   // SPM with add_space_prefix: drop the space encode() added
    // llama.cpp's clean-up for the families that use it (Tokenizer::cleans_spaces(): BPE vocabs
    // whose pre-tokenizer has clean_spaces): drop a space before ? ! . , and before 's 'm 're 've,
    // and the spaces around a lone '. Changes the text (not lossless), so opt-in; decode() only.
    bool clean_spaces = false;
};

class Tokenizer {
public:
    // Validates the vocab (Vocab::finalize) and builds the model. Throws moe::Error("tokenizer").
    explicit Tokenizer(Vocab vocab);
    static Tokenizer from_gguf(const gguf::File& file);
    ~Tokenizer();
    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;

    const Vocab& vocab() const;
    // Whether the vocab's family uses llama.cpp's clean_spaces (see DecodeOptions::clean_spaces).
    bool cleans_spaces() const;
    size_t size() const { return vocab().size(); }

    std::vector<int32_t> encode(std::string_view text, const EncodeOptions& opts = {}) const;
    // Concatenated pieces, made valid UTF-8 (invalid bytes -> U+FFFD). Equal to what a Detokenizer
    // with the same options emits for the same ids. Throws moe::Error for an id out of range.
    std::string decode(const std::vector<int32_t>& ids, const DecodeOptions& opts = {}) const;
    // Raw bytes of one token (may be part of a UTF-8 character, e.g. a byte token). Control and
    // unknown tokens give "" unless render_special. Throws moe::Error for an id out of range.
    std::string token_to_piece(int32_t id, bool render_special = false) const;

    // Ids of the special tokens encode() can match (user-defined always, control and unknown with
    // parse_special), longest text first.
    const std::vector<int32_t>& special_tokens() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Streaming decode: push ids one at a time, get back only complete UTF-8 characters. Bytes of a
// character split across tokens are held until it completes; a sequence that cannot complete
// becomes U+FFFD as soon as that is certain, and a held incomplete tail becomes U+FFFD at flush().
class Detokenizer {
public:
    // Keeps a pointer to `tok`: the Tokenizer must outlive the Detokenizer and stay in place.
    explicit Detokenizer(const Tokenizer& tok, DecodeOptions opts = {});
    std::string push(int32_t id);
    std::string flush();
    void reset();  // start a new sequence (leading-space rule applies again)

private:
    const Tokenizer* tok_;
    DecodeOptions opts_;
    std::string pending_;
    bool at_start_ = true;
};

}  // namespace moe::tokenizer
