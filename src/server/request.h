#pragma once
// One generation request as the scheduler sees it, and the channel its results come back on.
// The HTTP thread fills GenParams, submits, then waits on the channel; the scheduler thread
// pushes text chunks and finally finish(). cancel() (client gone) is seen at the next step.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/sampler.h"

namespace moe::server {

struct GenParams {
    std::vector<int32_t> prompt;   // token ids (not empty, fits the context)
    int64_t max_tokens = 16;       // >= 1; prompt + max_tokens <= context per slot
    SamplerSpec sampler;           // repeat penalty off; penalties below instead
    float presence_penalty = 0;    // OpenAI: subtract once for every token generated so far
    float frequency_penalty = 0;   // OpenAI: subtract per occurrence among generated tokens
    std::vector<std::string> stop; // stop strings (matched across token boundaries)
    bool logprobs = false;         // per-token log-probability of the chosen token
    int top_logprobs = 0;          // and of the n most likely tokens
    bool ignore_eos = false;
};

struct TokenLogprob {
    int32_t id = 0;
    std::string piece;  // raw bytes of the token (may be part of a UTF-8 character)
    float logprob = 0;
    std::vector<std::pair<std::string, float>> top;
};

struct Chunk {
    std::string text;                 // complete UTF-8 text (may be empty when only logprobs)
    std::vector<TokenLogprob> tokens; // when logprobs were asked for
};

class Request {
public:
    explicit Request(GenParams p);
    const GenParams& params() const { return params_; }
    double arrival_s() const { return arrival_s_; }

    void cancel() { cancelled_.store(true); }
    bool cancelled() const { return cancelled_.load(); }

    // Scheduler side.
    void push(Chunk c);
    void finish(const std::string& reason, int64_t completion_tokens, int64_t reused_tokens, std::string error = "");

    // HTTP side: waits up to timeout_ms for chunks or the end; moves what is there into `out`.
    // Returns true once finished and everything has been taken.
    bool wait(std::vector<Chunk>& out, int timeout_ms);
    const std::string& finish_reason() const { return reason_; }  // valid after wait() returned true
    const std::string& error() const { return error_; }
    int64_t completion_tokens() const { return completion_tokens_; }
    int64_t reused_tokens() const { return reused_; }

private:
    GenParams params_;
    double arrival_s_;
    std::atomic<bool> cancelled_{false};
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Chunk> chunks_;
    bool done_ = false;
    std::string reason_, error_;
    int64_t completion_tokens_ = 0, reused_ = 0;
};

}  // namespace moe::server
