// The detokenizer's UTF-8 streaming, two ways. Byte 0 selects:
//  bit 0 = 0: raw bytes through utf8::sanitize_append in chunks (chunk lengths from bytes 1..),
//             as Detokenizer holds an incomplete character between tokens; the concatenation
//             must equal sanitizing the whole input at once, and every chunk's output is valid UTF-8;
//  bit 0 = 1: token ids (u16 little-endian pairs, modulo the vocabulary) pushed into a Detokenizer
//             of the gpt-2 (bit 1 = 0) or llama-spm (bit 1 = 1) vocabulary, with a reset() at the
//             position byte 1 gives; each push() gives valid UTF-8 and each sequence's pushes +
//             flush() equal Tokenizer::decode of that sequence.
#include <string>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace moe::fuzz {
namespace {

namespace utf8 = tokenizer::utf8;

void raw_stream(const uint8_t* data, size_t size) {
    // Chunk lengths 1..8 come from the low bits of the first 8 bytes of the payload, cycled.
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    std::string whole;
    utf8::sanitize_append(in, true, whole);
    MOE_FUZZ_CHECK(utf8::is_valid(whole), "sanitize_append gave invalid UTF-8");
    std::string streamed, held;
    size_t pos = 0, k = 0;
    while (pos < in.size()) {
        const size_t n = std::min<size_t>(1 + (data[k++ % std::min<size_t>(size, 8)] & 7), in.size() - pos);
        held.append(in.substr(pos, n));
        pos += n;
        std::string out;
        const size_t used = utf8::sanitize_append(held, false, out);
        MOE_FUZZ_CHECK(used <= held.size() && held.size() - used < 4, "kept ", held.size() - used, " bytes");
        MOE_FUZZ_CHECK(utf8::is_valid(out), "chunk output is invalid UTF-8");
        streamed += out;
        held.erase(0, used);
    }
    utf8::sanitize_append(held, true, streamed);
    MOE_FUZZ_CHECK(streamed == whole, "chunked sanitize differs from the whole-input result");
}

void id_stream(const tokenizer::Tokenizer& tok, bool render_special, size_t split, const uint8_t* data, size_t size) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i + 1 < size; i += 2)
        ids.push_back(static_cast<int32_t>((data[i] | (data[i + 1] << 8)) % tok.size()));
    split = std::min(split, ids.size());
    tokenizer::DecodeOptions opt;
    opt.render_special = render_special;
    tokenizer::Detokenizer stream(tok, opt);
    const std::vector<int32_t> first(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(split));
    const std::vector<int32_t> second(ids.begin() + static_cast<std::ptrdiff_t>(split), ids.end());
    for (const auto* seq : {&first, &second}) {
        std::string out;
        for (int32_t id : *seq) {
            const std::string piece = stream.push(id);
            MOE_FUZZ_CHECK(utf8::is_valid(piece), "push(", id, ") gave invalid UTF-8");
            out += piece;
        }
        out += stream.flush();
        MOE_FUZZ_CHECK(out == tok.decode(*seq, opt), "streamed text differs from decode()");
        stream.reset();
    }
}

}  // namespace

void detokenizer(const uint8_t* data, size_t size) {
    if (size < 2) return;
    const uint8_t mode = data[0];
    expect_clean([&] {
        if (!(mode & 1)) return raw_stream(data + 1, size - 1);
        const tokenizer::Tokenizer& tok = vocab_tokenizer(mode & 2 ? kVocabSpm : kVocabBpe);
        id_stream(tok, mode & 4, data[1], data + 2, size - 2);
    });
}

}  // namespace moe::fuzz
