#pragma once
// `moe serve`: the OpenAI-compatible HTTP server (docs/SERVER.md) on cpp-httplib. HTTP threads
// parse and validate requests, submit them to the Scheduler and stream its output back; the
// scheduler thread runs the model.
//
//   Server s(model, pool, spec);   // loads nothing; model already loaded
//   int port = s.bind();           // port 0 -> an ephemeral port
//   s.run();                       // blocks until shutdown()
//   s.shutdown();                  // from another thread: new requests get 503, in-flight ones
//                                  // finish, then run() returns
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "model/model.h"
#include "server/chat_template.h"
#include "server/metrics.h"
#include "server/scheduler.h"

namespace httplib {
class Server;
}

namespace moe::server {

struct ServerSpec {
    std::string host = "127.0.0.1";
    int port = 8080;              // 0: ephemeral
    std::string api_key;          // "" : no authentication
    size_t max_body = 1 << 20;    // bytes of a request body (413 beyond)
    std::string model_id;         // "" : the GGUF file's name
    std::string chat_template;    // family name to force, "" : detect
    SchedulerSpec sched;
};

class Server {
public:
    Server(model::Model& model, ThreadPool& pool, const ServerSpec& spec);
    ~Server();
    int bind();  // throws moe::Error("server") when the address cannot be bound
    void run();
    void shutdown();
    const ChatTemplate& chat_template() const { return chat_; }
    const std::string& model_id() const { return model_id_; }

private:
    void routes();
    model::Model& model_;
    ServerSpec spec_;
    std::string model_id_;
    ChatTemplate chat_;
    Metrics metrics_;
    std::unique_ptr<Scheduler> sched_;
    std::unique_ptr<httplib::Server> http_;
    std::atomic<bool> draining_{false};
    std::atomic<int> open_streams_{0};  // streaming responses not yet fully written (shutdown waits)
    std::atomic<uint64_t> next_id_{1};
};

// The dashboard page (dashboard.cpp): self-contained HTML, polls GET /stats.
const char* dashboard_html();

}  // namespace moe::server
