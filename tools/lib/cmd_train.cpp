// `moe train`: train a small qwen3moe-style MoE on a text file (see docs/TRAINING.md).
#include <cstdio>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "tools/lib/commands.h"
#include "tools/lib/infer_args.h"
#include "train/preset.h"
#include "train/trainer.h"

namespace moe::tools {
namespace {

void train_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe train --data TEXT [--out MODEL.gguf] [options]\n"
                 "  Learns a byte-level BPE vocabulary from TEXT, trains a qwen3moe-style MoE on the first 90%%\n"
                 "  of it (the last 10%% is validation) and writes a GGUF that moe run and llama.cpp load.\n"
                 "  --data FILE          training text\n"
                 "  --out FILE           final model GGUF (needs --experts >= 2)\n"
                 "  --type T             weights of --out: f32, f16 (default) or q8_0\n"
                 "  --name NAME          general.name of --out (default moe-train)\n"
                 "shape: --preset NAME sets all of the shape flags below (tiny, small, shakespeare = the shipped\n"
                 "  default model's shape); shape flags given as well override it. Defaults without a preset:\n"
                 "  --vocab-size N (1024) --embd N (128) --layers N (4) --heads N (4) --kv-heads N (2)\n"
                 "  --head-dim N (32) --ff N (128, per expert) --experts N (8; 1 = dense) --top-k N (2)\n"
                 "  --ctx N (128) --rope-base F (10000)\n"
                 "  --shared-ff N        add a shared expert of width N with a sigmoid gate: trains and writes a\n"
                 "                       qwen2moe model (no q/k norm, top-k weights not renormalised; 0 = none)\n"
                 "optimisation:\n"
                 "  --steps N (1000) --batch B (16 sequences of --ctx tokens) --lr F (2e-3) --min-lr-frac F (0.1)\n"
                 "  --warmup N (100) --weight-decay F (0.1) --clip F (1.0) --init-std F (0.02) --seed S (1)\n"
                 "  --time-limit SEC     stop after SEC seconds of training; the cosine schedule follows time\n"
                 "  --stop-at N          stop after step N (schedule still planned for --steps; continue with --resume)\n"
                 "load balancing and router:\n"
                 "  --aux-loss COEF      Switch/GShard loss COEF * E * sum f_i P_i (0 = off)\n"
                 "  --z-loss COEF        router z-loss COEF * mean logsumexp^2 (0 = off)\n"
                 "  --bias-balance RATE  aux-loss-free per-expert selection bias, += RATE * sign(mean - load)\n"
                 "                       each step (DeepSeek-V3); not stored in --out (qwen3moe has none)\n"
                 "  --router-init STD    router weight init std (default 0.02)\n"
                 "  --collapse-share F   warn when an expert gets < F x its fair share (1/E) of the slots over\n"
                 "                       a collapse window (0.1)\n"
                 "  --collapse-window N  steps per collapse window (0 = the --log-every window; default 0)\n"
                 "runtime:\n"
                 "  --threads N (2) --log-every N (50) --eval-every N (500) --eval-windows N (0 = all)\n"
                 "  --save-every N       write a checkpoint every N steps (and at the end) to --checkpoint\n"
                 "  --checkpoint FILE    checkpoint path (default OUT.ckpt)\n"
                 "  --resume FILE        continue a checkpoint (its shape, vocabulary, schedule and seed)\n");
}

}  // namespace

int cmd_train(int argc, char** argv) {
    const char* cmd = "train";
    train::TrainSpec s;
    s.net.n_vocab = 1;  // set from the learned vocabulary
    auto num = [&](int& i, const char* opt) { return parse_double(arg_value(argc, argv, i, cmd), opt, cmd); };
    auto integer = [&](int& i, const char* opt, int64_t lo, int64_t hi) {
        return parse_int(arg_value(argc, argv, i, cmd), opt, cmd, lo, hi);
    };
    // The preset first, whatever its position, so shape flags override it.
    for (int i = 1; i < argc; ++i)
        if (std::string(argv[i]) == "--preset") {
            const train::ShapePreset p = train::shape_preset(arg_value(argc, argv, i, cmd));
            s.net = p.net;
            s.net.n_vocab = 1;
            s.vocab_size = p.vocab_size;
        }
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const char* o = argv[i];
        if (a == "--preset") {
            ++i;  // applied above
        } else if (a == "-h" || a == "--help") {
            train_usage(stdout);
            return 0;
        } else if (a == "--data") s.data = arg_value(argc, argv, i, cmd);
        else if (a == "--out") s.out = arg_value(argc, argv, i, cmd);
        else if (a == "--name") s.name = arg_value(argc, argv, i, cmd);
        else if (a == "--checkpoint") s.checkpoint = arg_value(argc, argv, i, cmd);
        else if (a == "--resume") s.resume = arg_value(argc, argv, i, cmd);
        else if (a == "--type") {
            const std::string t = arg_value(argc, argv, i, cmd);
            if (t == "f32") s.out_type = DType::F32;
            else if (t == "f16") s.out_type = DType::F16;
            else if (t == "q8_0") s.out_type = DType::Q8_0;
            else throw_error(cmd, "--type '", t, "' is not supported (supported: f32, f16, q8_0)");
        } else if (a == "--vocab-size") s.vocab_size = integer(i, o, 257, 1 << 20);
        else if (a == "--embd") s.net.n_embd = integer(i, o, 1, 1 << 16);
        else if (a == "--layers") s.net.n_layer = integer(i, o, 1, 1024);
        else if (a == "--heads") s.net.n_head = integer(i, o, 1, 1024);
        else if (a == "--kv-heads") s.net.n_head_kv = integer(i, o, 1, 1024);
        else if (a == "--head-dim") s.net.head_dim = integer(i, o, 2, 4096);
        else if (a == "--ff") s.net.n_ff = integer(i, o, 1, 1 << 20);
        else if (a == "--experts") s.net.n_expert = static_cast<int>(integer(i, o, 1, 4096));
        else if (a == "--shared-ff") s.net.n_ff_shexp = integer(i, o, 0, 1 << 20);
        else if (a == "--top-k") s.net.n_expert_used = static_cast<int>(integer(i, o, 1, 4096));
        else if (a == "--ctx") s.net.n_ctx = integer(i, o, 2, 1 << 16);
        else if (a == "--rope-base") s.net.rope_base = static_cast<float>(num(i, o));
        else if (a == "--steps") s.steps = integer(i, o, 1, int64_t(1) << 40);
        else if (a == "--batch") s.batch = integer(i, o, 1, 1 << 20);
        else if (a == "--lr") s.adam.lr = num(i, o);
        else if (a == "--min-lr-frac") s.adam.min_lr_frac = num(i, o);
        else if (a == "--warmup") s.adam.warmup = integer(i, o, 0, int64_t(1) << 40);
        else if (a == "--weight-decay") s.adam.weight_decay = num(i, o);
        else if (a == "--clip") s.adam.clip = num(i, o);
        else if (a == "--init-std") s.init.std = num(i, o);
        else if (a == "--router-init") s.init.router_std = num(i, o);
        else if (a == "--seed") s.init.seed = static_cast<uint64_t>(integer(i, o, 0, INT64_MAX));
        else if (a == "--aux-loss") s.loss.aux = num(i, o);
        else if (a == "--z-loss") s.loss.z = num(i, o);
        else if (a == "--bias-balance") s.bias_rate = num(i, o);
        else if (a == "--collapse-share") s.collapse_share = num(i, o);
        else if (a == "--collapse-window") s.collapse_window = integer(i, o, 0, int64_t(1) << 40);
        else if (a == "--time-limit") s.time_limit = num(i, o);
        else if (a == "--stop-at") s.stop_at = integer(i, o, 1, int64_t(1) << 40);
        else if (a == "--threads" || a == "-t") s.threads = static_cast<int>(integer(i, o, 1, 1024));
        else if (a == "--log-every") s.log_every = integer(i, o, 1, int64_t(1) << 40);
        else if (a == "--eval-every") s.eval_every = integer(i, o, 0, int64_t(1) << 40);
        else if (a == "--eval-windows") s.eval_windows = integer(i, o, 0, int64_t(1) << 40);
        else if (a == "--save-every") s.save_every = integer(i, o, 0, int64_t(1) << 40);
        else {
            std::fprintf(stderr, "moe train: unknown option '%s'\n", o);
            train_usage(stderr);
            return 2;
        }
    }
    if (s.data.empty()) {
        std::fprintf(stderr, "moe train: need --data TEXT\n");
        train_usage(stderr);
        return 2;
    }
    auto nonneg = [&](double v, const char* opt) {
        if (!(v >= 0) || !std::isfinite(v)) throw_error(cmd, "option ", opt, " must be a finite number >= 0, got ", v);
    };
    nonneg(s.loss.aux, "--aux-loss");
    nonneg(s.loss.z, "--z-loss");
    nonneg(s.bias_rate, "--bias-balance");
    nonneg(s.init.router_std, "--router-init");
    nonneg(s.init.std, "--init-std");
    nonneg(s.adam.weight_decay, "--weight-decay");
    nonneg(s.adam.clip, "--clip");
    nonneg(s.time_limit, "--time-limit");
    nonneg(s.collapse_share, "--collapse-share");
    if (s.collapse_share > 1) throw_error(cmd, "--collapse-share ", s.collapse_share, " must be <= 1 (a fraction of the fair share)");
    if (!(s.adam.lr > 0) || !std::isfinite(s.adam.lr)) throw_error(cmd, "--lr must be > 0, got ", s.adam.lr);
    if (s.net.n_expert < 2 && !s.out.empty())
        throw_error(cmd, "--experts ", s.net.n_expert, " is a dense model, which has no qwen3moe GGUF form; drop --out");
    train::run_training(s);
    return 0;
}

}  // namespace moe::tools
