#pragma once
// Binds a GGUF file's tensors to per-block structs by the names and shapes of the tensor catalog
// (tensor_catalog.h), so every tensor the architecture needs is checked once, at load:
//  - missing tensor, wrong shape -> moe::Error naming the tensor, its shape, the expected shape
//    and the file;
//  - F32 tensors are zero-copy views into the mapping; F16 / BF16 ones are converted to f32 once
//    (owned here), since the dense and expert matmuls have f32 kernels only;
//  - any other type (Q8_0, Q4_K, ...) -> moe::Error naming the tensor, its type and the supported
//    types (quantized kernels are a later issue).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"
#include "moe/moe_spec.h"

namespace moe::gguf {
class File;
}

namespace moe::model {

struct ArchDesc;

struct LayerWeights {
    TensorView attn_norm;            // [D]
    TensorView wq, wk, wv;           // [D, Hq*dk], [D, Hkv*dk], [D, Hkv*dv]
    TensorView bq, bk, bv;           // biases (LayerDesc::qkv_bias), else data == nullptr
    TensorView wo;                   // [Hq*dv, D]
    TensorView q_norm, k_norm;       // [head_dim] (PerHead) or [n_embd] (Whole); else empty
    TensorView ffn_norm;             // [D]
    MoeWeights moe;                  // MoE blocks
    TensorView ffn_gate, ffn_up, ffn_down;  // dense blocks: [D, F], [D, F], [F, D]
};

struct ModelWeights {
    TensorView token_embd;   // [D, n_vocab] (f32)
    TensorView output_norm;  // [D]
    TensorView output;       // [D, n_vocab]; = token_embd when the embeddings are tied
    std::vector<LayerWeights> layers;
    uint64_t converted_bytes = 0;  // f32 memory owned for F16/BF16 tensors
    uint64_t mapped_bytes = 0;     // f32 tensors used in place
    std::vector<std::unique_ptr<float[]>> owned;
};

// Types the forward pass reads (converted to f32 at load where needed): "F32, F16, BF16".
std::string supported_weight_types();

// Throws moe::Error("[weights] <file>: ...") as described above. The file must outlive the result.
ModelWeights bind_weights(const gguf::File& file, const ModelConfig& cfg, const ArchDesc& desc);

}  // namespace moe::model
