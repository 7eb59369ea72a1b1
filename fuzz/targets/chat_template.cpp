// Chat templates (src/server/chat_template.h): family detection from arbitrary
// `tokenizer.chat_template` text, then rendering of arbitrary messages. Input: byte 0 = flags
// (bit 0 add_generation_prompt, bit 1 a BOS text, bits 2-4 the family: 0-5 forced by name,
// 6-7 detected from the template), then NUL-separated fields: the template text, then role and
// content alternately. A one-byte role names system/user/assistant/tool (b % 4), a longer one is
// taken as it is (unknown roles must be refused).
// Properties: detection is total (no match -> ChatML, not found); a family name round-trips
// through parse_chat_family; a ChatML default system message has no Jinja syntax in it. Rendering
// refuses (moe::Error) an empty list or an unknown role, and otherwise starts with the BOS text,
// holds every content in message order (llama3 trims them; deepseek3 puts system messages first),
// and ends with the family's generation prompt when one is asked for.
#include <string>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "server/chat_template.h"

namespace moe::fuzz {

namespace {
using server::ChatFamily;

std::string trimmed(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\n\r");
    return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(" \t\n\r") - a + 1);
}
// Finds each needle in order, from where the previous one ended.
bool in_order(const std::string& out, const std::vector<std::string>& needles, size_t& pos) {
    for (const std::string& n : needles) {
        const size_t p = out.find(n, pos);
        if (p == std::string::npos) return false;
        pos = p + n.size();
    }
    return true;
}
const char* generation_prompt(ChatFamily f) {
    switch (f) {
        case ChatFamily::ChatMl: return "<|im_start|>assistant\n";
        case ChatFamily::Mistral: return "";  // the prompt ends with " [/INST]" already
        case ChatFamily::Llama3: return "<|start_header_id|>assistant<|end_header_id|>\n\n";
        case ChatFamily::DeepSeek2: return "Assistant:";
        case ChatFamily::DeepSeek3: return "<｜Assistant｜>";
        case ChatFamily::Tulu: return "<|assistant|>\n";
    }
    return "";
}
}  // namespace

void chat_template(const uint8_t* data, size_t size) {
    if (size == 0) return;
    const uint8_t flags = data[0];
    std::vector<std::string> fields(1);
    for (size_t i = 1; i < size; ++i) {
        if (data[i] == 0) fields.emplace_back();
        else fields.back().push_back(static_cast<char>(data[i]));
    }
    bool found = false;
    server::ChatTemplate t = server::detect_chat_template(fields[0], found);
    if (!found) MOE_FUZZ_CHECK(t.family == ChatFamily::ChatMl && t.default_system.empty(), "fallback is not ChatML");
    MOE_FUZZ_CHECK(t.default_system.find_first_of("'\"{}+") == std::string::npos, "default system has Jinja syntax");
    MOE_FUZZ_CHECK(server::parse_chat_family(server::chat_family_name(t.family)) == t.family, "family name round trip");
    const int fam = (flags >> 2) & 7;
    if (fam < 6) {
        t.family = static_cast<ChatFamily>(fam);
        if (t.family != ChatFamily::ChatMl) t.default_system.clear();
    }

    static const char* kRoles[4] = {"system", "user", "assistant", "tool"};
    std::vector<server::ChatMessage> msgs;
    bool valid = true;
    for (size_t i = 1; i < fields.size(); i += 2) {
        server::ChatMessage m;
        m.role = fields[i].size() == 1 ? kRoles[static_cast<uint8_t>(fields[i][0]) % 4] : fields[i];
        m.content = i + 1 < fields.size() ? fields[i + 1] : "";
        valid = valid && (m.role == "system" || m.role == "user" || m.role == "assistant");
        msgs.push_back(std::move(m));
    }
    valid = valid && !msgs.empty();
    server::ChatRenderSpec spec;
    spec.bos = (flags & 2) ? "<s>" : "";
    spec.eos = "</s>";
    spec.add_generation_prompt = flags & 1;

    std::string out;
    try {
        out = server::render_chat(t, msgs, spec);
    } catch (const moe::Error&) {
        MOE_FUZZ_CHECK(!valid, "render_chat refused a valid conversation");
        return;
    }
    MOE_FUZZ_CHECK(valid, "render_chat accepted an empty conversation or an unknown role");
    MOE_FUZZ_CHECK(out.compare(0, spec.bos.size(), spec.bos) == 0, "output does not start with BOS");
    std::vector<std::string> system, rest, all;
    for (const auto& m : msgs) {
        const std::string c = t.family == ChatFamily::Llama3 ? trimmed(m.content) : m.content;
        (m.role == "system" ? system : rest).push_back(c);
        all.push_back(c);
    }
    size_t pos = spec.bos.size();
    if (t.family == ChatFamily::DeepSeek3) {
        MOE_FUZZ_CHECK(in_order(out, system, pos) && in_order(out, rest, pos), "contents missing or out of order");
    } else {
        MOE_FUZZ_CHECK(in_order(out, all, pos), "contents missing or out of order");
    }
    const std::string gen = generation_prompt(t.family);
    if (spec.add_generation_prompt && !gen.empty())
        MOE_FUZZ_CHECK(out.size() >= gen.size() && out.compare(out.size() - gen.size(), gen.size(), gen) == 0,
                       "no generation prompt at the end");
}

}  // namespace moe::fuzz
