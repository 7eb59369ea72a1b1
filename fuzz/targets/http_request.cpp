// The server's request-body layer (src/server/api.h), without sockets: body text -> parse_body ->
// the endpoint's parser, exactly as the handlers of `moe serve` call them. Input: byte 0 picks the
// endpoint (bits 0-1: /v1/completions, /v1/chat/completions, /tokenize, /detokenize), the chat
// family (bits 2-4, mod 6) and the context per slot (bits 5-7); the rest is the body.
// Properties: the outcome is a request or an ApiError (400, or 404 model_not_found) whose OpenAI
// body serialises; nothing else escapes (a moe::Error would be a 500). An accepted request obeys
// what the scheduler relies on: a non-empty prompt of valid ids that leaves room for max_tokens
// within the context, every sampling field inside its documented range, at most 16 stop strings.
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_target.h"
#include "server/api.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace moe::fuzz {

namespace {
void check_request(const server::ParsedRequest& p, const tokenizer::Tokenizer& tok, int64_t n_ctx) {
    const server::GenParams& g = p.gen;
    const int64_t n = static_cast<int64_t>(g.prompt.size());
    MOE_FUZZ_CHECK(n >= 1 && n < n_ctx, "prompt of ", n, " tokens accepted for a context of ", n_ctx);
    for (int32_t id : g.prompt) MOE_FUZZ_CHECK(tok.vocab().valid_id(id), "prompt id ", id, " out of range");
    MOE_FUZZ_CHECK(g.max_tokens >= 1 && g.max_tokens <= n_ctx - n, "max_tokens ", g.max_tokens, " with ", n,
                   " prompt tokens in ", n_ctx);
    const SamplerSpec& s = g.sampler;
    MOE_FUZZ_CHECK(s.temperature >= 0 && s.temperature <= 2, "temperature ", s.temperature);
    MOE_FUZZ_CHECK(s.top_p > 0 && s.top_p <= 1, "top_p ", s.top_p);
    MOE_FUZZ_CHECK(s.min_p >= 0 && s.min_p <= 1, "min_p ", s.min_p);
    MOE_FUZZ_CHECK(s.top_k >= 0, "top_k ", s.top_k);
    MOE_FUZZ_CHECK(s.repeat_penalty == 1.0f, "repeat penalty is off in the server");
    MOE_FUZZ_CHECK(std::abs(g.presence_penalty) <= 2 && std::abs(g.frequency_penalty) <= 2, "penalties");
    MOE_FUZZ_CHECK(g.stop.size() <= 16, g.stop.size(), " stop strings");
    MOE_FUZZ_CHECK(g.top_logprobs >= 0 && g.top_logprobs <= 20, "top_logprobs ", g.top_logprobs);
}
}  // namespace

void http_request(const uint8_t* data, size_t size) {
    if (size == 0) return;
    const uint8_t sel = data[0];
    const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
    const tokenizer::Tokenizer& tok = vocab_tokenizer(kVocabBpe);
    static constexpr int64_t kCtx[8] = {1, 2, 8, 32, 128, 512, 4096, 1 << 20};
    server::ChatTemplate chat;
    chat.family = static_cast<server::ChatFamily>(((sel >> 2) & 7) % 6);
    if (chat.family == server::ChatFamily::ChatMl && (sel & 0x10)) chat.default_system = "You are a helpful assistant.";
    const server::ParseContext ctx{&tok, "fuzz-model", kCtx[sel >> 5], &chat};
    try {
        const nlohmann::json j = server::parse_body(body);
        switch (sel & 3) {
            case 0: check_request(server::parse_completion(j, ctx), tok, ctx.n_ctx); break;
            case 1: check_request(server::parse_chat(j, ctx), tok, ctx.n_ctx); break;
            case 2: {
                const server::TokenizeRequest t = server::parse_tokenize(j);
                const auto ids = tok.encode(t.content, {.add_bos = t.add_special, .add_eos = t.add_special,
                                                        .parse_special = true});
                for (int32_t id : ids) MOE_FUZZ_CHECK(tok.vocab().valid_id(id), "/tokenize id ", id);
                break;
            }
            default: {
                const std::vector<int32_t> ids = server::parse_detokenize(j, tok);
                for (int32_t id : ids) MOE_FUZZ_CHECK(tok.vocab().valid_id(id), "/detokenize accepted id ", id);
                MOE_FUZZ_CHECK(tokenizer::utf8::is_valid(tok.decode(ids)), "/detokenize gave invalid UTF-8");
            }
        }
    } catch (const server::ApiError& e) {
        MOE_FUZZ_CHECK(e.status == 400 || (e.status == 404 && e.code == "model_not_found"), "status ", e.status);
        MOE_FUZZ_CHECK(!e.message.empty(), "ApiError without a message");
        const std::string out = server::error_body(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        MOE_FUZZ_CHECK(nlohmann::json::parse(out).at("error").at("message").is_string(), "error body ", out);
    }
}

}  // namespace moe::fuzz
