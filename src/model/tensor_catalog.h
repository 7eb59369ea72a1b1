#pragma once
// The exact GGUF tensor list llama.cpp expects for a ModelConfig: names, shapes (ne0 first) and
// roles, one builder per architecture (arch_<name>.cpp), checked against llama.cpp's
// `load_arch_tensors` (src/models/<arch>.cpp at d32676d7). Used by `moe gen` (what to write) and
// by `moe inspect` on a config.json (what would exist), and by tests to check real files.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace moe::model {

enum class TensorRole {
    Embedding,     // token_embd
    Head,          // output (lm head)
    Attention,     // attn_q/k/v/o (+ biases, sinks, MLA projections)
    Norm,          // every *_norm
    Router,        // ffn_gate_inp (+ bias), exp_probs_b
    RoutedExpert,  // ffn_{gate,up,down}_exps (+ biases)
    SharedExpert,  // ffn_{gate,up,down}_shexp, ffn_gate_inp_shexp
    DenseFfn,      // ffn_{gate,up,down} of dense layers / dense models
    Other,
};
constexpr int kRoleCount = 9;
const char* role_name(TensorRole r);

// Role of a GGUF tensor from its name alone (works for any file, catalogued or not).
TensorRole classify_tensor(std::string_view name);
// Block index of "blk.N.xxx", or -1.
int tensor_layer(std::string_view name);

struct TensorSpec {
    std::string name;
    std::vector<int64_t> shape;  // ne0 first
    TensorRole role = TensorRole::Other;
    uint64_t nelements() const;
};

// Every tensor llama.cpp loads for this config (required ones, plus the optional ones the real
// checkpoints have, e.g. qwen2moe q/k/v biases). Throws moe::Error for an unsupported arch.
std::vector<TensorSpec> tensor_catalog(const ModelConfig& cfg);

// Storage type a tensor gets when the model's weights are `weight_type`, following llama.cpp's
// converter and quantizer: 1-D tensors, norms, router weights (ffn_gate_inp, ffn_gate_inp_shexp)
// and anything not named *.weight stay F32; other matrices take `weight_type`, falling back to
// F16 when ne0 is not a multiple of the type's block size.
DType storage_type(std::string_view name, const std::vector<int64_t>& shape, DType weight_type);

}  // namespace moe::model
