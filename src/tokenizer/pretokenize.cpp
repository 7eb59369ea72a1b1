#include "tokenizer/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "core/error.h"

namespace moe::tokenizer {

namespace {

constexpr const char* kC = "tokenizer";

// Contractions as the original tokenizers have them, but with the case-insensitivity spelled out
// per letter (as llama.cpp does): PCRE2's (?i) with UCP would also fold e.g. U+017F 'ſ' to 's'.
#define MOE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

// GPT-2 (openai/gpt-2 encoder.py); lower-case contractions only.
const char* const kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
// Llama 3 (tiktoken cl100k-style): numbers in groups of up to three digits.
const char* const kLlama3 = MOE_CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen2: as Llama 3 but every digit is its own piece.
const char* const kQwen2 = MOE_CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct PreDef {
    const char* name;
    std::vector<const char*> regexes;
};

// "default" is what llama.cpp applies to a BPE vocab without a named pre-tokenizer: punctuation
// runs first, then the GPT-2 regex, then digit runs and groups of three ASCII digits.
const std::vector<PreDef>& defs() {
    static const std::vector<PreDef> d = {
        {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}},
        {"gpt-2", {kGpt2}},
        {"llama3", {kLlama3}},
        {"llama-bpe", {kLlama3}},
        {"llama-v3", {kLlama3}},
        {"qwen2", {kQwen2}},
    };
    return d;
}

struct Regex {
    pcre2_code* code = nullptr;
    bool jit = false;
    Regex() = default;
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;
    Regex(Regex&& o) noexcept : code(o.code), jit(o.jit) { o.code = nullptr; }
    ~Regex() {
        if (code) pcre2_code_free(code);
    }
};

std::string pcre2_message(int rc) {
    PCRE2_UCHAR buf[256];
    if (pcre2_get_error_message(rc, buf, sizeof(buf)) < 0) return "error " + std::to_string(rc);
    return reinterpret_cast<const char*>(buf);
}

Regex compile(const char* pattern) {
    Regex r;
    int err = 0;
    PCRE2_SIZE err_off = 0;
    r.code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                           PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_off, nullptr);
    // The patterns are constants of this file: failing to compile is a build defect, not input.
    MOE_ASSERT(r.code != nullptr, "PCRE2 cannot compile '", pattern, "' at ", err_off, ": ", pcre2_message(err));
    r.jit = pcre2_jit_compile(r.code, PCRE2_JIT_COMPLETE) == 0;
    return r;
}

struct MatchData {
    pcre2_match_data* md;
    explicit MatchData(const pcre2_code* code) : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
        if (!md) throw std::bad_alloc();
    }
    ~MatchData() { pcre2_match_data_free(md); }
};

// Cuts `piece` into matches of `re` and the gaps between them, appending both to `out`.
void split_one(const Regex& re, MatchData& m, std::string_view piece, std::vector<std::string_view>& out) {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    const size_t len = piece.size();
    size_t pos = 0;
    while (pos < len) {
        int rc = pcre2_match(re.code, subject, len, pos, 0, m.md, nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
            // Very long runs can exhaust the JIT stack; the interpreter keeps its frames on the heap.
            rc = pcre2_match(re.code, subject, len, pos, PCRE2_NO_JIT, m.md, nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0)
            throw_error(kC, "pre-tokenizer regex failed on a ", len, "-byte piece: ", pcre2_message(rc));
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(m.md);
        size_t s = ov[0], e = ov[1];
        if (s > pos) out.push_back(piece.substr(pos, s - pos));
        if (e == s) {
            // No pattern here matches empty, but never loop on one: fold the next byte into a gap.
            e = s + 1;
        }
        out.push_back(piece.substr(s, e - s));
        pos = e;
    }
    if (pos < len) out.push_back(piece.substr(pos));
}

}  // namespace

struct PreTokenizer::Impl {
    std::string name;
    std::vector<Regex> regexes;
};

PreTokenizer::PreTokenizer(const std::string& name) : impl_(std::make_unique<Impl>()) {
    const PreDef* def = nullptr;
    for (const auto& d : defs())
        if (name == d.name) def = &d;
    if (!def) {
        std::string list;
        for (const auto& s : supported()) list += (list.empty() ? "'" : ", '") + s + "'";
        throw_error(kC, "pre-tokenizer '", name, "' (tokenizer.ggml.pre) is not supported (supported: ", list, ")");
    }
    impl_->name = name;
    for (const char* p : def->regexes) impl_->regexes.push_back(compile(p));
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

const std::string& PreTokenizer::name() const { return impl_->name; }

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
    std::vector<std::string_view> pieces;
    if (text.empty()) return pieces;
    pieces.push_back(text);
    std::vector<std::string_view> next;
    for (const Regex& re : impl_->regexes) {
        next.clear();
        MatchData m(re.code);
        for (std::string_view p : pieces) split_one(re, m, p, next);
        pieces.swap(next);
    }
    return pieces;
}

const std::vector<std::string>& PreTokenizer::supported() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v;
        for (const auto& d : defs()) v.push_back(d.name);
        return v;
    }();
    return names;
}

bool PreTokenizer::is_supported(const std::string& name) {
    const auto& s = supported();
    return std::find(s.begin(), s.end(), name) != s.end();
}

}  // namespace moe::tokenizer
