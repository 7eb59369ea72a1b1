// Chat template families (chat_template.h). Strings follow each family's published Jinja text.
#include "server/chat_template.h"

#include "core/error.h"

namespace moe::server {

namespace {
std::string trim(const std::string& s) {
    const char* ws = " \t\n\r";
    const size_t a = s.find_first_not_of(ws);
    if (a == std::string::npos) return "";
    return s.substr(a, s.find_last_not_of(ws) - a + 1);
}
bool has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }
// Qwen2 / Qwen2.5 / Qwen1.5-MoE templates print a literal system message when the conversation has
// none: '<|im_start|>system\nYou are ...<|im_end|>\n' (with a backslash-n in the Jinja source).
// Returns that literal, or "" when the template has none (Qwen3 prints messages[0] instead).
std::string chatml_default_system(const std::string& t) {
    const std::string open = "<|im_start|>system\\n";
    for (size_t p = t.find(open); p != std::string::npos; p = t.find(open, p + 1)) {
        const size_t a = p + open.size(), e = t.find("<|im_end|>", a);
        if (e == std::string::npos) break;
        const std::string lit = t.substr(a, e - a);
        if (!lit.empty() && lit.find_first_of("'\"{}+") == std::string::npos) return lit;
    }
    return "";
}
void check_role(const ChatMessage& m) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
        throw_error("server", "message role '", m.role, "' is not supported (use system, user or assistant)");
}
}  // namespace

const char* chat_family_name(ChatFamily f) {
    switch (f) {
        case ChatFamily::ChatMl: return "chatml";
        case ChatFamily::Mistral: return "mistral";
        case ChatFamily::Llama3: return "llama3";
        case ChatFamily::DeepSeek2: return "deepseek2";
        case ChatFamily::DeepSeek3: return "deepseek3";
        case ChatFamily::Tulu: return "tulu";
    }
    return "?";
}

ChatFamily parse_chat_family(const std::string& name) {
    for (ChatFamily f : {ChatFamily::ChatMl, ChatFamily::Mistral, ChatFamily::Llama3, ChatFamily::DeepSeek2,
                         ChatFamily::DeepSeek3, ChatFamily::Tulu})
        if (name == chat_family_name(f)) return f;
    throw_error("server", "--chat-template '", name,
                "' is not a known family (known: chatml, mistral, llama3, deepseek2, deepseek3, tulu)");
}

ChatTemplate detect_chat_template(const std::string& t, bool& found) {
    ChatTemplate r;
    found = true;
    if (has(t, "<|im_start|>")) {
        r.family = ChatFamily::ChatMl;
        r.default_system = chatml_default_system(t);
    } else if (has(t, "[INST]")) {
        r.family = ChatFamily::Mistral;
    } else if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) {
        r.family = ChatFamily::Llama3;
    } else if (has(t, "'Assistant: ' + message['content'] + eos_token")) {
        r.family = ChatFamily::DeepSeek2;
    } else if (has(t, "<｜Assistant｜>") && has(t, "<｜User｜>")) {
        r.family = ChatFamily::DeepSeek3;
    } else if (has(t, "<|user|>") && has(t, "<|assistant|>")) {
        r.family = ChatFamily::Tulu;
    } else {
        found = false;
        r.family = ChatFamily::ChatMl;
        r.note = t.empty() ? "the model has no tokenizer.chat_template" : "tokenizer.chat_template matches no known family";
        return r;
    }
    r.note = "detected from tokenizer.chat_template";
    return r;
}

std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& msgs, const ChatRenderSpec& spec) {
    if (msgs.empty()) throw_error("server", "'messages' is empty; give at least one message");
    for (const ChatMessage& m : msgs) check_role(m);
    std::string s = spec.bos;
    const bool gen = spec.add_generation_prompt;
    switch (t.family) {
        case ChatFamily::ChatMl:
            if (!t.default_system.empty() && msgs.front().role != "system")
                s += "<|im_start|>system\n" + t.default_system + "<|im_end|>\n";
            for (const ChatMessage& m : msgs) s += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
            if (gen) s += "<|im_start|>assistant\n";
            break;
        case ChatFamily::Mistral: {
            // Mixtral-8x7B-Instruct: "[INST] " + user + " [/INST]" then assistant + eos (no space
            // between, as that template writes it). It has no system role: a system message is
            // put before the next user message, followed by a blank line (Mistral's convention).
            bool in_turn = false;
            for (const ChatMessage& m : msgs) {
                if (!in_turn) {
                    s += "[INST] ";
                    in_turn = true;
                }
                if (m.role == "system") s += m.content + "\n\n";
                else if (m.role == "user") s += m.content + " [/INST]";
                else {
                    s += m.content + spec.eos;
                    in_turn = false;
                }
            }
            break;
        }
        case ChatFamily::Llama3:
            for (const ChatMessage& m : msgs)
                s += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
            if (gen) s += "<|start_header_id|>assistant<|end_header_id|>\n\n";
            break;
        case ChatFamily::DeepSeek2:
            for (const ChatMessage& m : msgs) {
                if (m.role == "system") s += m.content + "\n\n";
                else if (m.role == "user") s += "User: " + m.content + "\n\n";
                else s += "Assistant: " + m.content + spec.eos;
            }
            if (gen) s += "Assistant:";
            break;
        case ChatFamily::DeepSeek3: {
            // System messages first, joined by a blank line, then the turns (DeepSeek-V3's template).
            bool first_sys = true;
            for (const ChatMessage& m : msgs)
                if (m.role == "system") {
                    s += (first_sys ? "" : "\n\n") + m.content;
                    first_sys = false;
                }
            for (const ChatMessage& m : msgs) {
                if (m.role == "system") continue;
                if (m.role == "user") s += "<｜User｜>" + m.content;
                else s += "<｜Assistant｜>" + m.content + spec.eos;
            }
            if (gen) s += "<｜Assistant｜>";
            break;
        }
        case ChatFamily::Tulu:
            for (size_t i = 0; i < msgs.size(); ++i) {
                const ChatMessage& m = msgs[i];
                const bool last = i + 1 == msgs.size();
                if (m.role == "assistant") s += "<|assistant|>\n" + m.content + spec.eos + (last ? "" : "\n");
                else s += "<|" + m.role + "|>\n" + m.content + "\n";
                if (last && gen) s += "<|assistant|>\n";
            }
            break;
    }
    return s;
}

}  // namespace moe::server
