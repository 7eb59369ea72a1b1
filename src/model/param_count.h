#pragma once
// Parameter counts, resident bytes, KV-cache size and a memory plan, from a tensor list (the
// tensors of a real GGUF file, or the catalog of a config). Conventions (docs/MODELS.md):
//  - total: every tensor's elements, each tensor once (tied embeddings are one tensor);
//  - active per token: every non-routed tensor in full (token_embd and output included, as in
//    Mixtral/Qwen/OLMoE's published numbers) + k/E of each routed-expert tensor;
//    active_excl_embd additionally leaves out token_embd (a row lookup, not a matmul) unless it
//    doubles as the head (tied) -- the convention of DeepSeek's and OpenAI's published numbers;
//  - resident bytes: all tensors at their storage type (what must be held in memory);
//  - KV bytes per token: n_layer * n_head_kv * (head_dim_k + head_dim_v) * bytes(kv type);
//    MLA (deepseek2) caches the compressed latent: n_layer * (kv_lora_rank + qk_rope_head_dim).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"
#include "model/tensor_catalog.h"

namespace moe::gguf {
class File;
}

namespace moe::model {

struct TensorDesc {
    std::string name;
    std::vector<int64_t> shape;  // ne0 first
    DType type = DType::F32;
    TensorRole role = TensorRole::Other;
    uint64_t nelements() const;
    uint64_t nbytes() const;  // checked; throws if ne0 is not a multiple of the type's block
};

// Catalog tensors with llama.cpp's storage types for weights of type `weight_type`.
std::vector<TensorDesc> describe_catalog(const std::vector<TensorSpec>& specs, DType weight_type);
// The tensors of a GGUF file as they are stored (defined in param_count_gguf.cpp).
std::vector<TensorDesc> describe_gguf(const gguf::File& file);
// The same tensors re-typed as if the weights were `weight_type` (`moe inspect --type`).
std::vector<TensorDesc> retype(const std::vector<TensorDesc>& tensors, DType weight_type);

struct ParamCounts {
    uint64_t total = 0;
    uint64_t active = 0;            // per token, embeddings and head included
    uint64_t active_excl_embd = 0;  // per token, token_embd excluded (unless tied)
    uint64_t routed_total = 0;      // all routed-expert parameters
    uint64_t routed_active = 0;     // k/E of them
    uint64_t resident_bytes = 0;
    std::array<uint64_t, kRoleCount> by_role{};        // parameters per TensorRole
    std::array<uint64_t, kRoleCount> bytes_by_role{};  // bytes per TensorRole
};

// Throws moe::Error if a routed-expert tensor's last dimension is not cfg.n_expert.
ParamCounts count_params(const std::vector<TensorDesc>& tensors, const ModelConfig& cfg);

// KV cache bytes for one token across all layers (no sliding-window cap), at `kv_type` (f32, f16 or
// q8_0: kernels/ref/kv_q8.h vectors, 34 B per started 32 elements of each kv head).
uint64_t kv_bytes_per_token(const ModelConfig& cfg, DType kv_type = DType::F16);

// KV cache bytes of one sequence of `ctx` positions at `kv_type`: a sliding-window layer (gpt-oss)
// keeps a ring of window + max_batch - 1 rows plus window - 1 mirror rows where that is fewer than
// ctx, unless swa_full (runtime::KvCache::stored_rows; the session's cache has exactly these bytes).
uint64_t kv_cache_bytes(const ModelConfig& cfg, DType kv_type, int64_t ctx, int64_t max_batch, bool swa_full = false);

struct MemoryPlanSpec {
    int64_t ctx = 4096;   // KV-cache length per sequence, tokens
    int64_t batch = 1;    // sequences decoded together; one step processes `batch` tokens
    DType kv_type = DType::F16;
    int64_t max_batch = 512;  // rows per forward call (ModelOptions' default): sizes the SWA rings
};

struct MemoryPlan {
    uint64_t weights_bytes = 0;  // resident bytes of the tensors
    uint64_t kv_bytes = 0;       // batch * sum over layers of stored rows * per-layer bytes
    uint64_t scratch_bytes = 0;  // f32 working set of one step of `batch` tokens (see below)
    uint64_t total_bytes = 0;
    // Scratch parts (bytes): residual + normed hidden, q/k/v/attn-out, attention scores for one
    // layer [batch, n_head, ctx], router logits, expert intermediates (gate+up [batch*k, n_ff_exp],
    // shared expert, dense FFN), output logits [batch, n_vocab].
    uint64_t scratch_hidden = 0, scratch_attn = 0, scratch_scores = 0, scratch_router = 0,
             scratch_ffn = 0, scratch_logits = 0;
};

MemoryPlan plan_memory(const ModelConfig& cfg, const ParamCounts& counts, const MemoryPlanSpec& spec);

}  // namespace moe::model
