// `moe bench-serve`: load generator for an OpenAI-compatible server (moe serve or llama-server).
// N concurrent clients each send streaming /v1/completions requests from a fixed prompt-length x
// output-length mix until the request count is reached; reports aggregate output tokens/s, time
// to first token and inter-token latency percentiles. Greedy, ignore_eos, and every prompt starts
// with its own request number, so neither server can reuse a cached prefix.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/timer.h"
#include "tools/lib/commands.h"
#include "tools/lib/infer_args.h"

namespace moe::tools {
namespace {

void bench_serve_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe bench-serve --port P [--host H] [-c N] [-n REQUESTS] [--prompt-words LIST]\n"
                 "                       [--max-tokens LIST] [--api-key KEY] [--label TEXT]\n"
                 "  Drives a running OpenAI-compatible server with N concurrent streaming clients.\n"
                 "  -c N               concurrent clients (default 8)\n"
                 "  -n REQUESTS        requests in all (default 4 x N)\n"
                 "  --prompt-words L   prompt lengths in words, cycled (default 64,256)\n"
                 "  --max-tokens L     output lengths in tokens, cycled (default 64,128)\n"
                 "  --label TEXT       first column of the result line (default: host:port)\n");
}

std::vector<int64_t> parse_list(const std::string& s, const char* opt) {
    std::vector<int64_t> v;
    size_t p = 0;
    while (p <= s.size()) {
        const size_t e = std::min(s.find(',', p), s.size());
        v.push_back(parse_int(s.substr(p, e - p), opt, "bench-serve", 1, 1 << 20));
        p = e + 1;
    }
    return v;
}

double pct(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
    return v[i];
}

// Deterministic filler text: words from a small list.
std::string prompt_text(int64_t id, int64_t words) {
    static const char* kWords[] = {"the", "river", "stone", "quietly", "moves", "under", "a", "bright",
                                   "winter", "sky", "while", "old", "friends", "talk", "about", "time"};
    std::string s = "Request " + std::to_string(id) + ":";
    for (int64_t i = 0; i < words; ++i) s += std::string(" ") + kWords[(id * 7 + i * 3) % 16];
    return s;
}

}  // namespace

int cmd_bench_serve(int argc, char** argv) {
    const char* cmd = "bench-serve";
    std::string host = "127.0.0.1", api_key, label;
    int port = 0;
    int64_t clients = 8, requests = 0;
    std::vector<int64_t> prompt_words = {64, 256}, max_tokens = {64, 128};
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            bench_serve_usage(stdout);
            return 0;
        } else if (a == "--host") host = arg_value(argc, argv, i, cmd);
        else if (a == "--port") port = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "--port", cmd, 1, 65535));
        else if (a == "-c") clients = parse_int(arg_value(argc, argv, i, cmd), "-c", cmd, 1, 1024);
        else if (a == "-n") requests = parse_int(arg_value(argc, argv, i, cmd), "-n", cmd, 1, 1 << 20);
        else if (a == "--prompt-words") prompt_words = parse_list(arg_value(argc, argv, i, cmd), "--prompt-words");
        else if (a == "--max-tokens") max_tokens = parse_list(arg_value(argc, argv, i, cmd), "--max-tokens");
        else if (a == "--api-key") api_key = arg_value(argc, argv, i, cmd);
        else if (a == "--label") label = arg_value(argc, argv, i, cmd);
        else {
            std::fprintf(stderr, "moe bench-serve: unknown option '%s'\n", a.c_str());
            bench_serve_usage(stderr);
            return 2;
        }
    }
    if (port == 0) {
        std::fprintf(stderr, "moe bench-serve: need --port\n");
        bench_serve_usage(stderr);
        return 2;
    }
    if (requests == 0) requests = 4 * clients;
    if (label.empty()) label = host + ":" + std::to_string(port);

    std::mutex mu;
    std::vector<double> ttft, itl;
    int64_t out_tokens = 0, errors = 0, ok = 0;
    std::string first_error;
    std::atomic<int64_t> next{0};
    Timer wall;
    auto worker = [&] {
        httplib::Client c(host, port);
        c.set_read_timeout(600, 0);
        if (!api_key.empty()) c.set_bearer_token_auth(api_key);
        for (int64_t id; (id = next++) < requests;) {
            const int64_t pw = prompt_words[static_cast<size_t>(id) % prompt_words.size()];
            const int64_t mt = max_tokens[static_cast<size_t>(id / static_cast<int64_t>(prompt_words.size())) % max_tokens.size()];
            const nlohmann::json body = {{"prompt", prompt_text(id, pw)}, {"max_tokens", mt}, {"temperature", 0},
                                         {"ignore_eos", true}, {"stream", true},
                                         {"stream_options", {{"include_usage", true}}}};
            std::vector<double> times;  // seconds since send of each token event
            int64_t usage_tokens = -1;
            std::string buf;
            Timer t;
            httplib::Request req;
            req.method = "POST";
            req.path = "/v1/completions";
            req.body = body.dump();
            req.set_header("Content-Type", "application/json");
            std::string raw;  // start of the body, for error messages
            req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
                if (raw.size() < 300) raw.append(d, std::min<size_t>(n, 300));
                buf.append(d, n);
                size_t e;
                while ((e = buf.find("\n\n")) != std::string::npos) {
                    const std::string ev = buf.substr(0, e);
                    buf.erase(0, e + 2);
                    if (ev.rfind("data: ", 0) != 0 || ev == "data: [DONE]") continue;
                    const auto j = nlohmann::json::parse(ev.substr(6), nullptr, false);
                    if (j.is_discarded()) continue;
                    if (j.contains("usage") && j["usage"].is_object() && j["usage"].contains("completion_tokens"))
                        usage_tokens = j["usage"]["completion_tokens"].get<int64_t>();
                    // A token event: a choice with text (possibly empty: tokens without text count)
                    // that is not the closing one.
                    if (j.contains("choices") && !j["choices"].empty() && j["choices"][0].contains("text") &&
                        j["choices"][0]["text"].is_string() &&
                        (!j["choices"][0].contains("finish_reason") || j["choices"][0]["finish_reason"].is_null()))
                        times.push_back(t.seconds());
                }
                return true;
            };
            httplib::Response res;
            httplib::Error err;
            const bool sent = c.send(req, res, err);
            std::lock_guard<std::mutex> l(mu);
            if (!sent || res.status != 200 || times.empty()) {
                ++errors;
                if (first_error.empty())
                    first_error = !sent ? httplib::to_string(err) : "HTTP " + std::to_string(res.status) + " " + raw;
                continue;
            }
            ++ok;
            out_tokens += usage_tokens >= 0 ? usage_tokens : static_cast<int64_t>(times.size());
            ttft.push_back(times[0]);
            for (size_t i = 1; i < times.size(); ++i) itl.push_back(times[i] - times[i - 1]);
        }
    };
    std::vector<std::thread> ts;
    for (int64_t i = 0; i < clients; ++i) ts.emplace_back(worker);
    for (auto& t : ts) t.join();
    const double w = wall.seconds();
    std::printf("%-24s clients %3lld  requests %4lld ok %4lld err %3lld  wall %7.1f s  out %6lld tok  %7.2f tok/s  "
                "TTFT p50 %7.0f ms p99 %7.0f ms  ITL p50 %6.0f ms p99 %6.0f ms\n",
                label.c_str(), static_cast<long long>(clients), static_cast<long long>(requests),
                static_cast<long long>(ok), static_cast<long long>(errors), w, static_cast<long long>(out_tokens),
                static_cast<double>(out_tokens) / w, 1e3 * pct(ttft, 0.5), 1e3 * pct(ttft, 0.99), 1e3 * pct(itl, 0.5),
                1e3 * pct(itl, 0.99));
    if (errors) std::fprintf(stderr, "moe bench-serve: %lld requests failed; first: %s\n", static_cast<long long>(errors), first_error.c_str());
    return errors ? 1 : 0;
}

}  // namespace moe::tools
