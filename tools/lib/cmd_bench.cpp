// `moe bench`: prompt-processing and generation speed, printed as llama-bench-style markdown rows
// so the two tools' tables can be put side by side:
//  - pp N: N random tokens evaluated as one sequence from an empty cache in batches of --batch
//    (llama-bench: n_batch/n_ubatch 2048/512; here one batch of up to 512 rows);
//  - tg N: N tokens decoded one at a time from an empty cache (as llama-bench's tg test);
//  - one warm-up run of each test, then -r repetitions; t/s = mean ± sample sd over repetitions.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "kernels/cpu/isa.h"
#include "model/model.h"
#include "runtime/session.h"
#include "tools/lib/commands.h"
#include "tools/lib/infer_args.h"

namespace moe::tools {
namespace {

void bench_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe bench -m MODEL [-p N] [-n N] [-t THREADS] [-r REPS] [--batch N]\n"
                 "  Prints llama-bench-style markdown rows: pp N (prompt tokens/s) and tg N (generated\n"
                 "  tokens/s), mean ± sd over REPS runs after one warm-up.\n"
                 "  -p N       prompt tokens (default 512; 0 = skip)\n"
                 "  -n N       generated tokens (default 128; 0 = skip)\n"
                 "  -t N       threads (default: all cores)\n"
                 "  -r N       repetitions (default 5)\n"
                 "  --batch N  rows per forward call for pp (default 512)\n");
}

std::vector<int32_t> random_tokens(int64_t n, int64_t V, uint64_t seed) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (auto& v : t) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(V));
    }
    return t;
}

std::string human_size(double bytes) {
    char b[32];
    if (bytes >= 1024.0 * 1024 * 1024) std::snprintf(b, sizeof b, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else std::snprintf(b, sizeof b, "%.2f MiB", bytes / (1024.0 * 1024));
    return b;
}
std::string human_params(double n) {
    char b[32];
    if (n >= 1e9) std::snprintf(b, sizeof b, "%.2f B", n / 1e9);
    else if (n >= 1e6) std::snprintf(b, sizeof b, "%.2f M", n / 1e6);
    else std::snprintf(b, sizeof b, "%.2f K", n / 1e3);
    return b;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
    const char* cmd = "bench";
    std::string model;
    int64_t n_prompt = 512, n_gen = 128, reps = 5;
    model::ModelOptions mo;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            bench_usage(stdout);
            return 0;
        } else if (a == "-m" || a == "--model") {
            model = arg_value(argc, argv, i, cmd);
        } else if (a == "-p") {
            n_prompt = parse_int(arg_value(argc, argv, i, cmd), "-p", cmd, 0, 1 << 20);
        } else if (a == "-n") {
            n_gen = parse_int(arg_value(argc, argv, i, cmd), "-n", cmd, 0, 1 << 20);
        } else if (a == "-t" || a == "--threads") {
            mo.n_threads = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "-t", cmd, 1, 1024));
        } else if (a == "-r" || a == "--repetitions") {
            reps = parse_int(arg_value(argc, argv, i, cmd), "-r", cmd, 1, 1000);
        } else if (a == "--batch" || a == "-b") {
            mo.max_batch = parse_int(arg_value(argc, argv, i, cmd), "--batch", cmd, 1, 1 << 20);
        } else {
            std::fprintf(stderr, "moe bench: unknown option '%s'\n", a.c_str());
            bench_usage(stderr);
            return 2;
        }
    }
    if (model.empty()) {
        std::fprintf(stderr, "moe bench: need -m MODEL\n");
        bench_usage(stderr);
        return 2;
    }
    mo.n_ctx = std::max<int64_t>(n_prompt + n_gen, 16);
    mo.max_batch = std::min(mo.max_batch, std::max<int64_t>(n_prompt, 1));
    auto m = model::Model::load(model, mo);
    const int threads = m->options().n_threads;
    ThreadPool pool(threads);
    runtime::Session session(*m, pool, {mo.n_ctx, 1, DType::F32});
    const int64_t V = m->config().n_vocab;
    std::vector<float> logits(static_cast<size_t>(V));

    std::printf("| model | size | params | backend | threads | test | t/s |\n");
    std::printf("| ----- | ---: | -----: | ------- | ------: | ---: | --: |\n");
    const std::string name = m->config().arch + " " + m->config().name;
    auto row = [&](const std::string& test, int64_t n, auto&& body) {
        body(0);  // warm-up
        std::vector<double> tps;
        for (int64_t r = 0; r < reps; ++r) {
            Timer t;
            body(r + 1);
            tps.push_back(static_cast<double>(n) / t.seconds());
        }
        double mean = 0, var = 0;
        for (double v : tps) mean += v;
        mean /= static_cast<double>(tps.size());
        for (double v : tps) var += (v - mean) * (v - mean);
        const double sd = tps.size() > 1 ? std::sqrt(var / static_cast<double>(tps.size() - 1)) : 0.0;
        std::printf("| %s | %s | %s | CPU (%s) | %d | %s | %.2f ± %.2f |\n", name.c_str(),
                    human_size(static_cast<double>(m->file_bytes())).c_str(),
                    human_params(static_cast<double>(m->n_params())).c_str(), kernels::isa_name(m->kernels().isa()),
                    threads, test.c_str(), mean, sd);
        std::fflush(stdout);
    };
    if (n_prompt > 0)
        row("pp" + std::to_string(n_prompt), n_prompt, [&](int64_t rep) {
            session.clear(0);
            session.eval(0, random_tokens(n_prompt, V, static_cast<uint64_t>(rep)), logits.data(), false);
        });
    if (n_gen > 0)
        row("tg" + std::to_string(n_gen), n_gen, [&](int64_t rep) {
            session.clear(0);
            const auto toks = random_tokens(n_gen, V, 1000 + static_cast<uint64_t>(rep));
            for (int32_t id : toks) session.eval(0, {id}, logits.data(), false);
        });
    std::printf("\nbuild: moe-engine %s (%s)\n", MOE_VERSION, MOE_BUILD_FLAGS);
    return 0;
}

}  // namespace moe::tools
