// Parameter counts, KV-cache size and memory plan (conventions in param_count.h / docs/MODELS.md).
#include "model/param_count.h"

#include <algorithm>

#include "core/checked.h"
#include "core/error.h"
#include "kernels/ref/attention.h"

namespace moe::model {
namespace {
constexpr const char* kC = "params";
uint64_t mul(uint64_t a, uint64_t b) { return checked_mul(a, b, kC, "memory plan"); }
uint64_t add(uint64_t a, uint64_t b) { return checked_add(a, b, kC, "memory plan"); }
uint64_t u(int64_t v) { return v > 0 ? static_cast<uint64_t>(v) : 0; }
}  // namespace

uint64_t TensorDesc::nelements() const {
    return checked_product(shape.data(), static_cast<int>(shape.size()), kC, name.c_str());
}

uint64_t TensorDesc::nbytes() const {
    const uint64_t n = nelements();
    const uint64_t ne0 = static_cast<uint64_t>(shape.at(0));
    return moe::tensor_bytes(type, ne0, n / ne0, kC);
}

std::vector<TensorDesc> describe_catalog(const std::vector<TensorSpec>& specs, DType weight_type) {
    std::vector<TensorDesc> out;
    out.reserve(specs.size());
    for (const auto& s : specs) out.push_back({s.name, s.shape, storage_type(s.name, s.shape, weight_type), s.role});
    return out;
}

std::vector<TensorDesc> retype(const std::vector<TensorDesc>& tensors, DType weight_type) {
    std::vector<TensorDesc> out = tensors;
    for (auto& t : out) t.type = storage_type(t.name, t.shape, weight_type);
    return out;
}

ParamCounts count_params(const std::vector<TensorDesc>& tensors, const ModelConfig& cfg) {
    ParamCounts c;
    bool has_output = false;
    uint64_t embd = 0;
    for (const auto& t : tensors) {
        const uint64_t n = t.nelements();
        const uint64_t bytes = t.nbytes();
        const int r = static_cast<int>(t.role);
        c.total = checked_add(c.total, n, kC, "total parameters");
        c.resident_bytes = checked_add(c.resident_bytes, bytes, kC, "resident bytes");
        c.by_role[r] += n;
        c.bytes_by_role[r] += bytes;
        if (t.role == TensorRole::Head) has_output = true;
        if (t.role == TensorRole::Embedding) embd += n;
        if (t.role == TensorRole::RoutedExpert) {
            const int64_t last = t.shape.back();
            if (cfg.n_expert <= 0 || last != cfg.n_expert)
                throw_error(kC, "tensor ", t.name, ": last dimension ", last, " is not the expert count ", cfg.n_expert);
            c.routed_total += n;
            // Exact: each expert's slice is n / E elements, and k of them are used per token.
            c.routed_active += n / static_cast<uint64_t>(cfg.n_expert) * static_cast<uint64_t>(cfg.n_expert_used);
        }
    }
    c.active = c.total - c.routed_total + c.routed_active;
    // Tied embeddings: token_embd is also the head (a full matmul per token), so it stays.
    c.active_excl_embd = has_output ? c.active - embd : c.active;
    return c;
}

uint64_t kv_bytes_per_token(const ModelConfig& cfg, DType kv_type) {
    if (kv_type == DType::Q8_0) {  // one kv_q8 vector (34 B per started 32 elements) per kv head and K / V
        auto vec = [](int64_t d) { return mul((u(d) + 31) / 32, 34); };
        const uint64_t per_layer = cfg.is_mla() ? vec(cfg.kv_lora_rank + cfg.qk_rope_head_dim)
                                                : mul(u(cfg.n_head_kv), vec(cfg.head_dim_k) + vec(cfg.head_dim_v));
        return mul(u(cfg.n_layer), per_layer);
    }
    const uint64_t per_layer_elems = cfg.is_mla() ? u(cfg.kv_lora_rank + cfg.qk_rope_head_dim)
                                                  : mul(u(cfg.n_head_kv), u(cfg.head_dim_k + cfg.head_dim_v));
    return mul(u(cfg.n_layer), moe::row_bytes(kv_type, per_layer_elems, kC));
}

uint64_t kv_cache_bytes(const ModelConfig& cfg, DType kv_type, int64_t ctx, int64_t max_batch, bool swa_full) {
    // Per layer: a sliding-window layer (gpt-oss: every layer except each swa_pattern-th one,
    // llama.cpp's pattern where layer il is full when (il + 1) % pattern == 0) keeps
    // swa_stored_rows rows (the ring and its mirror rows, or ctx when that is fewer).
    if (cfg.n_layer <= 0) return 0;
    const uint64_t per_layer = kv_bytes_per_token(cfg, kv_type) / u(cfg.n_layer);
    uint64_t total = 0;
    for (int64_t il = 0; il < cfg.n_layer; ++il) {
        const bool swa = !swa_full && cfg.sliding_window > 0 && cfg.swa_pattern > 0 && (il + 1) % cfg.swa_pattern != 0;
        const int64_t tokens = swa ? swa_stored_rows(cfg.sliding_window, max_batch, ctx) : ctx;
        total = add(total, mul(per_layer, u(tokens)));
    }
    return total;
}

MemoryPlan plan_memory(const ModelConfig& cfg, const ParamCounts& counts, const MemoryPlanSpec& spec) {
    if (spec.ctx <= 0) throw_error(kC, "--ctx must be > 0 (got ", spec.ctx, ")");
    if (spec.batch <= 0) throw_error(kC, "--batch must be > 0 (got ", spec.batch, ")");
    if (spec.max_batch <= 0) throw_error(kC, "max batch must be > 0 (got ", spec.max_batch, ")");
    MemoryPlan p;
    p.weights_bytes = counts.resident_bytes;

    p.kv_bytes = mul(kv_cache_bytes(cfg, spec.kv_type, spec.ctx, spec.max_batch), u(spec.batch));

    // Scratch, f32, for one step of B tokens (an upper bound on one layer's live buffers + logits).
    const uint64_t B = u(spec.batch), f = 4;
    p.scratch_hidden = mul(mul(2 * B, u(cfg.n_embd)), f);
    const uint64_t q = u(cfg.n_head * cfg.head_dim_k), kv = u(cfg.n_head_kv * (cfg.head_dim_k + cfg.head_dim_v));
    const uint64_t attn_out = u(cfg.n_head * cfg.head_dim_v);
    p.scratch_attn = mul(mul(B, q + kv + attn_out), f);
    p.scratch_scores = mul(mul(mul(B, u(cfg.n_head)), u(spec.ctx)), f);
    p.scratch_router = mul(mul(B, u(cfg.n_expert)), f);
    const uint64_t moe_ffn = add(mul(mul(2 * B, u(cfg.n_expert_used)), u(cfg.n_ff_exp)), mul(2 * B, u(cfg.n_ff_shexp)));
    const bool has_dense = cfg.n_expert == 0 || cfg.n_layer_dense_lead > 0;
    const uint64_t dense_ffn = has_dense ? mul(2 * B, u(cfg.n_ff)) : 0;
    p.scratch_ffn = mul(std::max(moe_ffn, dense_ffn), f);
    p.scratch_logits = mul(mul(B, u(cfg.n_vocab)), f);
    p.scratch_bytes = add(add(add(p.scratch_hidden, p.scratch_attn), add(p.scratch_scores, p.scratch_router)),
                          add(p.scratch_ffn, p.scratch_logits));
    p.total_bytes = add(add(p.weights_bytes, p.kv_bytes), p.scratch_bytes);
    return p;
}

}  // namespace moe::model
