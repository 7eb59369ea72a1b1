// `moe train` as a binary: the GGUF it writes loads in the engine and `moe eval` logits equal the
// trainer's own forward; a run stopped and resumed from its checkpoint ends bitwise equal to a
// straight run; the loss falls; bad input is one clear error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/wait.h>

#include "train/export.h"
#include "common/temp_dir.h"
#include "train/net.h"

using namespace moe;
namespace fs = std::filesystem;

namespace {

const fs::path& temp_dir() { return moe::testutil::binary_temp_dir("train-cli"); }

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

struct Result {
    int code = -1;
    std::string out, err;
};

Result run_moe(const std::string& args) {
    const fs::path o = temp_dir() / "stdout.txt", e = temp_dir() / "stderr.txt";
    const std::string cmd = std::string(MOE_BINARY) + " " + args + " >" + o.string() + " 2>" + e.string();
    const int st = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = slurp(o);
    r.err = slurp(e);
    return r;
}

// 40 KB of Tiny Shakespeare.
const std::string& data_file() {
    static const std::string path = [] {
        const std::string text = slurp(MOE_TEST_DATA_DIR "/text/tinyshakespeare.txt").substr(0, 40000);
        const fs::path p = temp_dir() / "data.txt";
        std::ofstream(p, std::ios::binary) << text;
        return p.string();
    }();
    return path;
}

const char* kShape =
    " --vocab-size 300 --embd 32 --layers 2 --heads 2 --kv-heads 1 --head-dim 16 --ff 32 --experts 4 --top-k 2"
    " --ctx 32 --batch 4 --threads 2 --log-every 5 --eval-every 0 --lr 5e-3 --warmup 5 --aux-loss 0.01 --z-loss 0.001";

double first_and_last_loss(const std::string& log, double* last) {
    double first = NAN;
    size_t p = 0;
    while ((p = log.find("(ce ", p)) != std::string::npos) {
        const double v = std::atof(log.c_str() + p + 4);
        if (std::isnan(first)) first = v;
        *last = v;
        p += 4;
    }
    return first;
}

// Trains STEPS steps with ARGS, and checks that `moe eval` on the f32 GGUF gives the trainer's own
// forward logits (from the final checkpoint). Returns the training log.
std::string train_and_compare_logits(const std::string& tag, const std::string& args, int steps, double min_drop) {
    const std::string out = (temp_dir() / (tag + ".gguf")).string(), ck = (temp_dir() / (tag + ".ckpt")).string();
    const Result r = run_moe("train --data " + data_file() + " --out " + out + " --type f32 --steps " +
                             std::to_string(steps) + " --save-every " + std::to_string(steps) + " --checkpoint " + ck + args);
    EXPECT_EQ(r.code, 0) << r.err;
    double last = 0;
    const double first = first_and_last_loss(r.err, &last);
    EXPECT_LT(last, first - min_drop) << r.err;
    EXPECT_NE(r.err.find("load L1: entropy"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("val bpb"), std::string::npos) << r.err;

    // The trainer's forward, from the final checkpoint (the same weights as the f32 GGUF).
    const train::Checkpoint c = train::read_checkpoint(ck);
    EXPECT_EQ(c.step, steps);
    train::Net<float> net(c.config);
    net.params = c.params;
    std::vector<int32_t> tokens;
    std::string list;
    for (int i = 0; i < 32; ++i) {
        tokens.push_back(static_cast<int32_t>((i * 37 + 11) % c.config.n_vocab));
        list += (i ? "," : "") + std::to_string(tokens.back());
    }
    net.step(nullptr, tokens.data(), nullptr, 1, 32, train::MoeLossSpec{}, nullptr, false);
    const std::vector<float>& mine = net.logits();

    const std::string lf = (temp_dir() / "logits.bin").string();
    const Result e = run_moe("eval -m " + out + " --tokens " + list + " --logits-out " + lf + " -t 2");
    EXPECT_EQ(e.code, 0) << e.err;
    const std::string raw = slurp(lf);
    EXPECT_EQ(raw.size(), mine.size() * sizeof(float));
    if (raw.size() != mine.size() * sizeof(float)) return r.err;
    const float* theirs = reinterpret_cast<const float*>(raw.data());
    double num = 0, den = 0;
    for (size_t i = 0; i < mine.size(); ++i) {
        num += (double(mine[i]) - theirs[i]) * (double(mine[i]) - theirs[i]);
        den += double(mine[i]) * mine[i];
    }
    EXPECT_GT(den, 0.0);
    EXPECT_LT(num / den, 1e-9) << tag << ": NMSE between moe eval and the trainer's forward";
    return r.err + e.err;
}

}  // namespace

TEST(TrainCli, EngineEvalLogitsEqualTrainerForward) {
    train_and_compare_logits("m", kShape, 30, 0.5);
    // f16 and q8_0 outputs load and run too.
    for (const char* t : {"f16", "q8_0"}) {
        const std::string o2 = (temp_dir() / (std::string("m-") + t + ".gguf")).string();
        ASSERT_EQ(run_moe("train --data " + data_file() + " --out " + o2 + " --type " + t + " --steps 2" + kShape).code, 0);
        const Result g = run_moe("run -m " + o2 + " -p 'ROMEO:' -n 8 --temp 0 -t 1");
        EXPECT_EQ(g.code, 0) << g.err;
        EXPECT_EQ(g.out.rfind("ROMEO:", 0), 0u) << g.out;
    }
}

// --shared-ff trains a qwen2moe model (sigmoid-gated shared expert, no q/k norm, no renormalisation);
// the engine loads it as qwen2moe and agrees with the trainer's forward.
TEST(TrainCli, SharedExpertExportsQwen2moe) {
    const std::string log = train_and_compare_logits("shexp", std::string(kShape) + " --shared-ff 24", 30, 0.5);
    EXPECT_NE(log.find("qwen2moe"), std::string::npos) << log;
    const train::Checkpoint c = train::read_checkpoint((temp_dir() / "shexp.ckpt").string());
    EXPECT_EQ(c.config.n_ff_shexp, 24);
}

// --preset sets the shape: the same run as the explicit flags, bitwise; flags override it.
TEST(TrainCli, PresetEqualsShapeFlags) {
    const std::string tail = " --steps 3 --save-every 3 --batch 2 --threads 1 --eval-every 0 --seed 5";
    const std::string a = (temp_dir() / "preset.ckpt").string(), b = (temp_dir() / "flags.ckpt").string();
    ASSERT_EQ(run_moe("train --data " + data_file() + " --preset tiny --checkpoint " + a + tail).code, 0);
    const Result r = run_moe("train --data " + data_file() + " --checkpoint " + b + tail +
                             " --vocab-size 300 --embd 32 --layers 2 --heads 2 --kv-heads 1 --head-dim 16 --ff 32"
                             " --experts 4 --top-k 2 --ctx 32");
    ASSERT_EQ(r.code, 0) << r.err;
    const train::Checkpoint ca = train::read_checkpoint(a), cb = train::read_checkpoint(b);
    EXPECT_EQ(ca.config.n_embd, 32);
    EXPECT_EQ(ca.params, cb.params);
    const std::string c = (temp_dir() / "over.ckpt").string();
    ASSERT_EQ(run_moe("train --data " + data_file() + " --experts 8 --checkpoint " + c + tail + " --preset tiny").code, 0);
    EXPECT_EQ(train::read_checkpoint(c).config.n_expert, 8) << "a shape flag overrides the preset, in any order";
}

// A bias-balanced run reports the validation cost of dropping the bias and warns at export; the
// collapse detector uses its own window.
TEST(TrainCli, BiasDroppedAtExportIsMeasuredAndCollapseWindow) {
    const std::string out = (temp_dir() / "bias.gguf").string();
    const Result r = run_moe("train --data " + data_file() + " --out " + out +
                             " --preset tiny --steps 6 --batch 2 --threads 1 --eval-every 0 --log-every 6"
                             " --bias-balance 0.01 --collapse-share 1 --collapse-window 3");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("final: without the selection bias"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("warning: " + out + " has no selection bias"), std::string::npos) << r.err;
    // --collapse-share 1: every expert under its fair share warns, per 3-step window.
    EXPECT_NE(r.err.find("over the last 3 steps"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("over the last 6 steps"), std::string::npos) << r.err;
}

TEST(TrainCli, StopAndResumeEqualsStraightRun) {
    const std::string a = (temp_dir() / "a.ckpt").string(), b = (temp_dir() / "b.ckpt").string();
    const std::string common = "train --data " + data_file() + " --steps 16 --save-every 8 --bias-balance 0.001" + kShape;
    ASSERT_EQ(run_moe(common + " --checkpoint " + a).code, 0);
    const Result s = run_moe(common + " --checkpoint " + b + " --stop-at 8");
    ASSERT_EQ(s.code, 0) << s.err;
    EXPECT_EQ(train::read_checkpoint(b).step, 8);
    const Result r = run_moe("train --data " + data_file() + " --resume " + b + " --threads 2 --eval-every 0 --bias-balance 0.001 --aux-loss 0.01 --z-loss 0.001");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("resuming"), std::string::npos) << r.err;
    const train::Checkpoint ca = train::read_checkpoint(a), cb = train::read_checkpoint(b);
    EXPECT_EQ(ca.step, 16);
    EXPECT_EQ(cb.step, 16);
    EXPECT_EQ(ca.params, cb.params);
    EXPECT_EQ(ca.opt.m, cb.opt.m);
    ASSERT_EQ(ca.sel_bias.size(), 2u);
    EXPECT_EQ(ca.sel_bias, cb.sel_bias);
    EXPECT_FALSE(ca.sel_bias[0].empty());
}

TEST(TrainCli, BadInputIsOneClearError) {
    auto expect_error = [](const Result& r, const std::string& what) {
        EXPECT_EQ(r.code, 1) << r.err;
        EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    };
    EXPECT_EQ(run_moe("train --steps 3").code, 2);
    expect_error(run_moe("train --data /nonexistent/t.txt"), "[train] cannot open --data /nonexistent/t.txt");
    expect_error(run_moe("train --data " + data_file() + " --experts 4 --top-k 5"), "--top-k 5 must be in [1, --experts 4]");
    expect_error(run_moe("train --data " + data_file() + " --heads 3 --kv-heads 2"), "must be a multiple of --kv-heads");
    expect_error(run_moe("train --data " + data_file() + " --experts 1 --top-k 1 --out x.gguf"), "dense model");
    expect_error(run_moe("train --data " + data_file() + " --aux-loss -1"), "--aux-loss must be a finite number >= 0");
    expect_error(run_moe("train --data " + data_file() + " --type q4_0"), "--type 'q4_0' is not supported");
    expect_error(run_moe("train --data " + data_file() + " --preset huge"), "--preset 'huge' is unknown (known: tiny, small, shakespeare)");
    expect_error(run_moe("train --data " + data_file() + " --preset tiny --shared-ff 8 --head-dim 8"),
                 "--heads 2 x --head-dim 8 must equal --embd 32");
    expect_error(run_moe("train --data " + data_file() + " --preset tiny --shared-ff 8 --experts 1 --top-k 1"),
                 "--shared-ff needs a routed MoE");
    expect_error(run_moe("train --data " + data_file() + " --collapse-share 2"), "--collapse-share 2 must be <= 1");
    const fs::path tiny = temp_dir() / "tiny.txt";
    std::ofstream(tiny) << "a\nb\n";
    expect_error(run_moe("train --data " + tiny.string()), "too short");
    // A model GGUF is not a checkpoint.
    const std::string m = (temp_dir() / "plain.gguf").string();
    ASSERT_EQ(run_moe("train --data " + data_file() + " --out " + m + " --steps 1" + kShape).code, 0);
    expect_error(run_moe("train --data " + data_file() + " --resume " + m), "train.step is missing");
}
