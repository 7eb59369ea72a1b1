#pragma once
// Binds a GGUF file's tensors to per-block structs by the names and shapes of the tensor catalog
// (tensor_catalog.h), so every tensor the architecture needs is checked once, at load:
//  - missing tensor, wrong shape -> moe::Error naming the tensor, its shape, the expected shape
//    and the file;
//  - every matrix (attention, experts, shared experts, router, dense FFN, lm head) is a zero-copy
//    view into the mapping at its file type: nothing is converted or copied, so resident memory is
//    the file's pages the forward pass touches. Its type must have a matmul kernel in CpuKernels
//    (CpuKernels::has_matmul), else moe::Error naming the tensor, its type and the supported types;
//  - token_embd is read one row per token through dequant_row: any type with a row dequantizer
//    (and a matmul kernel too when it doubles as the lm head);
//  - vectors (norm weights, biases) are read as f32: F32 in place, F16/BF16 converted once (a few
//    KB, owned here); other vector types are an error.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/cpu/head_rows.h"
#include "model/config.h"
#include "moe/moe_spec.h"

namespace moe::gguf {
class File;
}

namespace moe::kernels {
class CpuKernels;
}

namespace moe::model {

struct ArchDesc;

struct LayerWeights {
    TensorView attn_norm;            // [D]
    TensorView wq, wk, wv;           // [D, Hq*dk], [D, Hkv*dk], [D, Hkv*dv]
    TensorView bq, bk, bv;           // biases (LayerDesc::qkv_bias), else data == nullptr
    TensorView wo;                   // [Hq*dv, D]
    TensorView bo;                   // attn_output.bias [D] (LayerDesc::o_bias)
    TensorView sinks;                // attn_sinks [Hq] (LayerDesc::attn_sinks)
    TensorView q_norm, k_norm;       // [head_dim] (PerHead) or [n_embd] (Whole); else empty
    // MLA (LayerDesc::mla; r = kv_lora_rank, dq = nope + rope, H heads); wq is the plain q
    // [D, H*dq] or empty when q goes through q_a [D, q_lora] -> q_a_norm -> q_b [q_lora, H*dq].
    TensorView wq_a, q_a_norm, wq_b;
    TensorView wkv_a, kv_a_norm;     // attn_kv_a_mqa [D, r + rope], attn_kv_a_norm [r]
    // kv_b per head for the absorbed form (kernels/cpu/head_rows.h): k_b maps q_nope_h to the
    // latent query [r], v_b maps the latent output o_lat_h to [v]. Read in place from attn_kv_b [r, H*(nope + v)] (k_b:
    // the columns form over head h's first nope rows; v_b: its last v rows) or from attn_k_b /
    // attn_v_b, when the type dequantizes fast (bind_mla); else f32 copies in the rows form.
    cpu::HeadRows k_b, v_b;
    TensorView ffn_norm;             // [D] (gpt-oss: post_attention_norm)
    MoeWeights moe;                  // MoE blocks
    TensorView ffn_gate, ffn_up, ffn_down;  // dense blocks: [D, F], [D, F], [F, D]
};

struct ModelWeights {
    TensorView token_embd;   // [D, n_vocab] (any type with a dequant_row)
    TensorView output_norm;  // [D]
    TensorView output;       // [D, n_vocab]; = token_embd when the embeddings are tied
    std::vector<LayerWeights> layers;
    uint64_t converted_bytes = 0;  // f32 memory owned for F16/BF16 vectors (norms, biases)
    uint64_t mapped_bytes = 0;     // tensors used in place in the mapping (every matrix)
    std::vector<std::unique_ptr<float[]>> owned;
};

// Matrix types the forward pass runs (those with a matmul kernel in `k`), e.g.
// "f32, f16, bf16, q8_0, q4_0, q4_K, q5_K, q6_K".
std::string supported_weight_types(const kernels::CpuKernels& k);

// Throws moe::Error("[weights] <file>: ...") as described above. The file must outlive the result.
ModelWeights bind_weights(const gguf::File& file, const ModelConfig& cfg, const ArchDesc& desc,
                          const kernels::CpuKernels& k);

}  // namespace moe::model
