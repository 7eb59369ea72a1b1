// `moe perplexity`: llama.cpp's perplexity method (tools/perplexity/perplexity.cpp,
// perplexity()), so the two numbers can be compared on the same file and text:
//  - tokenize the whole text (BOS first when the vocab adds one);
//  - cut it into n_chunk = n_tokens / n_ctx non-overlapping chunks of n_ctx tokens (at least 2 chunks'
//    worth of tokens is required, as in llama.cpp); the first token of each chunk is replaced by BOS
//    when the vocab adds BOS;
//  - evaluate each chunk from an empty cache and score only its second half: logits at positions
//    first = n_ctx/2 .. n_ctx-2 predict the next token; NLL = -log softmax(logits)[next];
//  - PPL = exp(sum NLL / count), with llama.cpp's +/- estimate (sd of the NLL / sqrt(count - 1), * PPL).
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "model/model.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "tools/lib/commands.h"
#include "tools/lib/ep_args.h"
#include "tools/lib/infer_args.h"

namespace moe::tools {
namespace {

void perplexity_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe perplexity -m MODEL -f FILE [--ctx N] [--chunks N] [-t THREADS] [--batch N]\n"
                 "                      [--kv-type f32|f16|q8_0]\n"
                 "  Perplexity of FILE's text, computed as llama.cpp's llama-perplexity does (chunks of N\n"
                 "  tokens, second half of each chunk scored), so the numbers are comparable.\n"
                 "  --ctx N      chunk length (default 512)\n"
                 "  --chunks N   score only the first N chunks (default: all)\n"
                 "  --batch N    rows per forward call (default 512)\n"
                 "  --kv-type T  KV cache type f32 (default), f16 or q8_0 (approximate)\n"
                 "  --routing-trace F  write every MoE layer's routing of every evaluated token as TSV\n"
                 "               (as moe run; chunk after chunk, token = position in its chunk)\n"
                 "  --nll-out F  write the NLL of every scored position (f64, chunk-major) to F\n"
                 "  --top-k K    route every MoE layer with K experts per token instead of the model's k\n"
                 "               (approximation: the quality cost of `moe serve --adaptive-topk`)\n"
                 "%s", kCacheUsage);
    std::fputs(kEpUsage, out);
}

// -log softmax(logits)[target], in double with max subtraction.
double nll_of(const float* logits, int64_t V, int32_t target) {
    double mx = logits[0];
    for (int64_t i = 1; i < V; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
    double sum = 0;
    for (int64_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
    return -(static_cast<double>(logits[target]) - mx - std::log(sum));
}

}  // namespace

int cmd_perplexity(int argc, char** argv) {
    const char* cmd = "perplexity";
    EpArgs epa;
    std::string model, file, nll_out, trace_path;
    int64_t n_ctx = 512, max_chunks = -1;
    DType kv_type = DType::F32;
    int top_k = 0;  // --top-k: experts per token override (0: the model's)
    model::ModelOptions mo = cli_model_options();
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            perplexity_usage(stdout);
            return 0;
        } else if (a == "-m" || a == "--model") {
            model = arg_value(argc, argv, i, cmd);
        } else if (a == "-f" || a == "--file") {
            file = arg_value(argc, argv, i, cmd);
        } else if (a == "--ctx" || a == "-c") {
            n_ctx = parse_int(arg_value(argc, argv, i, cmd), "--ctx", cmd, 4, 1 << 20);
        } else if (a == "--chunks") {
            max_chunks = parse_int(arg_value(argc, argv, i, cmd), "--chunks", cmd, 1, INT32_MAX);
        } else if (a == "-t" || a == "--threads") {
            mo.n_threads = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "-t", cmd, 1, 1024));
        } else if (a == "--batch" || a == "-b") {
            mo.max_batch = parse_int(arg_value(argc, argv, i, cmd), "--batch", cmd, 1, 1 << 20);
        } else if (a == "--kv-type") {
            kv_type = parse_kv_type(arg_value(argc, argv, i, cmd), cmd);
        } else if (a == "--routing-trace") {
            trace_path = arg_value(argc, argv, i, cmd);
        } else if (a == "--nll-out") {
            nll_out = arg_value(argc, argv, i, cmd);
        } else if (a == "--top-k") {
            top_k = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "--top-k", cmd, 1, 1 << 16));
        } else if (parse_cache_option(argc, argv, i, cmd, mo.cache)) {
        } else if (parse_ep_arg(argc, argv, i, cmd, epa)) {
        } else {
            std::fprintf(stderr, "moe perplexity: unknown option '%s'\n", a.c_str());
            perplexity_usage(stderr);
            return 2;
        }
    }
    if (model.empty() || file.empty()) {
        std::fprintf(stderr, "moe perplexity: need -m MODEL and -f FILE\n");
        perplexity_usage(stderr);
        return 2;
    }
    const std::string text = read_file(file, cmd);
    mo.n_ctx = n_ctx;
    mo.cache.kv_type = kv_type;  // --mem: the budget's KV term is this session's cache
    auto m = model::Model::load(model, mo);
    std::unique_ptr<EpRuntime> ep;
    if (epa.on && !trace_path.empty())
        throw_error(cmd, "--routing-trace with --ep would record only this rank's tokens; record it without --ep");
    if (epa.on) ep = std::make_unique<EpRuntime>(epa, *m, argc, argv, cmd);
    else check_no_ep_options(epa, cmd);
    if (top_k > 0) {
        for (int64_t il = 0; il < m->config().n_layer; ++il)
            if (MoeBlock* b = m->moe_block(il)) b->set_active_k(top_k);
        std::fprintf(stderr, "moe perplexity: routing with %d experts per token (the model uses %lld)\n", top_k,
                     static_cast<long long>(m->config().n_expert_used));
    }
    const tokenizer::Tokenizer& tok = m->tokenizer();
    tokenizer::EncodeOptions eo;  // BOS when the vocab adds one (llama.cpp: add_special = true), no EOS
    eo.add_eos = false;
    std::vector<int32_t> tokens = tok.encode(text, eo);
    const bool add_bos = tok.vocab().add_bos && tok.vocab().bos_id >= 0;
    const int64_t n_tok = static_cast<int64_t>(tokens.size());
    if (n_tok < 2 * n_ctx)
        throw_error(cmd, file, " has ", n_tok, " tokens; perplexity with a context of ", n_ctx, " needs at least ",
                    2 * n_ctx, " (use a longer text or a smaller --ctx)");
    int64_t n_chunk = n_tok / n_ctx;
    if (max_chunks > 0) n_chunk = std::min(n_chunk, max_chunks);
    const int64_t V = m->config().n_vocab;
    const int64_t first = n_ctx / 2;
    std::fprintf(stderr, "moe perplexity: %s\nmoe perplexity: %lld tokens, %lld chunks of %lld, scoring positions %lld..%lld\n",
                 m->describe().c_str(), static_cast<long long>(n_tok), static_cast<long long>(n_chunk),
                 static_cast<long long>(n_ctx), static_cast<long long>(first), static_cast<long long>(n_ctx - 2));

    ThreadPool pool(m->options().n_threads);
    runtime::Session session(*m, pool, {n_ctx, 1, kv_type});
    std::vector<float> logits(static_cast<size_t>(n_ctx * V));
    RoutingTrace trace;
    if (!trace_path.empty()) session.stats().trace = &trace;
    // NLL of every scored position [n_chunk, per], summed in chunk and position order afterwards
    // (the same order and bits with or without --ep-dp).
    const int64_t per = n_ctx - 1 - first;
    std::vector<double> nlls(static_cast<size_t>(n_chunk * per), 0.0);
    // --ep-dp: rank r evaluates chunks r, r + R, ... (its own KV cache, attention and router); a
    // rank without a chunk in a round still takes part in the MoE exchanges of each of the round's
    // forward calls (ceil(n_ctx / batch) per chunk, as Session::eval makes them).
    const bool dp = ep && ep->data_parallel();
    const int R = dp ? ep->group().size() : 1, me = dp ? ep->group().rank() : 0;
    const int64_t B = m->options().max_batch, calls = (n_ctx + B - 1) / B;
    double nll = 0, nll2 = 0;
    int64_t count = 0, printed = 0;
    auto print_upto = [&](int64_t c_end) {
        for (; printed < c_end; ++printed) {
            for (int64_t i = 0; i < per; ++i) {
                const double v = nlls[static_cast<size_t>(printed * per + i)];
                nll += v;
                nll2 += v * v;
                ++count;
            }
            std::printf("[%lld]%.4f,", static_cast<long long>(printed + 1), std::exp(nll / count));
            std::fflush(stdout);
        }
    };
    Timer t;
    for (int64_t c0 = 0; c0 < n_chunk; c0 += R) {
        const int64_t c = c0 + me;
        if (c < n_chunk) {
            std::vector<int32_t> chunk(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
            if (add_bos) chunk[0] = tok.vocab().bos_id;
            session.clear(0);
            session.eval(0, chunk, logits.data(), true);
            for (int64_t i = first; i < n_ctx - 1; ++i)
                nlls[static_cast<size_t>(c * per + i - first)] =
                    nll_of(logits.data() + i * V, V, chunk[static_cast<size_t>(i + 1)]);
        } else {
            for (int64_t j = 0; j < calls; ++j) ep->idle_step(*m, pool);
        }
        if (!dp) print_upto(c + 1);
    }
    if (dp) {  // every position's value comes from one rank, the others add exact zeros
        ep->group().all_reduce_sum(nlls.data(), static_cast<int64_t>(nlls.size()));
        print_upto(n_chunk);
    }
    if (!trace_path.empty()) trace.write_tsv(trace_path);
    if (!nll_out.empty() && (!ep || ep->is_root())) {
        std::FILE* f = std::fopen(nll_out.c_str(), "wb");
        if (!f) throw_error(cmd, "cannot create ", nll_out, ": ", std::strerror(errno));
        const size_t w = std::fwrite(nlls.data(), sizeof(double), nlls.size(), f);
        if (std::fclose(f) != 0 || w != nlls.size()) throw_error(cmd, "cannot write ", nll_out);
    }
    std::printf("\n");
    const double mean = nll / count;
    const double ppl = std::exp(mean);
    double var = nll2 / count - mean * mean;
    const double sd = var > 0 ? std::sqrt(var / (count - 1)) : 0.0;
    std::printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, sd * ppl);
    if (const ExpertCache* c = m->expert_cache()) std::fprintf(stderr, "moe perplexity: %s\n", c->summary().c_str());
    std::fprintf(stderr, "moe perplexity: %lld tokens scored in %.2f s (%.1f tok/s evaluated)\n",
                 static_cast<long long>(count), t.seconds(), static_cast<double>(n_chunk * n_ctx) / t.seconds());
    if (ep) ep->report(*m);
    return 0;
}

}  // namespace moe::tools
