#include "tokenizer/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 0  // both widths: 8-bit for collapsed text, 32-bit for code points
#include <pcre2.h>

#include <algorithm>
#include <new>

#include "core/error.h"
#include "tokenizer/unicode_class.h"

namespace moe::tokenizer {

namespace {

constexpr const char* kC = "tokenizer";

// Byte classes that stand for \p{X} in collapsed text (unicode_class.h): the category byte plus
// the ASCII characters of that category (as llama.cpp lists them: '~' is not in \p{S} there).
std::string property_class(std::string_view name, bool han) {
    const std::string letters = han ? "\\xD2\\xD6A-Za-z" : "\\xD2A-Za-z";
    if (name == "L" || name == "Lu" || name == "Ll" || name == "Lt" || name == "Lm" || name == "Lo") return letters;
    if (name == "Lx") return "\\xD2A-Za-z";  // letters other than Han (kimi-k2)
    if (name == "Han") return "\\xD6";
    if (name == "N") return "\\xD10-9";
    if (name == "P") return "\\xD3!-#%-*,-/:-;?-@\\[-\\]_\\{\\}";
    if (name == "M") return "\\xD4";
    if (name == "S") return "\\xD5\\$\\+<->\\^`\\|";
    MOE_ASSERT(false, "pre-tokenizer regex uses an unknown class \\p{", std::string(name), "}");
    return {};
}

// Rewrites a regex over Unicode classes into one over collapsed bytes: \p{X} becomes [class]
// outside brackets and the bare class inside them; everything else is copied.
std::string collapse_pattern(std::string_view re, bool han) {
    std::string out;
    bool inside = false;
    for (size_t i = 0; i < re.size(); ++i) {
        const char c = re[i];
        if (c == '\\' && i + 1 < re.size()) {
            if (re[i + 1] == 'p' && i + 2 < re.size() && re[i + 2] == '{') {
                const size_t close = re.find('}', i + 3);
                MOE_ASSERT(close != std::string_view::npos, "unterminated \\p{ in a pre-tokenizer regex");
                const std::string cls = property_class(re.substr(i + 3, close - i - 3), han);
                out += inside ? cls : "[" + cls + "]";
                i = close;
                continue;
            }
            out += c;
            out += re[++i];
            continue;
        }
        if (c == '[' && !inside) inside = true;
        else if (c == ']' && inside) inside = false;
        out += c;
    }
    return out;
}

std::u32string to_u32(std::string_view s) {
    ucls::Decoded d;
    ucls::decode(s, d);
    return std::u32string(d.cps.begin(), d.cps.end());
}

std::string pcre2_message(int rc) {
    PCRE2_UCHAR8 buf[256];
    if (pcre2_get_error_message_8(rc, buf, sizeof(buf)) < 0) return "error " + std::to_string(rc);
    return reinterpret_cast<const char*>(buf);
}

// One compiled regex: 8-bit over collapsed text, or 32-bit (UTF) over code points.
struct Regex {
    bool collapsed = false;
    pcre2_code_8* c8 = nullptr;
    pcre2_code_32* c32 = nullptr;
    Regex() = default;
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;
    Regex(Regex&& o) noexcept : collapsed(o.collapsed), c8(o.c8), c32(o.c32) { o.c8 = nullptr, o.c32 = nullptr; }
    ~Regex() {
        if (c8) pcre2_code_free_8(c8);
        if (c32) pcre2_code_free_32(c32);
    }
};

Regex compile(const char* pattern, bool han) {
    Regex r;
    const std::string_view p(pattern);
    r.collapsed = p.find("\\p{") != std::string_view::npos;
    int err = 0;
    PCRE2_SIZE off = 0;
    // $ means end of the piece only (ECMAScript semantics, not "before a final newline").
    if (r.collapsed) {
        const std::string cp = collapse_pattern(p, han);
        r.c8 = pcre2_compile_8(reinterpret_cast<PCRE2_SPTR8>(cp.data()), cp.size(), PCRE2_DOLLAR_ENDONLY, &err, &off,
                               nullptr);
        // The patterns are constants of this program: failing to compile is a build defect.
        MOE_ASSERT(r.c8 != nullptr, "PCRE2 cannot compile '", cp, "' at ", off, ": ", pcre2_message(err));
        pcre2_jit_compile_8(r.c8, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if unavailable
    } else {
        const std::u32string u = to_u32(p);
        r.c32 = pcre2_compile_32(reinterpret_cast<PCRE2_SPTR32>(u.data()), u.size(), PCRE2_UTF | PCRE2_DOLLAR_ENDONLY,
                                 &err, &off, nullptr);
        MOE_ASSERT(r.c32 != nullptr, "PCRE2 cannot compile '", pattern, "' at ", off, ": ", pcre2_message(err));
        pcre2_jit_compile_32(r.c32, PCRE2_JIT_COMPLETE);
    }
    return r;
}

// Match data for one regex (per split call, so split() is thread-safe).
struct MatchData {
    pcre2_match_data_8* m8 = nullptr;
    pcre2_match_data_32* m32 = nullptr;
    explicit MatchData(const Regex& re) {
        if (re.collapsed) m8 = pcre2_match_data_create_from_pattern_8(re.c8, nullptr);
        else m32 = pcre2_match_data_create_from_pattern_32(re.c32, nullptr);
        if (!m8 && !m32) throw std::bad_alloc();
    }
    MatchData(const MatchData&) = delete;
    MatchData& operator=(const MatchData&) = delete;
    ~MatchData() {
        if (m8) pcre2_match_data_free_8(m8);
        if (m32) pcre2_match_data_free_32(m32);
    }
};

// Subjects of one split: the collapsed bytes and/or the code points, as the set needs them.
struct Subjects {
    std::string collapsed;
    std::u32string cps;
};

// Runs `re` over the segment [a, b) of the subject (as a subject of its own, so lookarounds and
// $ see the segment's ends, as llama.cpp's per-piece regex iteration does) and appends the ends of
// the matches and of the gaps between them to `ends`.
void cut(const Regex& re, const Subjects& s, uint32_t a, uint32_t b, std::vector<uint32_t>& ends,
         pcre2_match_data_8* md8, pcre2_match_data_32* md32) {
    const size_t len = b - a;
    size_t pos = 0;
    while (pos < len) {
        int rc;
        const PCRE2_SIZE* ov;
        if (re.collapsed) {
            const auto* subj = reinterpret_cast<PCRE2_SPTR8>(s.collapsed.data() + a);
            rc = pcre2_match_8(re.c8, subj, len, pos, 0, md8, nullptr);
            // Very long runs can exhaust the JIT stack; the interpreter keeps its frames on the heap.
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = pcre2_match_8(re.c8, subj, len, pos, PCRE2_NO_JIT, md8, nullptr);
            ov = pcre2_get_ovector_pointer_8(md8);
        } else {
            // The subject is valid UTF-32 by construction; PCRE2 would otherwise re-check the whole
            // segment on every call (quadratic in its length).
            const auto* subj = reinterpret_cast<PCRE2_SPTR32>(s.cps.data() + a);
            rc = pcre2_match_32(re.c32, subj, len, pos, PCRE2_NO_UTF_CHECK, md32, nullptr);
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
                rc = pcre2_match_32(re.c32, subj, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md32, nullptr);
            ov = pcre2_get_ovector_pointer_32(md32);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) throw_error(kC, "pre-tokenizer regex failed on a ", len, "-character piece: ", pcre2_message(rc));
        const size_t ms = ov[0];
        size_t me = ov[1];
        if (ms > pos) ends.push_back(static_cast<uint32_t>(a + ms));
        if (me == ms) me = ms + 1;  // no pattern here matches empty; never loop on one
        ends.push_back(static_cast<uint32_t>(a + me));
        pos = me;
    }
    if (pos < len) ends.push_back(b);
}

}  // namespace

struct PreTokenizer::Impl {
    std::string name;
    PreInfo info;
    bool han = false;
    bool need_collapsed = false, need_cps = false;
    std::vector<Regex> regexes;
};

PreTokenizer::PreTokenizer(const std::string& name) : impl_(std::make_unique<Impl>()) {
    const detail::PreName* row = nullptr;
    for (const auto& r : detail::pre_table())
        if (name == r.name) row = &r;
    if (!row) {
        std::string list;
        for (const auto& s : supported()) list += (list.empty() ? "'" : ", '") + s + "'";
        throw_error(kC, "pre-tokenizer '", name, "' (tokenizer.ggml.pre) is not supported (supported: ", list, ")");
    }
    impl_->name = name;
    impl_->info = row->info;
    impl_->han = row->set->han;
    for (const char* p : row->set->regexes) {
        impl_->regexes.push_back(compile(p, impl_->han));
        (impl_->regexes.back().collapsed ? impl_->need_collapsed : impl_->need_cps) = true;
    }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

const std::string& PreTokenizer::name() const { return impl_->name; }
const PreInfo& PreTokenizer::info() const { return impl_->info; }

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
    std::vector<std::string_view> pieces;
    if (text.empty()) return pieces;
    ucls::Decoded d;
    ucls::decode(text, d);
    const auto n = static_cast<uint32_t>(d.cps.size());
    Subjects s;
    if (impl_->need_collapsed) {
        s.collapsed.resize(n);
        for (uint32_t i = 0; i < n; ++i) s.collapsed[i] = static_cast<char>(ucls::collapse(d.cps[i], impl_->han));
    }
    if (impl_->need_cps) {
        // ASCII-only \s, so non-ASCII whitespace is shown as U+000B; surrogates (from lenient
        // decoding) as U+FFFD so that the subject is valid UTF-32.
        s.cps.resize(n);
        for (uint32_t i = 0; i < n; ++i) {
            const uint32_t cp = d.cps[i];
            s.cps[i] = cp >= 0x80 && ucls::is_whitespace(cp) ? 0x0B : (cp >= 0xD800 && cp <= 0xDFFF ? 0xFFFD : cp);
        }
    }
    std::vector<uint32_t> ends{n}, next;
    for (const Regex& re : impl_->regexes) {
        const MatchData md(re);
        next.clear();
        next.reserve(ends.size() * 2);
        uint32_t a = 0;
        for (uint32_t b : ends) {
            cut(re, s, a, b, next, md.m8, md.m32);
            a = b;
        }
        ends.swap(next);
    }
    pieces.reserve(ends.size());
    uint32_t a = 0;
    for (uint32_t b : ends) {
        const uint32_t sb = d.offsets[a], eb = d.offsets[b];
        pieces.push_back(text.substr(sb, eb - sb));
        a = b;
    }
    return pieces;
}

const std::vector<std::string>& PreTokenizer::supported() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v;
        for (const auto& r : detail::pre_table()) v.push_back(r.name);
        return v;
    }();
    return names;
}

bool PreTokenizer::is_supported(const std::string& name) { return find_info(name) != nullptr; }

const PreInfo* PreTokenizer::find_info(const std::string& name) {
    for (const auto& r : detail::pre_table())
        if (name == r.name) return &r.info;
    return nullptr;
}

}  // namespace moe::tokenizer
