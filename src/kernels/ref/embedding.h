#pragma once
// Token embedding lookup: out[t, :] = f32(table[ids[t], :]). The table is [n_vocab rows of n_embd]
// (GGUF token_embd.weight, ne = {n_embd, n_vocab}) in F32, F16 or BF16. One row copy per token,
// so there is no separate fast path.
#include <cstdint>

#include "core/dtype.h"

namespace moe {

struct EmbeddingSpec {
    DType type = DType::F32;
    int64_t n_vocab = 0;
    int64_t n_embd = 0;
};

namespace ref {
// ids: [n_tokens]; out: [n_tokens, n_embd]. Throws moe::Error("embedding") naming the id and the
// vocabulary size when an id is out of range (ids come from user prompts / tokenizer files).
void embedding_lookup(const EmbeddingSpec& spec, const void* table, const int32_t* ids, int64_t n_tokens,
                      float* out);
}  // namespace ref

}  // namespace moe
