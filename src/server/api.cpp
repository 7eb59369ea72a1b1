// OpenAI request parsing (api.h).
#include "server/api.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace moe::server {

using nlohmann::json;

namespace {
[[noreturn]] void bad(const std::string& param, const std::string& msg, int status = 400) {
    throw api_error(status, msg, "invalid_request_error", param, "");
}

const json* field(const json& j, const char* name) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return nullptr;
    return &*it;
}
double get_number(const json& j, const char* name, double def, double lo, double hi) {
    const json* f = field(j, name);
    if (!f) return def;
    if (!f->is_number()) bad(name, std::string("'") + name + "' must be a number");
    const double v = f->get<double>();
    if (!std::isfinite(v) || v < lo || v > hi)
        bad(name, std::string("'") + name + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
}
int64_t get_int(const json& j, const char* name, int64_t def, int64_t lo, int64_t hi) {
    const json* f = field(j, name);
    if (!f) return def;
    if (!f->is_number_integer() && !(f->is_number_float() && std::trunc(f->get<double>()) == f->get<double>()))
        bad(name, std::string("'") + name + "' must be an integer");
    const double d = f->get<double>();
    // A float at or beyond +-2^63 passes the double comparison when hi = INT64_MAX (it rounds up to
    // 2^63) but has no int64 value (converting it is undefined behaviour).
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi) || (f->is_number_float() && std::fabs(d) >= 0x1p63) ||
        (f->is_number_unsigned() && f->get<uint64_t>() > static_cast<uint64_t>(hi)))
        bad(name, std::string("'") + name + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    if (f->is_number_float()) return static_cast<int64_t>(d);
    return f->is_number_unsigned() ? static_cast<int64_t>(f->get<uint64_t>()) : f->get<int64_t>();
}
bool get_bool(const json& j, const char* name, bool def) {
    const json* f = field(j, name);
    if (!f) return def;
    if (!f->is_boolean()) bad(name, std::string("'") + name + "' must be true or false");
    return f->get<bool>();
}

// Fields shared by both endpoints; the prompt is already in p.gen.prompt. default_max: tokens
// when max_tokens is absent (completions: 16, as OpenAI; chat: the rest of the context).
void parse_common(const json& j, const ParseContext& ctx, ParsedRequest& p, int64_t default_max) {
    if (const json* m = field(j, "model")) {
        if (!m->is_string()) bad("model", "'model' must be a string");
        if (m->get<std::string>() != ctx.model_id)
            throw api_error(404, "the model '" + m->get<std::string>() + "' does not exist; this server serves '" +
                                    ctx.model_id + "' (GET /v1/models)",
                           "invalid_request_error", "model", "model_not_found");
    }
    if (get_int(j, "n", 1, 1, 1) != 1) bad("n", "'n' must be 1");
    p.stream = get_bool(j, "stream", false);
    if (const json* so = field(j, "stream_options")) {
        if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
        p.include_usage = get_bool(*so, "include_usage", false);
    }
    GenParams& g = p.gen;
    const int64_t n_prompt = static_cast<int64_t>(g.prompt.size());
    if (n_prompt == 0) bad("prompt", "the prompt is empty; give some text");
    if (n_prompt >= ctx.n_ctx)
        bad("prompt", "the prompt has " + std::to_string(n_prompt) + " tokens; the context per slot is " +
                          std::to_string(ctx.n_ctx) + " tokens (it must leave room for at least one generated "
                          "token; start the server with a larger --ctx or shorten the prompt)");
    const int64_t room = ctx.n_ctx - n_prompt;
    const char* max_name = field(j, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    g.max_tokens = get_int(j, max_name, std::min(default_max, room), 1, std::numeric_limits<int32_t>::max());
    if (g.max_tokens > room)
        bad(max_name, "the context per slot is " + std::to_string(ctx.n_ctx) + " tokens; the prompt has " +
                          std::to_string(n_prompt) + " and " + max_name + " asks for " + std::to_string(g.max_tokens) +
                          " more; lower " + max_name + " to at most " + std::to_string(room));
    SamplerSpec& s = g.sampler;
    s.temperature = static_cast<float>(get_number(j, "temperature", 1.0, 0.0, 2.0));
    s.top_p = static_cast<float>(get_number(j, "top_p", 1.0, 1e-6, 1.0));
    s.top_k = static_cast<int32_t>(get_int(j, "top_k", 0, 0, std::numeric_limits<int32_t>::max()));
    s.min_p = static_cast<float>(get_number(j, "min_p", 0.0, 0.0, 1.0));
    s.repeat_penalty = 1.0f;
    s.seed = static_cast<uint64_t>(get_int(j, "seed", 0, std::numeric_limits<int64_t>::min(),
                                           std::numeric_limits<int64_t>::max()));
    g.presence_penalty = static_cast<float>(get_number(j, "presence_penalty", 0.0, -2.0, 2.0));
    g.frequency_penalty = static_cast<float>(get_number(j, "frequency_penalty", 0.0, -2.0, 2.0));
    g.ignore_eos = get_bool(j, "ignore_eos", false);
    if (const json* st = field(j, "stop")) {
        if (st->is_string()) g.stop.push_back(st->get<std::string>());
        else if (st->is_array()) {
            if (st->size() > 16) bad("stop", "'stop' has more than 16 strings");
            for (const json& e : *st) {
                if (!e.is_string()) bad("stop", "'stop' must be a string or an array of strings");
                g.stop.push_back(e.get<std::string>());
            }
        } else bad("stop", "'stop' must be a string or an array of strings");
    }
    // llama.cpp's n_probs is accepted as an alias of the number of top log-probabilities.
    if (const json* np = field(j, "n_probs")) {
        (void)np;
        g.top_logprobs = static_cast<int>(get_int(j, "n_probs", 0, 0, 20));
        g.logprobs = g.top_logprobs > 0;
    }
}
}  // namespace

json error_body(const ApiError& e) {
    json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
    if (!e.param.empty()) err["param"] = e.param;
    if (!e.code.empty()) err["code"] = e.code;
    else err["code"] = e.status;
    return json{{"error", err}};
}

json parse_body(const std::string& body) {
    json j;
    try {
        j = json::parse(body);
    } catch (const json::exception& e) {
        bad("", std::string("the body is not valid JSON (or not valid UTF-8): ") + e.what());
    }
    if (!j.is_object()) bad("", "the body must be a JSON object");
    return j;
}

ParsedRequest parse_completion(const json& j, const ParseContext& ctx) {
    ParsedRequest p;
    const json* pr = field(j, "prompt");
    if (!pr) bad("prompt", "'prompt' is required");
    auto encode = [&](const std::string& text) {
        if (text.empty()) bad("prompt", "the prompt is empty; give some text");
        return ctx.tok->encode(text, {.add_bos = true, .add_eos = false, .parse_special = true});
    };
    if (pr->is_string()) {
        p.gen.prompt = encode(pr->get<std::string>());
    } else if (pr->is_array() && pr->size() == 1 && (*pr)[0].is_string()) {
        p.gen.prompt = encode((*pr)[0].get<std::string>());
    } else if (pr->is_array() && !pr->empty() && (*pr)[0].is_number_integer()) {
        for (const json& e : *pr) {
            if (!e.is_number_integer()) bad("prompt", "a token-id prompt must be an array of integers");
            const int64_t id = e.get<int64_t>();
            if (!ctx.tok->vocab().valid_id(id))
                bad("prompt", "token id " + std::to_string(id) + " is out of range (the vocabulary has " +
                                  std::to_string(ctx.tok->size()) + " tokens)");
            p.gen.prompt.push_back(static_cast<int32_t>(id));
        }
    } else {
        bad("prompt", "'prompt' must be a string, an array of one string or an array of token ids");
    }
    if (const json* lp = field(j, "logprobs")) {
        if (lp->is_boolean()) p.gen.logprobs = lp->get<bool>();
        else {
            p.gen.top_logprobs = static_cast<int>(get_int(j, "logprobs", 0, 0, 20));
            p.gen.logprobs = true;
        }
    }
    const int saved_top = p.gen.top_logprobs;
    const bool saved_lp = p.gen.logprobs;
    parse_common(j, ctx, p, 16);
    if (saved_lp) p.gen.logprobs = true, p.gen.top_logprobs = std::max(p.gen.top_logprobs, saved_top);
    return p;
}

std::vector<ChatMessage> parse_messages(const json& j) {
    const json* ms = field(j, "messages");
    if (!ms) bad("messages", "'messages' is required");
    if (!ms->is_array()) bad("messages", "'messages' must be an array");
    if (ms->empty()) bad("messages", "'messages' is empty; give at least one message");
    std::vector<ChatMessage> out;
    for (const json& m : *ms) {
        if (!m.is_object()) bad("messages", "every message must be an object with 'role' and 'content'");
        const json* r = field(m, "role");
        if (!r || !r->is_string()) bad("messages", "every message needs a string 'role'");
        ChatMessage cm;
        cm.role = r->get<std::string>();
        if (cm.role == "developer") cm.role = "system";  // OpenAI's newer name for system
        if (cm.role != "system" && cm.role != "user" && cm.role != "assistant")
            bad("messages", "message role '" + cm.role + "' is not supported (use system, user or assistant)");
        const json* c = field(m, "content");
        if (!c) cm.content = "";
        else if (c->is_string()) cm.content = c->get<std::string>();
        else if (c->is_array()) {  // content parts: only text parts
            for (const json& part : *c) {
                const json* ty = part.is_object() ? field(part, "type") : nullptr;
                const json* tx = part.is_object() ? field(part, "text") : nullptr;
                if (!ty || !ty->is_string() || ty->get<std::string>() != "text" || !tx || !tx->is_string())
                    bad("messages", "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
                cm.content += tx->get<std::string>();
            }
        } else bad("messages", "'content' must be a string or an array of text parts");
        out.push_back(std::move(cm));
    }
    return out;
}

TokenizeRequest parse_tokenize(const json& j) {
    TokenizeRequest t;
    auto it = j.find("content");
    if (it == j.end() || !it->is_string()) bad("content", "'content' must be a string");
    t.content = it->get<std::string>();
    if (auto a = j.find("add_special"); a != j.end()) {
        if (!a->is_boolean()) bad("add_special", "'add_special' must be true or false");
        t.add_special = a->get<bool>();
    }
    return t;
}

std::vector<int32_t> parse_detokenize(const json& j, const tokenizer::Tokenizer& tok) {
    auto it = j.find("tokens");
    if (it == j.end() || !it->is_array()) bad("tokens", "'tokens' must be an array of token ids");
    std::vector<int32_t> ids;
    for (const json& e : *it) {
        if (!e.is_number_integer() || !tok.vocab().valid_id(e.get<int64_t>()))
            bad("tokens", "'tokens' must hold token ids in [0, " + std::to_string(tok.size()) + ")");
        ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
    }
    return ids;
}

ParsedRequest parse_chat(const json& j, const ParseContext& ctx) {
    ParsedRequest p;
    const std::vector<ChatMessage> msgs = parse_messages(j);
    std::string text;
    try {
        ChatRenderSpec rs;
        const tokenizer::Vocab& v = ctx.tok->vocab();
        if (v.eos_id >= 0) rs.eos = v.tokens[static_cast<size_t>(v.eos_id)];
        text = render_chat(*ctx.chat, msgs, rs);
    } catch (const Error& e) {
        bad("messages", e.what());
    }
    p.gen.prompt = ctx.tok->encode(text, {.add_bos = true, .add_eos = false, .parse_special = true});
    p.gen.logprobs = get_bool(j, "logprobs", false);
    p.gen.top_logprobs = static_cast<int>(get_int(j, "top_logprobs", 0, 0, 20));
    const bool lp = p.gen.logprobs;
    const int top = p.gen.top_logprobs;
    parse_common(j, ctx, p, std::numeric_limits<int32_t>::max());
    if (lp) p.gen.logprobs = true, p.gen.top_logprobs = std::max(p.gen.top_logprobs, top);
    return p;
}

json completion_logprobs(const std::vector<TokenLogprob>& t) {
    json tokens = json::array(), lps = json::array(), tops = json::array();
    for (const TokenLogprob& x : t) {
        tokens.push_back(x.piece);
        lps.push_back(x.logprob);
        json top = json::object();
        for (const auto& [s, lp] : x.top) top[s] = lp;
        tops.push_back(top);
    }
    return json{{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}};
}

json chat_logprobs(const std::vector<TokenLogprob>& t) {
    json content = json::array();
    auto bytes = [](const std::string& s) {
        json b = json::array();
        for (unsigned char c : s) b.push_back(c);
        return b;
    };
    for (const TokenLogprob& x : t) {
        json top = json::array();
        for (const auto& [s, lp] : x.top) top.push_back({{"token", s}, {"logprob", lp}, {"bytes", bytes(s)}});
        content.push_back({{"token", x.piece}, {"logprob", x.logprob}, {"bytes", bytes(x.piece)}, {"top_logprobs", top}});
    }
    return json{{"content", content}};
}

}  // namespace moe::server
