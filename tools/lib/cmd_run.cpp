// `moe run`: generate text from a prompt with a GGUF model (or the built-in default model),
// streaming the text, then printing the speed / MoE stage / expert-load statistics.
#include <cstdio>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/session.h"
#include "tools/lib/commands.h"
#include "tools/lib/ep_args.h"
#include "tools/lib/infer_args.h"

namespace moe::tools {
namespace {

void run_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe run [-m MODEL] -p TEXT [-n N] [--temp T] [--top-p P] [--top-k K] [--seed S]\n"
                 "               [-t THREADS] [--ctx N] [--kv-type f32|f16|q8_0] [--swa-full] [--routing-trace FILE]\n"
                 "  Generates text after TEXT, streaming it to stdout; statistics go to stderr.\n"
                 "  -m MODEL         GGUF model (default: the built-in Shakespeare MoE, %s;\n"
                 "                   without it the random-weight %s preset in ~/.cache/moe-engine/)\n"
                 "  -p TEXT          prompt\n"
                 "  -n N             tokens to generate (default 64; stops early at EOS)\n"
                 "  --temp T         temperature (default 0.8; 0 = greedy)\n"
                 "  --top-p P        nucleus sampling (default 0.95; 1 = off)\n"
                 "  --top-k K        top-k (default 40; 0 = off)\n"
                 "  --seed S         sampler seed (default 0)\n"
                 "  -t THREADS       threads (default: all cores)\n"
                 "  --ctx N          context length (default: min(training context, 4096))\n"
                 "  --kv-type T      KV cache type f32 (default), f16 or q8_0 (approximate)\n"
                 "  --swa-full       sliding-window layers keep every position (default: a ring of\n"
                 "                   window + batch - 1 rows; same results, less memory)\n"
                 "  --routing-trace FILE  write every MoE layer's routing of every token (prompt\n"
                 "                   and generated) as TSV: layer, token position, experts, weights\n"
                 "%s",
                 trained_default_model_path().c_str(), kDefaultPreset, kCacheUsage);
    std::fputs(kEpUsage, out);
}

}  // namespace

int cmd_run(int argc, char** argv) {
    const char* cmd = "run";
    EpArgs epa;
    std::string model, prompt, trace_path;
    bool have_prompt = false;
    runtime::GenerateOptions gen;
    model::ModelOptions mo = cli_model_options();
    runtime::SessionOptions so;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            run_usage(stdout);
            return 0;
        } else if (a == "-m" || a == "--model") {
            model = arg_value(argc, argv, i, cmd);
        } else if (a == "-p" || a == "--prompt") {
            prompt = arg_value(argc, argv, i, cmd);
            have_prompt = true;
        } else if (a == "-n" || a == "--n-predict") {
            gen.n_predict = parse_int(arg_value(argc, argv, i, cmd), "-n", cmd, 0, 1 << 24);
        } else if (a == "--temp") {
            gen.sampler.temperature = static_cast<float>(parse_double(arg_value(argc, argv, i, cmd), "--temp", cmd));
        } else if (a == "--top-p") {
            gen.sampler.top_p = static_cast<float>(parse_double(arg_value(argc, argv, i, cmd), "--top-p", cmd));
        } else if (a == "--top-k") {
            gen.sampler.top_k = static_cast<int32_t>(parse_int(arg_value(argc, argv, i, cmd), "--top-k", cmd, 0, INT32_MAX));
        } else if (a == "--routing-trace") {
            trace_path = arg_value(argc, argv, i, cmd);
        } else if (a == "--seed") {
            gen.sampler.seed = static_cast<uint64_t>(parse_int(arg_value(argc, argv, i, cmd), "--seed", cmd, 0, INT64_MAX));
        } else if (a == "-t" || a == "--threads") {
            mo.n_threads = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "-t", cmd, 1, 1024));
        } else if (a == "--ctx" || a == "-c") {
            mo.n_ctx = so.n_ctx = parse_int(arg_value(argc, argv, i, cmd), "--ctx", cmd, 1, 1 << 24);
        } else if (a == "--kv-type") {
            so.kv_type = parse_kv_type(arg_value(argc, argv, i, cmd), cmd);
        } else if (a == "--swa-full") {
            so.swa_full = true;
        } else if (parse_cache_option(argc, argv, i, cmd, mo.cache)) {
        } else if (parse_ep_arg(argc, argv, i, cmd, epa)) {
        } else {
            std::fprintf(stderr, "moe run: unknown option '%s'\n", a.c_str());
            run_usage(stderr);
            return 2;
        }
    }
    if (!have_prompt) {
        std::fprintf(stderr, "moe run: need -p TEXT\n");
        run_usage(stderr);
        return 2;
    }
    if (model.empty()) {
        bool generated = false;
        std::string what;
        model = default_model(generated, &what);
        std::fprintf(stderr, "moe run: no -m given: using the built-in default model (%s) %s %s\n", what.c_str(),
                     generated ? "generated now at" : "at", model.c_str());
    }
    if (!trace_path.empty()) {  // fail before loading and generating, not after
        std::FILE* f = std::fopen(trace_path.c_str(), "wb");
        if (!f) throw_error("run", "cannot open routing trace file ", trace_path, " for writing (check the path)");
        std::fclose(f);
    }
    mo.cache.kv_type = so.kv_type;  // --mem: the budget's KV term is the cache this session makes
    mo.cache.swa_full = so.swa_full;
    auto m = model::Model::load(model, mo);
    std::unique_ptr<EpRuntime> ep;
    if (epa.on && !trace_path.empty())
        throw_error(cmd, "--routing-trace with --ep would record only this rank's tokens; record it without --ep");
    if (epa.on) ep = std::make_unique<EpRuntime>(epa, *m, argc, argv, cmd);
    else check_no_ep_options(epa, cmd);
    std::fprintf(stderr, "moe run: %s\n", m->describe().c_str());
    if (!m->amx_bf16_note().empty()) std::fprintf(stderr, "moe run: %s\n", m->amx_bf16_note().c_str());
    ThreadPool pool(m->options().n_threads);
    runtime::Session session(*m, pool, so);
    RoutingTrace trace;
    if (!trace_path.empty()) session.stats().trace = &trace;
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
    const runtime::GenerateResult r = session.generate(prompt, gen, [](const std::string& piece) {
        std::fputs(piece.c_str(), stdout);
        std::fflush(stdout);
    });
    std::fputs("\n", stdout);
    std::fflush(stdout);
    std::fprintf(stderr, "%s%s\n", r.stats_line().c_str(),
                 r.hit_eos ? " (stopped at EOS)" : r.context_full ? " (context full)" : "");
    if (const ExpertCache* c = m->expert_cache()) std::fprintf(stderr, "%s\n", c->summary().c_str());
    if (!trace_path.empty()) {
        trace.write_tsv(trace_path);
        std::fprintf(stderr, "routing trace: %zu records (layer x token) written to %s\n", trace.size(), trace_path.c_str());
    }
    if (ep) ep->report(*m);
    return 0;
}

}  // namespace moe::tools
