// Chat templates: detection from template texts (excerpts of the published Jinja of each family,
// as stored in GGUF tokenizer.chat_template) and rendering against the strings those templates
// produce, written out by hand from the Jinja.
#include <gtest/gtest.h>

#include "core/error.h"
#include "server/chat_template.h"

using namespace moe;
using namespace moe::server;

namespace {

// Qwen1.5-MoE-A2.7B-Chat / Qwen2 (the backslash-n are two characters in the Jinja source).
const char* kQwen2 =
    R"({% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})";
// Qwen3: no default system message (messages[0] is printed instead).
const char* kQwen3 =
    R"({%- if messages[0].role == 'system' %}{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}{%- endif %}{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %})";
const char* kMixtral =
    R"({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})";
const char* kLlama3 =
    R"({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %})";
const char* kDeepSeek2 =
    R"({% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\n\n' }}{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token }}{% elif message['role'] == 'system' %}{{ message['content'] + '\n\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %})";
const char* kDeepSeek3 =
    R"({% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='') %}{%- for message in messages %}{%- if message['role'] == 'system' %}{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}{{bos_token}}{{ns.system_prompt}}{%- for message in messages %}{%- if message['role'] == 'user' %}{{'<｜User｜>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is not none %}{{'<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor -%}{% if add_generation_prompt %}{{'<｜Assistant｜>'}}{% endif %})";
// OLMoE-1B-7B-0924-Instruct (Tulu format).
const char* kOlmoe =
    R"({{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}{{ '<|system|>\n' + message['content'] + '\n' }}{% elif message['role'] == 'user' %}{{ '<|user|>\n' + message['content'] + '\n' }}{% elif message['role'] == 'assistant' %}{% if not loop.last %}{{ '<|assistant|>\n'  + message['content'] + eos_token + '\n' }}{% else %}{{ '<|assistant|>\n'  + message['content'] + eos_token }}{% endif %}{% endif %}{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}{% endfor %})";

ChatTemplate detect(const char* text) {
    bool found = false;
    ChatTemplate t = detect_chat_template(text, found);
    EXPECT_TRUE(found) << text;
    return t;
}

const std::vector<ChatMessage> kConv = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", " What is 2+2? "}};
const std::vector<ChatMessage> kNoSystem = {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};

}  // namespace

TEST(ChatTemplate, ChatMlQwen2AddsItsDefaultSystemMessage) {
    const ChatTemplate t = detect(kQwen2);
    EXPECT_EQ(t.family, ChatFamily::ChatMl);
    EXPECT_EQ(t.default_system, "You are a helpful assistant.");
    EXPECT_EQ(render_chat(t, kNoSystem, {}),
              "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
              "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
    // With a system message of its own, no default one.
    EXPECT_EQ(render_chat(t, {{"system", "S"}, {"user", "U"}}, {}),
              "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, ChatMlQwen3HasNoDefaultSystem) {
    const ChatTemplate t = detect(kQwen3);
    EXPECT_EQ(t.family, ChatFamily::ChatMl);
    EXPECT_EQ(t.default_system, "");
    ChatRenderSpec spec;
    spec.add_generation_prompt = false;
    EXPECT_EQ(render_chat(t, {{"user", "U"}}, spec), "<|im_start|>user\nU<|im_end|>\n");
}

TEST(ChatTemplate, MixtralInst) {
    const ChatTemplate t = detect(kMixtral);
    EXPECT_EQ(t.family, ChatFamily::Mistral);
    ChatRenderSpec spec{"<s>", "</s>", true};
    EXPECT_EQ(render_chat(t, kNoSystem, spec), "<s>[INST] Hi [/INST]Hello!</s>[INST] Bye [/INST]");
    // System (not in Mixtral's template): before the first user message, blank line after it.
    EXPECT_EQ(render_chat(t, kConv, spec), "<s>[INST] Be brief.\n\nHi [/INST]Hello!</s>[INST]  What is 2+2?  [/INST]");
}

TEST(ChatTemplate, Llama3TrimsContent) {
    const ChatTemplate t = detect(kLlama3);
    EXPECT_EQ(t.family, ChatFamily::Llama3);
    ChatRenderSpec spec{"<|begin_of_text|>", "<|eot_id|>", true};
    EXPECT_EQ(render_chat(t, kConv, spec),
              "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, DeepSeek2) {
    const ChatTemplate t = detect(kDeepSeek2);
    EXPECT_EQ(t.family, ChatFamily::DeepSeek2);
    ChatRenderSpec spec{"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", true};
    EXPECT_EQ(render_chat(t, kConv, spec),
              "<｜begin▁of▁sentence｜>Be brief.\n\nUser: Hi\n\nAssistant: Hello!<｜end▁of▁sentence｜>"
              "User:  What is 2+2? \n\nAssistant:");
}

TEST(ChatTemplate, DeepSeek3PutsSystemFirst) {
    const ChatTemplate t = detect(kDeepSeek3);
    EXPECT_EQ(t.family, ChatFamily::DeepSeek3);
    ChatRenderSpec spec{"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", true};
    const std::vector<ChatMessage> late_system = {{"user", "Hi"}, {"system", "Be brief."}, {"assistant", "Hello!"}};
    EXPECT_EQ(render_chat(t, late_system, spec),
              "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜><｜Assistant｜>");
}

TEST(ChatTemplate, OlmoeTulu) {
    const ChatTemplate t = detect(kOlmoe);
    EXPECT_EQ(t.family, ChatFamily::Tulu);
    ChatRenderSpec spec{"<|endoftext|>", "<|endoftext|>", true};
    EXPECT_EQ(render_chat(t, kConv, spec),
              "<|endoftext|><|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\nHello!<|endoftext|>\n"
              "<|user|>\n What is 2+2? \n<|assistant|>\n");
    // Last message from the assistant: eos without the newline, no generation prompt when off.
    spec.add_generation_prompt = false;
    EXPECT_EQ(render_chat(t, {{"user", "U"}, {"assistant", "A"}}, spec),
              "<|endoftext|><|user|>\nU\n<|assistant|>\nA<|endoftext|>");
}

TEST(ChatTemplate, UnknownTemplateIsReportedAndFallsBackToChatMl) {
    bool found = true;
    const ChatTemplate t = detect_chat_template("{{ messages[0]['content'] }} <start_of_turn>", found);
    EXPECT_FALSE(found);
    EXPECT_EQ(t.family, ChatFamily::ChatMl);
    EXPECT_FALSE(t.note.empty());
    found = true;
    detect_chat_template("", found);
    EXPECT_FALSE(found);
}

TEST(ChatTemplate, OverrideNamesAndBadInput) {
    for (const char* n : {"chatml", "mistral", "llama3", "deepseek2", "deepseek3", "tulu"})
        EXPECT_STREQ(chat_family_name(parse_chat_family(n)), n);
    try {
        parse_chat_family("jinja");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("known: chatml"), std::string::npos) << e.what();
    }
    const ChatTemplate t;
    EXPECT_THROW(render_chat(t, {}, {}), Error);
    EXPECT_THROW(render_chat(t, {{"tool", "x"}}, {}), Error);
}
