// Tensor catalog: registry of per-architecture builders, tensor roles and storage types.
#include "model/tensor_catalog.h"

#include "core/checked.h"
#include "core/error.h"
#include "model/arch.h"

namespace moe::model {

const char* role_name(TensorRole r) {
    switch (r) {
        case TensorRole::Embedding: return "embedding";
        case TensorRole::Head: return "head";
        case TensorRole::Attention: return "attention";
        case TensorRole::Norm: return "norm";
        case TensorRole::Router: return "router";
        case TensorRole::RoutedExpert: return "routed-expert";
        case TensorRole::SharedExpert: return "shared-expert";
        case TensorRole::DenseFfn: return "dense-ffn";
        case TensorRole::Other: return "other";
    }
    return "?";
}

namespace {
bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// "blk.3.ffn_up_exps.weight" -> "ffn_up_exps"; "output.weight" -> "output".
std::string_view base_name(std::string_view name) {
    if (starts_with(name, "blk.")) {
        const size_t dot = name.find('.', 4);
        name = dot == std::string_view::npos ? std::string_view{} : name.substr(dot + 1);
    }
    const size_t last = name.rfind('.');
    return last == std::string_view::npos ? name : name.substr(0, last);
}
}  // namespace

int tensor_layer(std::string_view name) {
    if (!starts_with(name, "blk.")) return -1;
    int v = 0;
    size_t i = 4;
    if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) {
        v = v * 10 + (name[i] - '0');
        if (v > 1000000) return -1;
    }
    return (i < name.size() && name[i] == '.') ? v : -1;
}

TensorRole classify_tensor(std::string_view name) {
    const std::string_view b = base_name(name);
    if (b == "token_embd") return TensorRole::Embedding;
    if (b == "output") return TensorRole::Head;
    if (b.find("_norm") != std::string_view::npos) return TensorRole::Norm;
    if (b == "ffn_gate_inp_shexp") return TensorRole::SharedExpert;
    if (b == "ffn_gate_inp" || b == "exp_probs_b") return TensorRole::Router;
    if (ends_with(b, "_exps")) return TensorRole::RoutedExpert;
    if (ends_with(b, "_shexp")) return TensorRole::SharedExpert;
    if (b == "ffn_gate" || b == "ffn_up" || b == "ffn_down") return TensorRole::DenseFfn;
    if (starts_with(b, "attn_")) return TensorRole::Attention;
    return TensorRole::Other;
}

uint64_t TensorSpec::nelements() const {
    return checked_product(shape.data(), static_cast<int>(shape.size()), "catalog", name.c_str());
}

DType storage_type(std::string_view name, const std::vector<int64_t>& shape, DType weight_type) {
    int n_dims = 0;
    for (size_t i = 0; i < shape.size(); ++i)
        if (shape[i] != 1) n_dims = static_cast<int>(i) + 1;
    if (n_dims < 2) return DType::F32;
    if (!ends_with(name, ".weight")) return DType::F32;
    if (name.find("_norm.weight") != std::string_view::npos) return DType::F32;
    const std::string_view b = base_name(name);
    if (b == "ffn_gate_inp" || b == "ffn_gate_inp_shexp") return DType::F32;
    // MXFP4 as llama-quantize's MXFP4_MOE: stacked expert matrices MXFP4, every other matrix Q8_0.
    if (weight_type == DType::MXFP4 && !(shape.size() >= 3 && shape[2] > 1)) weight_type = DType::Q8_0;
    const DTypeInfo& info = dtype_info(weight_type);
    if (info.block > 1 && shape[0] % info.block != 0) return DType::F16;
    return weight_type;
}

std::vector<TensorSpec> tensor_catalog(const ModelConfig& cfg) {
    cfg.validate();
    std::vector<TensorSpec> out;
    detail::CatalogBuilder b(out);
    if (cfg.arch == kArchLlama) detail::catalog_llama(cfg, b);
    else if (cfg.arch == kArchQwen2Moe) detail::catalog_qwen2moe(cfg, b);
    else if (cfg.arch == kArchQwen3Moe) detail::catalog_qwen3moe(cfg, b);
    else if (cfg.arch == kArchOlmoe) detail::catalog_olmoe(cfg, b);
    else if (cfg.arch == kArchDeepseek2) detail::catalog_deepseek2(cfg, b);
    else if (cfg.arch == kArchGptOss) detail::catalog_gpt_oss(cfg, b);
    else throw_error("catalog", "unsupported architecture '", cfg.arch, "' (supported: ", supported_archs_list(), ")");
    for (auto& t : out) t.role = classify_tensor(t.name);
    return out;
}

namespace detail {

void CatalogBuilder::add(const std::string& name, std::vector<int64_t> shape) {
    TensorSpec t;
    t.name = name;
    t.shape = std::move(shape);
    out_.push_back(std::move(t));
}

void CatalogBuilder::layer(int64_t il, const std::string& suffix, std::vector<int64_t> shape) {
    add("blk." + std::to_string(il) + "." + suffix, std::move(shape));
}

void CatalogBuilder::embeddings_and_head(const ModelConfig& c) {
    add("token_embd.weight", {c.n_embd, c.n_vocab});
    add("output_norm.weight", {c.n_embd});
    if (!c.tied_embeddings) add("output.weight", {c.n_embd, c.n_vocab});
}

void CatalogBuilder::standard_attention(const ModelConfig& c, int64_t il) {
    const int64_t q = c.n_head * c.head_dim_k, k = c.n_head_kv * c.head_dim_k, v = c.n_head_kv * c.head_dim_v;
    layer(il, "attn_norm.weight", {c.n_embd});
    layer(il, "attn_q.weight", {c.n_embd, q});
    layer(il, "attn_k.weight", {c.n_embd, k});
    layer(il, "attn_v.weight", {c.n_embd, v});
    if (c.qkv_bias) {
        layer(il, "attn_q.bias", {q});
        layer(il, "attn_k.bias", {k});
        layer(il, "attn_v.bias", {v});
    }
    layer(il, "attn_output.weight", {c.n_head * c.head_dim_v, c.n_embd});
    if (c.attn_out_bias) layer(il, "attn_output.bias", {c.n_embd});
}

void CatalogBuilder::routed_experts(const ModelConfig& c, int64_t il) {
    layer(il, "ffn_gate_inp.weight", {c.n_embd, c.n_expert});
    layer(il, "ffn_gate_exps.weight", {c.n_embd, c.n_ff_exp, c.n_expert});
    layer(il, "ffn_down_exps.weight", {c.n_ff_exp, c.n_embd, c.n_expert});
    layer(il, "ffn_up_exps.weight", {c.n_embd, c.n_ff_exp, c.n_expert});
}

void CatalogBuilder::shared_expert(const ModelConfig& c, int64_t il) {
    layer(il, "ffn_gate_shexp.weight", {c.n_embd, c.n_ff_shexp});
    layer(il, "ffn_down_shexp.weight", {c.n_ff_shexp, c.n_embd});
    layer(il, "ffn_up_shexp.weight", {c.n_embd, c.n_ff_shexp});
}

void CatalogBuilder::dense_ffn(const ModelConfig& c, int64_t il) {
    layer(il, "ffn_gate.weight", {c.n_embd, c.n_ff});
    layer(il, "ffn_down.weight", {c.n_ff, c.n_embd});
    layer(il, "ffn_up.weight", {c.n_embd, c.n_ff});
}

}  // namespace detail
}  // namespace moe::model
