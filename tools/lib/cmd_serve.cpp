// `moe serve`: the OpenAI-compatible HTTP server (docs/SERVER.md). SIGTERM / SIGINT drain: new
// requests get 503, requests in flight finish, then the process exits 0.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "server/server.h"
#include "tools/lib/commands.h"
#include "tools/lib/infer_args.h"

namespace moe::tools {
namespace {

void serve_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe serve -m MODEL [--host H] [--port P] [-t N] [--parallel N] [--ctx N] [--batch N]\n"
                 "                 [--queue N] [--api-key KEY] [--alias NAME] [--chat-template NAME]\n"
                 "                 [--max-body BYTES] [--kv-type f32|f16|q8_0] [--swa-full] [--adaptive-topk KMIN]\n"
                 "                 [--mem SIZE|auto] [--cache-policy P] [--expert-io M] [--no-direct] [--no-prefetch]\n"
                 "  OpenAI-compatible server with continuous batching (docs/SERVER.md).\n"
                 "  --host H           address to listen on (default 127.0.0.1)\n"
                 "  --port P           port (default 8080; 0 = any free port, printed at startup)\n"
                 "  -t N               threads for the forward pass (default: all cores)\n"
                 "  --parallel N       slots: sequences decoded together (default 4)\n"
                 "  --ctx N            context per slot in tokens (default: min(training context, 4096))\n"
                 "  --batch N          most tokens per forward step, decode rows + prefill chunk (default 256)\n"
                 "  --queue N          requests that may wait for a slot; more get 503 (default 16)\n"
                 "  --api-key KEY      require 'Authorization: Bearer KEY' (not for /, /health, /stats, /metrics)\n"
                 "  --alias NAME       model id in the API (default: the GGUF file name)\n"
                 "  --chat-template F  chatml | mistral | llama3 | deepseek2 | deepseek3 | tulu\n"
                 "                     (default: detected from tokenizer.chat_template; unknown -> chatml + warning)\n"
                 "  --max-body BYTES   largest request body (default 1048576; larger -> 413)\n"
                 "  --kv-type T        KV cache type f32 (default), f16 or q8_0 (approximate)\n"
                 "  --swa-full         sliding-window layers keep every position (default: a ring of\n"
                 "                     window + batch - 1; a reused prefix then needs that ring's rows)\n"
                 "  --adaptive-topk K  APPROXIMATION (changes output): route with fewer experts per token while\n"
                 "                     requests queue (K when >= --parallel wait, halfway when some do, the\n"
                 "                     model's k when none); every change is logged and counted in /metrics\n"
                 "%s"
                 "  (with --mem the KV cache of all --parallel slots counts against the budget; the\n"
                 "   cache's hit rate is in /metrics as moe_expert_cache_*)\n",
                 kCacheUsage);
}

}  // namespace

int cmd_serve(int argc, char** argv) {
    const char* cmd = "serve";
    std::string model;
    model::ModelOptions mo = cli_model_options();
    server::ServerSpec spec;
    runtime::SessionOptions so;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            serve_usage(stdout);
            return 0;
        } else if (a == "-m" || a == "--model") {
            model = arg_value(argc, argv, i, cmd);
        } else if (a == "--host") {
            spec.host = arg_value(argc, argv, i, cmd);
        } else if (a == "--port") {
            spec.port = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "--port", cmd, 0, 65535));
        } else if (a == "-t" || a == "--threads") {
            mo.n_threads = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "-t", cmd, 1, 1024));
        } else if (a == "--parallel" || a == "-np") {
            spec.sched.n_slots = parse_int(arg_value(argc, argv, i, cmd), "--parallel", cmd, 1, 256);
        } else if (a == "--ctx" || a == "-c") {
            mo.n_ctx = spec.sched.n_ctx = parse_int(arg_value(argc, argv, i, cmd), "--ctx", cmd, 2, 1 << 24);
        } else if (a == "--batch" || a == "-b") {
            spec.sched.batch = parse_int(arg_value(argc, argv, i, cmd), "--batch", cmd, 1, 1 << 16);
        } else if (a == "--queue") {
            spec.sched.max_queue = parse_int(arg_value(argc, argv, i, cmd), "--queue", cmd, 0, 1 << 16);
        } else if (a == "--api-key") {
            spec.api_key = arg_value(argc, argv, i, cmd);
        } else if (a == "--alias") {
            spec.model_id = arg_value(argc, argv, i, cmd);
        } else if (a == "--chat-template") {
            spec.chat_template = arg_value(argc, argv, i, cmd);
            (void)server::parse_chat_family(spec.chat_template);  // fail before loading the model
        } else if (a == "--max-body") {
            spec.max_body = static_cast<size_t>(parse_int(arg_value(argc, argv, i, cmd), "--max-body", cmd, 1024, 1 << 30));
        } else if (a == "--adaptive-topk") {
            spec.sched.adaptive_kmin = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "--adaptive-topk", cmd, 1, 1 << 16));
        } else if (a == "--kv-type") {
            so.kv_type = parse_kv_type(arg_value(argc, argv, i, cmd), cmd);
        } else if (a == "--swa-full") {
            so.swa_full = true;
        } else if (parse_cache_option(argc, argv, i, cmd, mo.cache)) {
        } else {
            std::fprintf(stderr, "moe serve: unknown option '%s'\n", a.c_str());
            serve_usage(stderr);
            return 2;
        }
    }
    if (model.empty()) {
        std::fprintf(stderr, "moe serve: need -m MODEL\n");
        serve_usage(stderr);
        return 2;
    }
    spec.sched.kv_type = so.kv_type;
    spec.sched.swa_full = so.swa_full;
    mo.max_batch = spec.sched.batch;
    mo.cache.kv_seqs = spec.sched.n_slots;  // --mem: the budget holds every slot's KV cache
    mo.cache.kv_type = so.kv_type;
    mo.cache.swa_full = so.swa_full;

    // SIGTERM / SIGINT are taken by one thread with sigwait (blocked everywhere else, so the
    // handler needs no global state); it drains the server.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

    auto m = model::Model::load(model, mo);
    std::fprintf(stderr, "moe serve: %s\n", m->describe().c_str());
    if (const ExpertCache* c = m->expert_cache()) std::fprintf(stderr, "moe serve: %s\n", c->summary().c_str());
    ThreadPool pool(m->options().n_threads);
    server::Server srv(*m, pool, spec);
    const int port = srv.bind();
    std::fprintf(stderr, "moe serve: chat template %s (%s); %lld slots x %lld tokens, batch %lld, queue %lld\n",
                 server::chat_family_name(srv.chat_template().family), srv.chat_template().note.c_str(),
                 static_cast<long long>(spec.sched.n_slots), static_cast<long long>(m->options().n_ctx),
                 static_cast<long long>(spec.sched.batch), static_cast<long long>(spec.sched.max_queue));
    std::fprintf(stderr, "moe serve: listening on http://%s:%d\n", spec.host.c_str(), port);
    std::fflush(stderr);

    std::atomic<bool> signalled{false};
    std::thread waiter([&] {
        int sig = 0;
        sigwait(&sigs, &sig);
        signalled.store(true);
        std::fprintf(stderr, "moe serve: signal %d: finishing requests in flight, refusing new ones\n", sig);
        srv.shutdown();
    });
    srv.run();
    // run() returns after shutdown(), or by itself if listening failed: then wake the waiter.
    if (!signalled.load()) pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    if (const ExpertCache* c = m->expert_cache()) std::fprintf(stderr, "moe serve: %s\n", c->summary().c_str());
    std::fprintf(stderr, "moe serve: stopped\n");
    return 0;
}

}  // namespace moe::tools
