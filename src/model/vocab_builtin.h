#pragma once
// The built-in byte-level vocabulary `moe gen` writes when no --vocab file is given: a valid
// llama.cpp "gpt2" (byte-level BPE) tokenizer with the 256 byte tokens in GPT-2's byte-to-unicode
// form (ids 0..255 = byte values), 62 merges of common English pairs, and <s> / </s> control
// tokens (BOS / EOS): 320 tokens. Real-size presets pad it with unused tokens up to their vocab.
#include <cstdint>
#include <string>
#include <vector>

namespace moe::model {

struct VocabData {
    std::string model = "gpt2";  // tokenizer.ggml.model
    std::string pre = "gpt-2";   // tokenizer.ggml.pre
    std::vector<std::string> tokens;
    std::vector<int32_t> token_types;  // 1 normal, 3 control, 5 unused
    std::vector<std::string> merges;   // "left right" in byte-to-unicode form
    uint32_t bos = 0, eos = 0;
};

int64_t builtin_vocab_size();  // 320
// GPT-2 byte-to-unicode mapping of one byte, UTF-8 encoded (e.g. ' ' -> "Ġ").
std::string byte_to_unicode(uint8_t b);
// Built-in vocabulary padded with "<unused_N>" tokens (type 5) to n_vocab (>= builtin_vocab_size();
// throws moe::Error otherwise).
VocabData builtin_vocab(int64_t n_vocab);

}  // namespace moe::model
