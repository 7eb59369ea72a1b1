#pragma once
// Chat templates: OpenAI-style messages -> one prompt string, rendered by template family (no
// general Jinja engine: Debian has none for C++, and the families real MoE models ship are few).
// The family is detected from the GGUF's `tokenizer.chat_template` text by marker strings (the
// same markers llama.cpp's llm_chat_detect_template uses), or named with --chat-template.
//
//   chatml    "<|im_start|>{role}\n{content}<|im_end|>\n" ... "<|im_start|>assistant\n"  (Qwen, ...;
//             a default system message when the template text carries one, as Qwen2 does)
//   mistral   "[INST] {system}\n\n{user} [/INST]{assistant}</s>[INST] ..."       (Mixtral-8x7B-Instruct)
//   llama3    "<|start_header_id|>{role}<|end_header_id|>\n\n{trimmed}<|eot_id|>" ...
//   deepseek2 "{system}\n\nUser: {user}\n\nAssistant: {assistant}<｜end▁of▁sentence｜>" ... "Assistant:"
//   deepseek3 "{systems}<｜User｜>{user}<｜Assistant｜>{assistant}<｜end▁of▁sentence｜>" ...
//   tulu      "<|system|>\n{s}\n<|user|>\n{u}\n<|assistant|>\n{a}{eos}\n" ...    (OLMoE-Instruct, Tulu)
//
// The BOS token is not rendered (the tokenizer adds it when the vocabulary says so); `bos` in
// ChatRenderSpec exists for tests that compare with a template's full published output.
#include <string>
#include <vector>

namespace moe::server {

enum class ChatFamily { ChatMl, Mistral, Llama3, DeepSeek2, DeepSeek3, Tulu };

struct ChatMessage {
    std::string role;  // system | user | assistant (others are rendered as their role name where the family allows)
    std::string content;
};

struct ChatTemplate {
    ChatFamily family = ChatFamily::ChatMl;
    std::string default_system;  // chatml only: system message added when the request has none
    std::string note;            // how it was chosen (for the startup log)
};

const char* chat_family_name(ChatFamily f);
// "chatml" | "mistral" | "llama3" | "deepseek2" | "deepseek3" | "tulu"; throws moe::Error("server")
// naming the known names otherwise.
ChatFamily parse_chat_family(const std::string& name);

// Detects the family of a template text. found = false when no family matches (the caller warns
// and uses the ChatML fallback, docs/SERVER.md).
ChatTemplate detect_chat_template(const std::string& jinja, bool& found);

struct ChatRenderSpec {
    std::string bos;  // text of BOS to put first ("" in the server: the tokenizer adds it)
    std::string eos;  // text of EOS (tulu and mistral end assistant turns with it)
    bool add_generation_prompt = true;
};

// Throws moe::Error("server") for an empty message list or an unknown role.
std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const ChatRenderSpec& spec);

}  // namespace moe::server
