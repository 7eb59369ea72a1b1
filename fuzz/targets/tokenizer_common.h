#pragma once
// Encode-then-decode over arbitrary bytes, shared by tokenizer_bpe.cpp and tokenizer_spm.cpp.
// Input: byte 0 = flags (bit 0 add_bos, 1 add_eos, 2 parse_special, 3 render_special), the rest
// is the text. Properties: every id is in the vocabulary; decode() gives valid UTF-8 and equals
// what a streaming Detokenizer emits; without special tokens, decode(encode(text)) is the text
// with its invalid UTF-8 replaced by U+FFFD (for BPE after llama.cpp's one-per-byte replacement).
// SPM only promises this for valid UTF-8 without U+2581 '▁' (it reads '▁' as a space, and
// splits invalid UTF-8 by the lead byte's announced length, so a space swallowed into a broken
// character comes back as '▁'; llama.cpp does the same).
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_target.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_class.h"
#include "tokenizer/utf8.h"

namespace moe::fuzz {

inline void encode_decode(const tokenizer::Tokenizer& tok, bool spm, const uint8_t* data, size_t size) {
    if (size == 0) return;
    const uint8_t flags = data[0];
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    tokenizer::EncodeOptions eo;
    eo.add_bos = flags & 1;
    eo.add_eos = flags & 2;
    eo.parse_special = flags & 4;
    tokenizer::DecodeOptions dopt;
    dopt.render_special = flags & 8;
    expect_clean([&] {
        const std::vector<int32_t> ids = tok.encode(text, eo);
        for (int32_t id : ids) MOE_FUZZ_CHECK(tok.vocab().valid_id(id), "id ", id, " out of range");
        const std::string back = tok.decode(ids, dopt);
        MOE_FUZZ_CHECK(tokenizer::utf8::is_valid(back), "decode gave invalid UTF-8");
        tokenizer::Detokenizer stream(tok, dopt);
        std::string streamed;
        for (int32_t id : ids) streamed += stream.push(id);
        streamed += stream.flush();
        MOE_FUZZ_CHECK(streamed == back, "Detokenizer output differs from decode()");
        if (eo.parse_special || dopt.render_special) return;
        if (spm && (!tokenizer::utf8::is_valid(text) || text.find("\xE2\x96\x81") != std::string_view::npos)) return;
        // BPE pre-tokenizers read invalid UTF-8 as llama.cpp does (one U+FFFD per byte that does
        // not start a leniently well-formed sequence, unicode_class.h); decode() then replaces
        // what is still not strictly valid (e.g. encoded surrogates).
        const std::string norm = spm ? std::string(text) : tokenizer::ucls::normalize_invalid(text);
        std::string expect;
        tokenizer::utf8::sanitize_append(norm, true, expect);
        const std::vector<int32_t> plain = tok.encode(text, {.add_bos = false, .add_eos = false});
        MOE_FUZZ_CHECK(tok.decode(plain) == expect, "decode(encode(text)) != text");
    });
}

}  // namespace moe::fuzz
