#pragma once
// `moe gen` as a library: writes a random-weight model of a preset as GGUF, with tensor names,
// shapes and metadata keys exactly as llama.cpp reads them (src/models/<arch>.cpp), streaming
// tensors row-block by row-block so even mixtral-8x7b F16 (~93 GB) needs only a few MB of RAM.
//
// Values (reproducible from the seed; every row has its own xoshiro stream derived from
// seed, FNV-1a(tensor name) and the row index, so neither tensor order nor thread count matters):
//  - matrices: N(0,1) / sqrt(ne0) (ne0 = input width, so each output has unit variance for a
//    unit-RMS input);
//  - norm weights: 1 + 0.1 N(0,1); biases: 0.02 N(0,1);
//  - router (ffn_gate_inp): N(0,1) * kRouterScale / sqrt(n_embd), so router logits for a unit-RMS
//    input have standard deviation kRouterScale and the top-k choice is decisive (the expected gap
//    between the two largest of 8 standard normals is ~0.57, i.e. ~4.5 logits here);
//    kRouterScaleSigmoid for sigmoid gating (see there);
// The same underlying f32 values are written whatever the storage type, so an F32 and a Q8_0 file
// of the same seed differ only by rounding.
#include <cstdint>
#include <functional>
#include <string>

#include "core/dtype.h"
#include "model/config.h"
#include "model/tensor_catalog.h"

namespace moe::model {

inline constexpr float kRouterScale = 8.0f;
// Sigmoid gating (DeepSeek-V3) selects on sigmoid(logit): at logit sd 8 most scores sit within
// 1e-3 of 1 and the choice among them is a near-tie; sd 2 keeps the scores spread over (0, 1).
inline constexpr float kRouterScaleSigmoid = 2.0f;

struct GenSpec {
    std::string preset;          // name from presets()
    int64_t layers = 0;          // > 0: override the number of blocks
    DType type = DType::F32;     // F32, F16, BF16 or Q8_0
    std::string vocab_file;      // GGUF to copy tokenizer.* keys from; empty = built-in vocab
    uint64_t seed = 0;
    std::string output;          // path of the .gguf to write
    int threads = 0;             // 0 = hardware concurrency
    // Called after each written block: (bytes written, total tensor bytes).
    std::function<void(uint64_t, uint64_t)> progress;
};

struct GenResult {
    ModelConfig config;       // as written (layers and n_vocab applied)
    uint64_t n_tensors = 0;
    uint64_t n_params = 0;
    uint64_t data_bytes = 0;  // tensor data bytes
};

// Throws moe::Error("[gen] ...") for an unknown preset, unsupported type, bad --layers, or a
// vocab file without tokenizer.ggml.tokens; the output file is removed if writing fails.
GenResult generate(const GenSpec& spec);

// The config a GenSpec produces (preset + layers + vocab size), without writing anything.
ModelConfig gen_config(const GenSpec& spec);

// general.file_type value llama.cpp uses for a model whose weights are `t` (0, 1, 7, 32).
uint32_t file_type_of(DType t);

// The f32 values of row `row` (ne0 = n elements) of tensor `spec` (exposed for tests).
void gen_row_values(const ModelConfig& cfg, const TensorSpec& spec, uint64_t seed, int64_t row, float* out);

}  // namespace moe::model
