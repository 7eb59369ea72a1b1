// Tokenizer on arbitrary bytes, byte-level BPE (gpt-2 vocab, regex pre-tokenizer); see tokenizer_common.h.
#include "fuzz/targets/tokenizer_common.h"

namespace moe::fuzz {

void tokenizer_bpe(const uint8_t* data, size_t size) { encode_decode(vocab_tokenizer(kVocabBpe), false, data, size); }

}  // namespace moe::fuzz
