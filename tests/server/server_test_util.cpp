#include "server/server_test_util.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "common/temp_dir.h"
#include "model/gen.h"

namespace fs = std::filesystem;

namespace moe::testutil {

const fs::path& server_temp_dir() { return binary_temp_dir("server"); }

std::string tiny_model(const std::string& preset) {
    const fs::path p = server_temp_dir() / (preset + ".gguf");
    if (!fs::exists(p)) {
        model::GenSpec g;
        g.preset = preset;
        g.seed = 7;
        g.threads = 1;
        g.output = p.string();
        model::generate(g);
    }
    return p.string();
}

double prom_metric(int port, const std::string& name) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    auto r = c.Get("/metrics");
    if (!r) return -1;
    size_t p = 0;
    while ((p = r->body.find(name, p)) != std::string::npos) {
        if ((p == 0 || r->body[p - 1] == '\n') && r->body[p + name.size()] == ' ')
            return std::stod(r->body.substr(p + name.size() + 1));
        ++p;
    }
    return -1;
}

int raw_post(int port, const std::string& path, const std::string& body) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const std::string req = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
        ::close(fd);
        return -1;
    }
    return fd;
}

ServeProcess::ServeProcess(const std::string& args) {
    static int n = 0;
    log_path_ = (server_temp_dir() / ("serve-" + std::to_string(n++) + ".log")).string();
    pid_ = ::fork();
    if (pid_ == 0) {
        const std::string cmd = std::string("exec ") + MOE_BINARY + " serve --port 0 " + args + " 2>" + log_path_ + " >/dev/null";
        ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    for (int i = 0; i < 600 && port_ == 0; ++i) {  // up to 60 s (model load under ASan)
        const std::string l = log();
        const size_t at = l.find("listening on http://");
        if (at != std::string::npos) {
            const size_t colon = l.find(':', at + 20), end = l.find('\n', at);
            if (colon != std::string::npos && end != std::string::npos) port_ = std::stoi(l.substr(colon + 1, end - colon - 1));
        }
        int st = 0;
        if (port_ == 0 && ::waitpid(pid_, &st, WNOHANG) == pid_) {
            pid_ = -1;
            break;
        }
        if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

ServeProcess::~ServeProcess() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int st = 0;
        ::waitpid(pid_, &st, 0);
    }
}

std::string ServeProcess::log() const {
    std::ifstream f(log_path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

int ServeProcess::wait_exit(int timeout_ms) {
    if (pid_ <= 0) return -1;
    for (int i = 0; i < timeout_ms / 10; ++i) {
        int st = 0;
        if (::waitpid(pid_, &st, WNOHANG) == pid_) {
            pid_ = -1;
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
}

int ServeProcess::stop(int timeout_ms) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    return wait_exit(timeout_ms);
}

}  // namespace moe::testutil
