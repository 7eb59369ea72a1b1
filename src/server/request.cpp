#include "server/request.h"

#include <chrono>

#include "core/timer.h"

namespace moe::server {

Request::Request(GenParams p) : params_(std::move(p)), arrival_s_(static_cast<double>(Timer::now_ns()) * 1e-9) {}

void Request::push(Chunk c) {
    {
        std::lock_guard<std::mutex> l(mu_);
        chunks_.push_back(std::move(c));
    }
    cv_.notify_all();
}

void Request::finish(const std::string& reason, int64_t completion_tokens, int64_t reused, std::string error) {
    {
        std::lock_guard<std::mutex> l(mu_);
        done_ = true;
        reason_ = reason;
        completion_tokens_ = completion_tokens;
        reused_ = reused;
        error_ = std::move(error);
    }
    cv_.notify_all();
}

bool Request::wait(std::vector<Chunk>& out, int timeout_ms) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::milliseconds(timeout_ms), [&] { return done_ || !chunks_.empty(); });
    while (!chunks_.empty()) {
        out.push_back(std::move(chunks_.front()));
        chunks_.pop_front();
    }
    return done_;
}

}  // namespace moe::server
