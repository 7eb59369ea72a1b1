// Tokenizer on arbitrary bytes, SentencePiece (llama vocab, byte fallback); see tokenizer_common.h.
#include "fuzz/targets/tokenizer_common.h"

namespace moe::fuzz {

void tokenizer_spm(const uint8_t* data, size_t size) { encode_decode(vocab_tokenizer(kVocabSpm), true, data, size); }

}  // namespace moe::fuzz
