#pragma once
// Helpers of the server tests: a temp folder, a tiny generated model, running `moe serve` as a
// child process on an ephemeral port.
#include <sys/types.h>

#include <filesystem>
#include <string>

namespace moe::testutil {

// Per-process temp folder (removed at exit by the test environment the helper installs).
const std::filesystem::path& server_temp_dir();
// A tiny random-weight model of `preset`, generated once per process.
std::string tiny_model(const std::string& preset = "tiny-qwen3moe");

// Value of the Prometheus series `name` (exact, labels included) from GET /metrics; -1 if absent.
double prom_metric(int port, const std::string& name);

// A raw TCP client that sends one HTTP POST and can close before the answer comes (what
// httplib's client cannot do for a plain response). Returns the socket (-1 on failure).
int raw_post(int port, const std::string& path, const std::string& json_body);

// `moe serve -m MODEL --port 0 ARGS` started in the background; waits for "listening on" and
// parses the port. stop() sends SIGTERM and returns the exit status (-1: killed or not exited).
class ServeProcess {
public:
    explicit ServeProcess(const std::string& args);
    ~ServeProcess();
    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    std::string log() const;  // stderr so far
    int stop(int timeout_ms = 20000);  // SIGTERM, wait
    int wait_exit(int timeout_ms);

private:
    pid_t pid_ = -1;
    int port_ = 0;
    std::string log_path_;
};

}  // namespace moe::testutil
