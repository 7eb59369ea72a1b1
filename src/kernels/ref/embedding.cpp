#include "kernels/ref/embedding.h"

#include "core/error.h"
#include "kernels/ref/dequant_row.h"

namespace moe::ref {

void embedding_lookup(const EmbeddingSpec& spec, const void* table, const int32_t* ids, int64_t n_tokens,
                      float* out) {
    MOE_ASSERT(spec.n_vocab > 0 && spec.n_embd > 0, "embedding shape ", spec.n_vocab, " x ", spec.n_embd);
    if (!dequant_row_supported(spec.type))
        throw_error("embedding", "token embeddings of type ", dtype_name(spec.type),
                    " are not supported (supported: f32, f16, bf16)");
    const uint64_t row = row_bytes(spec.type, static_cast<uint64_t>(spec.n_embd), "embedding");
    // Check every id before writing anything, so a bad prompt leaves `out` untouched.
    for (int64_t t = 0; t < n_tokens; ++t) {
        if (ids[t] < 0 || ids[t] >= spec.n_vocab)
            throw_error("embedding", "token id ", ids[t], " (at position ", t, ") is out of range for a vocabulary of ",
                        spec.n_vocab, " tokens");
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
        const char* src = static_cast<const char*>(table) + static_cast<uint64_t>(ids[t]) * row;
        dequant_row(spec.type, src, out + t * spec.n_embd, spec.n_embd);
    }
}

}  // namespace moe::ref
