#pragma once
// `moe train` as a library: text -> learned BPE vocab -> train/validation token streams (last 10%
// of the text's bytes, cut at a line end, is validation) -> AdamW steps over random windows ->
// periodic validation (bits per byte), per-layer expert-load statistics and collapse warnings,
// checkpoints, and the final GGUF.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "train/net.h"
#include "train/optim.h"

namespace moe::train {

struct TrainSpec {
    std::string data;         // training text (UTF-8 or any bytes)
    std::string out;          // final model GGUF ("" = none)
    DType out_type = DType::F16;
    std::string name = "moe-train";
    std::string checkpoint;   // checkpoint path ("" = out + ".ckpt"; needs out or resume)
    std::string resume;       // checkpoint to continue from ("" = fresh run)
    NetConfig net;            // n_vocab is set from the learned vocabulary
    int64_t vocab_size = 1024;
    int64_t steps = 1000, batch = 16;
    AdamSpec adam;
    MoeLossSpec loss;
    double bias_rate = 0;     // aux-loss-free balancing: bias += rate * sign(mean load - load)
    InitSpec init;
    int threads = 2;
    int64_t log_every = 50, eval_every = 500, save_every = 0;
    int64_t eval_windows = 0;   // validation windows per periodic eval (0 = all); the final eval uses all
    double time_limit = 0;      // seconds (0 = none): stop early, the schedule follows elapsed time
    int64_t stop_at = 0;        // stop after this step (0 = run to steps); the schedule still plans `steps`
    double collapse_share = 0.1;  // warn when an expert gets < this fraction of a fair share over a window
    int64_t collapse_window = 0;  // steps per collapse-detector window (0 = the log window)
    std::FILE* log = stderr;
};

struct LayerLoad {
    double entropy_bits = 0, max_over_mean = 0, busiest_share = 0;
    int dead = 0;
    std::vector<int64_t> counts;
};

struct TrainResult {
    int64_t steps = 0;
    double train_loss = 0;       // mean CE of the last log window
    double val_loss = 0;         // nats per token, all validation windows
    double val_bpb = 0;          // bits per byte
    // With a selection bias (--bias-balance): the same evaluation routing without it, as the
    // exported qwen3moe file does (it has no bias tensor). NaN without a bias.
    double val_loss_no_bias = 0, val_bpb_no_bias = 0;
    double seconds = 0;          // wall time of the training steps
    double tokens_per_s = 0;     // training tokens (batch * ctx per step) per second
    int64_t n_params = 0, n_active = 0, n_vocab = 0;
    double bytes_per_token = 0;  // validation text
    std::vector<LayerLoad> load; // over the last log window
    std::vector<LayerLoad> val_load;  // over the validation text (final evaluation)
    int collapse_warnings = 0;
};

TrainResult run_training(const TrainSpec& spec);

// Load statistics of one layer from slot counts.
LayerLoad layer_load(const std::vector<int64_t>& counts);

}  // namespace moe::train
