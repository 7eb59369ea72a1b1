#pragma once
// Trained models and checkpoints as GGUF.
//  - write_model: architecture qwen3moe, hyperparameter keys, tensor names and layouts exactly as
//    llama.cpp's qwen3moe loader and the engine read them (see src/model/gen.cpp), the learned BPE
//    vocabulary as tokenizer.ggml.* keys; weights f32/f16/q8_0 (norms and the router stay f32,
//    as storage_type() says).
//  - write_checkpoint / read_checkpoint: the same f32 model plus train.* keys (step, optimizer
//    step, run settings) and tensors train.adam_m.<name>, train.adam_v.<name>,
//    train.sel_bias.<layer>. A checkpoint is read back with the hostile-input GGUF parser and
//    every shape is checked against the layout, so a truncated or foreign file is one clear error.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "tokenizer/vocab.h"
#include "train/net.h"
#include "train/optim.h"

namespace moe::train {

void write_model(const std::string& path, const Net<float>& net, const tokenizer::Vocab& vocab, DType type,
                 const std::string& name);

struct Checkpoint {
    NetConfig config;
    tokenizer::Vocab vocab;
    std::vector<float> params;
    AdamW opt{0};
    std::vector<std::vector<float>> sel_bias;  // per layer, [E] or empty
    int64_t step = 0;                          // steps done
    int64_t steps = 0;                         // planned steps of the run
    uint64_t seed = 0;
    // Run settings a resume must reuse to continue the same run (stored as exact decimal strings).
    AdamSpec adam;
    MoeLossSpec loss;
    double bias_rate = 0;
    int64_t batch = 0;
};

void write_checkpoint(const std::string& path, const Checkpoint& c);
Checkpoint read_checkpoint(const std::string& path);

}  // namespace moe::train
