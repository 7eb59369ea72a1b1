#include "server/server_test_util.h"

#include <gtest/gtest.h>
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
