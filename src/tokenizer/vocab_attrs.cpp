// Token attributes that GGUF does not store and llama.cpp derives from token texts and model names
// (llama-vocab.cpp, load). They decide which tokens are matched in text without parse_special and
// which decode to nothing, so the same rules are needed for equal ids. A token that gains the
// control attribute behaves exactly like a control token there (control wins over user-defined
// and normal everywhere), so the rules are applied by rewriting Vocab::types.
#include <algorithm>
#include <optional>
#include <string>

#include "core/error.h"
#include "format/gguf.h"
#include "tokenizer/vocab.h"

namespace moe::tokenizer {

namespace {

bool is_special(TokenType t) { return t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown; }

bool has_key(const gguf::File& f, const char* key) { return f.find(key) != nullptr; }

std::string lower(std::string s) {
    for (char& c : s)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return s;
}

// Texts llama.cpp auto-detects as end-of-turn / fill-in-the-middle tokens when the matching id key
// is absent; a token found this way becomes control.
struct AutoRole {
    std::vector<const char*> keys;   // the id keys; the rule applies when none of them is present
    std::vector<const char*> texts;
};
const std::vector<AutoRole>& auto_roles() {
    static const std::vector<AutoRole> r = {
        {{"tokenizer.ggml.eot_token_id"},
         {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
          "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "<end_of_utterance>"}},
        {{"tokenizer.ggml.eom_token_id"}, {"<|eom_id|>"}},
        {{"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
         {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
          "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"}},
        {{"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
         {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>", "<SUF>",
          "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"}},
        {{"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
         {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
          "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"}},
        {{"tokenizer.ggml.fim_pad_token_id"}, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
        {{"tokenizer.ggml.fim_rep_token_id"}, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
        {{"tokenizer.ggml.fim_sep_token_id"}, {"<|file_sep|>"}},
    };
    return r;
}

// Texts that always end generation in llama.cpp; they become control tokens.
const std::vector<const char*>& eog_texts() {
    static const std::vector<const char*> t = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
        "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
        "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
        "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[e~["};
    return t;
}

}  // namespace

void apply_attribute_rules(const gguf::File& f, Vocab& v) {
    const size_t n = v.tokens.size();
    if (v.types.empty()) v.types.assign(n, TokenType::Normal);
    auto id_of = [&](const char* text) -> int32_t {
        auto it = v.token_to_id.find(std::string_view(text));
        return it == v.token_to_id.end() ? kNoToken : it->second;
    };
    auto make_control = [&](int32_t id) { v.types[static_cast<size_t>(id)] = TokenType::Control; };

    // End-of-turn / FIM roles found by text (only the first text present counts per role).
    for (const AutoRole& role : auto_roles()) {
        if (std::any_of(role.keys.begin(), role.keys.end(), [&](const char* k) { return has_key(f, k); })) continue;
        for (const char* t : role.texts)
            if (const int32_t id = id_of(t); id != kNoToken) {
                make_control(id);
                break;
            }
    }
    // End-of-generation texts.
    std::vector<int32_t> eog;
    for (const char* t : eog_texts())
        if (const int32_t id = id_of(t); id != kNoToken) {
            make_control(id);
            eog.push_back(id);
        }
    // gpt-oss (harmony): these structure tokens are text that is always matched and printed.
    for (const char* t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
        if (const int32_t id = id_of(t); id != kNoToken) v.types[static_cast<size_t>(id)] = TokenType::UserDefined;
    if (v.eos_id != kNoToken) eog.push_back(v.eos_id);
    auto in_eog = [&](const char* t) {
        const int32_t id = id_of(t);
        return id != kNoToken && std::find(eog.begin(), eog.end(), id) != eog.end();
    };
    // harmony / solar-open: "<|end|>" separates messages there and is not an end of generation.
    const bool call = in_eog("<|call|>") || in_eog("<|calls|>");
    if (in_eog("<|end|>") && call && (in_eog("<|return|>") || in_eog("<|flush|>")))
        v.types[static_cast<size_t>(id_of("<|end|>"))] = TokenType::UserDefined;
    // gemma4 / paddleocr: "</s>" is ordinary text there.
    if (in_eog("<|tool_response>") && in_eog("</s>")) v.types[static_cast<size_t>(id_of("</s>"))] = TokenType::Normal;

    // Per-token strip flags by model name: Phi-3 strips whitespace right of its special tokens.
    std::optional<std::string> name;
    try {
        name = f.get_string("general.name");
    } catch (const moe::Error&) {
        name.reset();  // not a string: no name-based rules
    }
    const std::string lname = lower(name.value_or(""));
    if (lname.find("phi-3") != std::string::npos || lname.find("phi3") != std::string::npos) {
        v.strip.assign(n, 0);
        for (size_t i = 0; i < n; ++i)
            if (is_special(v.types[i])) v.strip[i] = kStripRight;
        if (const int32_t id = id_of("</s>"); id != kNoToken) v.strip[static_cast<size_t>(id)] = kStripRight;
        for (const char* t : {"<unk>", "<s>", "<|endoftext|>"})
            if (const int32_t id = id_of(t); id != kNoToken) v.strip[static_cast<size_t>(id)] = 0;
    }
}

}  // namespace moe::tokenizer
