// `moe eval`: logits of a token list, for parity checks against other engines.
// Output: raw float32 [n_tokens][n_vocab], row i = logits after tokens 0..i (no BOS added).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/session.h"
#include "tools/lib/commands.h"
#include "tools/lib/ep_args.h"
#include "tools/lib/infer_args.h"

namespace moe::tools {
namespace {

void eval_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe eval -m MODEL --tokens 1,2,3 --logits-out FILE [-t THREADS] [--ctx N]\n"
                 "                [--batch N] [--kv-type f32|f16|q8_0]\n"
                 "  Evaluates the token ids as one sequence from position 0 (no BOS is added) and writes\n"
                 "  float32 logits [n_tokens][n_vocab] (little-endian, no header) to FILE: row i = logits\n"
                 "  after tokens 0..i.\n"
                 "  --batch N     rows per forward call (default 512)\n"
                 "  --routing-trace FILE  write every MoE layer's routing of every token as TSV (as moe run)\n"
                 "%s", kCacheUsage);
    std::fputs(kEpUsage, out);
}

}  // namespace

int cmd_eval(int argc, char** argv) {
    const char* cmd = "eval";
    EpArgs epa;
    std::string model, out_path, token_arg, trace_path;
    bool have_tokens = false;
    model::ModelOptions mo = cli_model_options();
    runtime::SessionOptions so;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            eval_usage(stdout);
            return 0;
        } else if (a == "-m" || a == "--model") {
            model = arg_value(argc, argv, i, cmd);
        } else if (a == "--tokens") {
            token_arg = arg_value(argc, argv, i, cmd);
            have_tokens = true;
        } else if (a == "--routing-trace") {
            trace_path = arg_value(argc, argv, i, cmd);
        } else if (a == "--logits-out") {
            out_path = arg_value(argc, argv, i, cmd);
        } else if (a == "-t" || a == "--threads") {
            mo.n_threads = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "-t", cmd, 1, 1024));
        } else if (a == "--ctx" || a == "-c") {
            mo.n_ctx = so.n_ctx = parse_int(arg_value(argc, argv, i, cmd), "--ctx", cmd, 1, 1 << 24);
        } else if (a == "--batch" || a == "-b") {
            mo.max_batch = parse_int(arg_value(argc, argv, i, cmd), "--batch", cmd, 1, 1 << 20);
        } else if (a == "--kv-type") {
            so.kv_type = parse_kv_type(arg_value(argc, argv, i, cmd), cmd);
        } else if (parse_cache_option(argc, argv, i, cmd, mo.cache)) {
        } else if (parse_ep_arg(argc, argv, i, cmd, epa)) {
        } else {
            std::fprintf(stderr, "moe eval: unknown option '%s'\n", a.c_str());
            eval_usage(stderr);
            return 2;
        }
    }
    if (model.empty() || !have_tokens || out_path.empty()) {
        std::fprintf(stderr, "moe eval: need -m MODEL, --tokens LIST and --logits-out FILE\n");
        eval_usage(stderr);
        return 2;
    }
    const std::vector<int32_t> tokens = parse_token_list(token_arg, cmd);
    if (tokens.empty()) throw_error(cmd, "--tokens is empty; give at least one token id");
    mo.cache.kv_type = so.kv_type;  // --mem: the budget's KV term is this session's cache
    auto m = model::Model::load(model, mo);
    std::unique_ptr<EpRuntime> ep;
    if (epa.on && !trace_path.empty())
        throw_error(cmd, "--routing-trace with --ep would record only this rank's tokens; record it without --ep");
    if (epa.on) ep = std::make_unique<EpRuntime>(epa, *m, argc, argv, cmd);
    else check_no_ep_options(epa, cmd);
    const int64_t V = m->config().n_vocab;
    for (size_t i = 0; i < tokens.size(); ++i)
        if (tokens[i] >= V)
            throw_error(cmd, "token id ", tokens[i], " (position ", i, " in --tokens) is out of range: the model's "
                        "vocabulary has ", V, " tokens (ids 0..", V - 1, ")");
    ThreadPool pool(m->options().n_threads);
    runtime::Session session(*m, pool, so);
    std::vector<float> logits(tokens.size() * static_cast<size_t>(V));
    RoutingTrace trace;
    if (!trace_path.empty()) session.stats().trace = &trace;
    session.eval(0, tokens, logits.data(), true);
    if (!trace_path.empty()) trace.write_tsv(trace_path);

    if (ep && !ep->is_root()) {  // every rank has the same logits; rank 0 writes them
        ep->report(*m);
        return 0;
    }
    std::FILE* f = std::fopen(out_path.c_str(), "wb");
    if (!f) throw_error(cmd, "cannot create ", out_path, ": ", std::strerror(errno));
    const size_t n = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
    const bool ok = n == logits.size() && std::fclose(f) == 0;
    if (!ok) {
        std::remove(out_path.c_str());
        throw_error(cmd, "cannot write ", out_path, ": ", std::strerror(errno));
    }
    if (const ExpertCache* c = m->expert_cache()) std::fprintf(stderr, "moe eval: %s\n", c->summary().c_str());
    std::fprintf(stderr, "moe eval: wrote %zu x %lld float32 logits to %s\n", tokens.size(), static_cast<long long>(V),
                 out_path.c_str());
    if (ep) ep->report(*m);
    return 0;
}

}  // namespace moe::tools
