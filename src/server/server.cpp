// HTTP endpoints of `moe serve` (server.h, docs/SERVER.md).
#include "server/server.h"

#include <httplib.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "format/gguf.h"
#include "server/api.h"
#include "server/connection.h"
#include "tokenizer/tokenizer.h"

namespace moe::server {

using nlohmann::json;

namespace {
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(dump(error_body(e)), "application/json");
}

std::string chat_template_text(const model::Model& m) {
    return m.file().get_string("tokenizer.chat_template").value_or("");
}
}  // namespace

Server::Server(model::Model& model, ThreadPool& pool, const ServerSpec& spec)
    : model_(model), spec_(spec), http_(std::make_unique<httplib::Server>()) {
    model_id_ = spec.model_id.empty() ? std::filesystem::path(model.path()).filename().string() : spec.model_id;
    if (!spec.chat_template.empty()) {
        chat_.family = parse_chat_family(spec.chat_template);
        chat_.note = "forced by --chat-template";
    } else {
        bool found = false;
        chat_ = detect_chat_template(chat_template_text(model), found);
        if (!found)
            log(LogLevel::Warn, "server", chat_.note, "; /v1/chat/completions falls back to ChatML (",
                "<|im_start|>role ... <|im_end|>); pass --chat-template NAME if the model expects another format");
    }
    sched_ = std::make_unique<Scheduler>(model, pool, spec.sched, metrics_);
    routes();
}

Server::~Server() = default;

int Server::bind() {
    const int port = spec_.port == 0 ? http_->bind_to_any_port(spec_.host) : (http_->bind_to_port(spec_.host, spec_.port) ? spec_.port : -1);
    if (port < 0)
        throw_error("server", "cannot listen on ", spec_.host, ":", spec_.port,
                    " (address in use or not available; choose another --port or --host)");
    return port;
}

void Server::run() { http_->listen_after_bind(); }

void Server::shutdown() {
    draining_.store(true);
    sched_->drain();
    // The scheduler is idle, but streams may still be writing their last events: httplib's stop()
    // cuts chunked responses mid-way, so wait (bounded) until every stream's response is released.
    for (int i = 0; i < 3000 && open_streams_.load() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    http_->stop();
}

void Server::routes() {
    httplib::Server& s = *http_;
    const int threads = static_cast<int>(std::max<int64_t>(8, 2 * (spec_.sched.n_slots + spec_.sched.max_queue) + 4));
    s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    s.set_payload_max_length(spec_.max_body);
    s.set_keep_alive_timeout(2);
    // httplib closes a keep-alive connection after 5 requests by default; a client that sends its
    // 6th request as the server closes gets a read error (seen as ~2% failed requests in
    // bench-serve with 12 requests per connection), so allow many requests per connection.
    s.set_keep_alive_max_count(10000);
    s.set_read_timeout(30);
    s.set_write_timeout(30);

    // httplib's own errors (404 route, 413 body too large, 400 bad request) get an OpenAI body.
    s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string msg = "HTTP " + std::to_string(res.status);
        if (res.status == 404) msg = "no such endpoint (see docs/SERVER.md)";
        else if (res.status == 413)
            msg = "the request body is larger than the limit of " + std::to_string(spec_.max_body) + " bytes";
        send_error(res, api_error(res.status, msg, res.status == 404 ? "not_found_error" : "invalid_request_error"));
        return httplib::Server::HandlerResponse::Handled;
    }));
    s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string msg = "internal error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            msg = e.what();
        } catch (...) {
        }
        send_error(res, api_error(500, msg, "server_error"));
    });
    // Authentication (all but the dashboard, /health, /stats and /metrics).
    s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (spec_.api_key.empty() || req.path == "/" || req.path == "/health" || req.path == "/stats" ||
            req.path == "/metrics")
            return httplib::Server::HandlerResponse::Unhandled;
        if (req.get_header_value("Authorization") == "Bearer " + spec_.api_key)
            return httplib::Server::HandlerResponse::Unhandled;
        send_error(res, api_error(401, "invalid or missing API key (send 'Authorization: Bearer KEY')",
                                 "authentication_error", "", "invalid_api_key"));
        return httplib::Server::HandlerResponse::Handled;
    });

    s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        if (draining_) {
            res.status = 503;
            res.set_content(R"({"status":"shutting down"})", "application/json");
        } else
            res.set_content(R"({"status":"ok"})", "application/json");
    });
    s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(metrics_.prometheus(), "text/plain; version=0.0.4");
    });
    s.Get("/stats", [this](const httplib::Request&, httplib::Response& res) {
        json j = metrics_.snapshot();
        j["model"] = model_id_;
        res.set_content(dump(j), "application/json");
    });
    s.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content(dashboard_html(), "text/html"); });
    s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
        const model::ModelConfig& c = model_.config();
        json m = {{"id", model_id_},
                  {"object", "model"},
                  {"created", 0},
                  {"owned_by", "moe-engine"},
                  {"meta",
                   {{"n_ctx_slot", sched_->n_ctx()},
                    {"n_vocab", c.n_vocab},
                    {"n_layer", c.n_layer},
                    {"n_expert", c.n_expert},
                    {"n_expert_used", c.n_expert_used},
                    {"chat_template", chat_family_name(chat_.family)}}}};
        res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
    });
    s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
        try {
            const TokenizeRequest t = parse_tokenize(parse_body(req.body));
            const auto ids = model_.tokenizer().encode(
                t.content, {.add_bos = t.add_special, .add_eos = t.add_special, .parse_special = true});
            res.set_content(dump(json{{"tokens", ids}}), "application/json");
        } catch (const ApiError& e) {
            send_error(res, e);
        }
    });
    s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
        try {
            const std::vector<int32_t> ids = parse_detokenize(parse_body(req.body), model_.tokenizer());
            res.set_content(dump(json{{"content", model_.tokenizer().decode(ids)}}), "application/json");
        } catch (const ApiError& e) {
            send_error(res, e);
        }
    });

    auto generate = [this](const httplib::Request& req, httplib::Response& res, bool chat) {
        const std::string ep = chat ? "chat" : "completions";
        metrics_.request_started(ep);
        ParsedRequest p;
        try {
            const json j = parse_body(req.body);
            ParseContext ctx{&model_.tokenizer(), model_id_, sched_->n_ctx(), &chat_};
            p = chat ? parse_chat(j, ctx) : parse_completion(j, ctx);
        } catch (const ApiError& e) {
            send_error(res, e);
            metrics_.request_finished(ep, res.status);
            return;
        }
        const int64_t n_prompt = static_cast<int64_t>(p.gen.prompt.size());
        auto r = std::make_shared<Request>(std::move(p.gen));
        const Scheduler::Admit a = draining_ ? Scheduler::Admit::Draining : sched_->submit(r);
        if (a != Scheduler::Admit::Ok) {
            metrics_.rejected_busy();
            res.set_header("Retry-After", "1");
            send_error(res, api_error(503,
                                     a == Scheduler::Admit::Draining ? "the server is shutting down"
                                                                     : "all slots are busy and the queue is full; retry later",
                                     "server_error", "", a == Scheduler::Admit::Draining ? "shutting_down" : "queue_full"));
            metrics_.request_finished(ep, 503);
            return;
        }
        const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
        const int64_t created = static_cast<int64_t>(std::time(nullptr));
        const bool lp = r->params().logprobs;
        auto usage = [n_prompt](const Request& rq) {
            return json{{"prompt_tokens", n_prompt},
                        {"completion_tokens", rq.completion_tokens()},
                        {"total_tokens", n_prompt + rq.completion_tokens()},
                        {"prompt_tokens_details", {{"cached_tokens", rq.reused_tokens()}}}};
        };
        auto base = [&, id, created](const char* object) {
            return json{{"id", id}, {"object", object}, {"created", created}, {"model", model_id_}};
        };

        if (!p.stream) {
            std::string text;
            std::vector<TokenLogprob> toks;
            std::vector<Chunk> got;
            // The client may leave before the answer: look at its socket after every token (and
            // every 50 ms while queued or prefilling); once it is gone, cancel (the scheduler frees
            // the slot at its next step) and wait for the end without answering.
            const ClientConnection conn(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
            bool gone = false;
            for (bool done = false; !done;) {
                got.clear();
                done = r->wait(got, 50);
                for (Chunk& c : got) {
                    text += c.text;
                    for (auto& t : c.tokens) toks.push_back(std::move(t));
                }
                if (!done && !gone && conn.gone()) {
                    gone = true;
                    r->cancel();
                }
            }
            if (gone) {
                // 499: the client closed the connection (nginx's code); nobody reads this answer.
                res.status = 499;
                metrics_.request_finished(ep, 499);
                return;
            }
            if (r->finish_reason() == "error") {
                send_error(res, api_error(500, r->error(), "server_error"));
                metrics_.request_finished(ep, 500);
                return;
            }
            json out = base(chat ? "chat.completion" : "text_completion");
            json choice = {{"index", 0}, {"finish_reason", r->finish_reason()}, {"logprobs", nullptr}};
            if (chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
            else choice["text"] = text;
            if (lp) choice["logprobs"] = chat ? chat_logprobs(toks) : completion_logprobs(toks);
            out["choices"] = json::array({choice});
            out["usage"] = usage(*r);
            res.set_content(dump(out), "application/json");
            metrics_.request_finished(ep, 200);
            return;
        }

        const bool include_usage = p.include_usage;
        // Counts this stream as open until httplib releases the response (after its last write).
        struct OpenStream {
            std::atomic<int>& n;
            explicit OpenStream(std::atomic<int>& c) : n(c) { ++n; }
            ~OpenStream() { --n; }
        };
        auto open = std::make_shared<OpenStream>(open_streams_);
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [this, r, chat, lp, base, usage, include_usage, ep, first = true](size_t, httplib::DataSink& sink) mutable {
                auto send = [&](const json& j) {
                    const std::string line = "data: " + dump(j) + "\n\n";
                    return sink.write(line.data(), line.size());
                };
                auto chunk_json = [&](const std::string& text, const std::vector<TokenLogprob>* toks,
                                      const json& finish) {
                    json out = base(chat ? "chat.completion.chunk" : "text_completion");
                    json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
                    if (chat) {
                        json delta = json::object();
                        if (first) delta["role"] = "assistant";
                        if (!text.empty() || first) delta["content"] = text;
                        choice["delta"] = delta;
                        first = false;
                    } else
                        choice["text"] = text;
                    if (toks && lp) choice["logprobs"] = chat ? chat_logprobs(*toks) : completion_logprobs(*toks);
                    out["choices"] = json::array({choice});
                    return out;
                };
                std::vector<Chunk> got;
                const bool done = r->wait(got, 500);
                for (const Chunk& c : got)
                    if (!send(chunk_json(c.text, &c.tokens, nullptr))) {
                        r->cancel();
                        return false;
                    }
                if (got.empty() && !done) {
                    // Keep-alive comment: also how a vanished client is noticed while queued.
                    if (!sink.write(": ping\n\n", 8)) {
                        r->cancel();
                        return false;
                    }
                    return true;
                }
                if (!done) return true;
                if (r->finish_reason() == "error") {
                    ApiError e = api_error(500, r->error(), "server_error");
                    send(error_body(e));
                } else {
                    json last = chunk_json("", nullptr, r->finish_reason());
                    last["usage"] = usage(*r);
                    send(last);
                    if (include_usage) {
                        json u = base(chat ? "chat.completion.chunk" : "text_completion");
                        u["choices"] = json::array();
                        u["usage"] = usage(*r);
                        send(u);
                    }
                }
                const char* fin = "data: [DONE]\n\n";
                sink.write(fin, std::strlen(fin));
                sink.done();
                metrics_.request_finished(ep, 200);
                return true;
            },
            [r, open](bool) { r->cancel(); });  // connection ended (done or client gone): nothing more to compute
    };
    s.Post("/v1/completions", [generate](const httplib::Request& q, httplib::Response& s) { generate(q, s, false); });
    s.Post("/completions", [generate](const httplib::Request& q, httplib::Response& s) { generate(q, s, false); });
    s.Post("/v1/chat/completions", [generate](const httplib::Request& q, httplib::Response& s) { generate(q, s, true); });
    s.Post("/chat/completions", [generate](const httplib::Request& q, httplib::Response& s) { generate(q, s, true); });
}

}  // namespace moe::server
