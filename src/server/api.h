#pragma once
// OpenAI request parsing and response shapes (docs/SERVER.md). Parsing is hostile-input safe:
// every wrong type, range or size is an ApiError with the HTTP status and an OpenAI-shaped body.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/chat_template.h"
#include "server/request.h"

namespace moe::tokenizer {
class Tokenizer;
}

namespace moe::server {

struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;  // offending field, or ""
    std::string code;   // e.g. "model_not_found", or ""
};

inline ApiError api_error(int status, std::string message, std::string type = "invalid_request_error",
                          std::string param = "", std::string code = "") {
    ApiError e;
    e.status = status;
    e.message = std::move(message);
    e.type = std::move(type);
    e.param = std::move(param);
    e.code = std::move(code);
    return e;
}

// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_body(const ApiError& e);

// What a completion request needs besides GenParams.
struct ParsedRequest {
    GenParams gen;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage (usage is always in the last chunk)
};

struct ParseContext {
    const tokenizer::Tokenizer* tok = nullptr;
    std::string model_id;
    int64_t n_ctx = 0;          // context per slot
    const ChatTemplate* chat = nullptr;
};

// Body text -> JSON object; throws ApiError (400) for malformed JSON, invalid UTF-8, a non-object.
nlohmann::json parse_body(const std::string& body);
// POST /v1/completions and /v1/chat/completions bodies -> ParsedRequest; throws ApiError.
ParsedRequest parse_completion(const nlohmann::json& j, const ParseContext& ctx);
ParsedRequest parse_chat(const nlohmann::json& j, const ParseContext& ctx);
// The chat messages of a body (for tests and the chat parser); throws ApiError.
std::vector<ChatMessage> parse_messages(const nlohmann::json& j);

// POST /tokenize: {"content": string, "add_special": bool (optional)}; throws ApiError.
struct TokenizeRequest {
    std::string content;
    bool add_special = false;  // BOS/EOS as the vocabulary says
};
TokenizeRequest parse_tokenize(const nlohmann::json& j);
// POST /detokenize: {"tokens": [ids]} -> ids, each valid for tok; throws ApiError.
std::vector<int32_t> parse_detokenize(const nlohmann::json& j, const tokenizer::Tokenizer& tok);

// Logprobs in the legacy completions shape and the chat shape.
nlohmann::json completion_logprobs(const std::vector<TokenLogprob>& t);
nlohmann::json chat_logprobs(const std::vector<TokenLogprob>& t);

}  // namespace moe::server
