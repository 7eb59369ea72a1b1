#include "tokenizer/vocab.h"

#include <optional>
#include <string>

#include "core/error.h"
#include "format/gguf.h"
#include "tokenizer/pretokenize.h"

namespace moe::tokenizer {

namespace {

constexpr const char* kC = "tokenizer";

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + ("'" + v[i] + "'");
    return s;
}

// Short printable form of a token or merge for error messages.
std::string shown(const std::string& s) {
    std::string r;
    for (unsigned char c : s) {
        if (r.size() > 40) return r + "...";
        if (c < 0x20 || c == 0x7f) {
            static const char* hex = "0123456789abcdef";
            r += "\\x";
            r += hex[c >> 4];
            r += hex[c & 15];
        } else {
            r += static_cast<char>(c);
        }
    }
    return r;
}

// Reads an optional token id key; present but out of range is an error naming the key.
void read_id(const gguf::File& f, const char* key, size_t n_tokens, int32_t& id) {
    std::optional<int64_t> v;
    try {
        v = f.get_int(key);
    } catch (const moe::Error& e) {
        throw_error(kC, f.path(), ": ", key, " has the wrong type (", e.what(), "); it must be an integer token id");
    }
    if (!v) return;
    if (*v < 0) {  // some converters write -1 for "no such token"
        id = kNoToken;
        return;
    }
    if (static_cast<uint64_t>(*v) >= n_tokens)
        throw_error(kC, f.path(), ": ", key, " = ", *v, " is out of range (the vocab has ", n_tokens,
                    " tokens); fix the id in the GGUF metadata or re-convert the model");
    id = static_cast<int32_t>(*v);
}

template <typename T, typename Fn>
T read_key(const gguf::File& f, const char* key, const char* expected, Fn&& get) {
    try {
        return get();
    } catch (const moe::Error& e) {
        throw_error(kC, f.path(), ": ", key, " must be ", expected, " (", e.what(), ")");
    }
}

}  // namespace

const char* token_type_name(TokenType t) {
    switch (t) {
        case TokenType::Undefined: return "undefined";
        case TokenType::Normal: return "normal";
        case TokenType::Unknown: return "unknown";
        case TokenType::Control: return "control";
        case TokenType::UserDefined: return "user-defined";
        case TokenType::Unused: return "unused";
        case TokenType::Byte: return "byte";
    }
    return "?";
}

const std::vector<std::string>& supported_models() {
    static const std::vector<std::string> m = {"llama", "gpt2"};
    return m;
}

int32_t Vocab::find(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? kNoToken : it->second;
}

void Vocab::finalize() {
    const size_t n = tokens.size();
    if (n == 0)
        throw_error(kC, source, ": tokenizer.ggml.tokens is empty; the vocabulary needs at least one token");
    if (n > kMaxVocab)
        throw_error(kC, source, ": tokenizer.ggml.tokens has ", n, " entries, more than the limit of ", kMaxVocab,
                    " (real vocabularies have at most ~262k); the file is damaged or hostile");
    if (!scores.empty() && scores.size() != n)
        throw_error(kC, source, ": tokenizer.ggml.scores has ", scores.size(), " entries but tokenizer.ggml.tokens has ",
                    n, "; the arrays must have the same length (re-convert the vocabulary)");
    if (!strip.empty() && strip.size() != n)
        throw_error(kC, source, ": strip flags have ", strip.size(), " entries for ", n, " tokens");
    if (!types.empty() && types.size() != n)
        throw_error(kC, source, ": tokenizer.ggml.token_type has ", types.size(),
                    " entries but tokenizer.ggml.tokens has ", n,
                    "; the arrays must have the same length (re-convert the vocabulary)");
    for (size_t i = 0; i < types.size(); ++i) {
        const int32_t t = static_cast<int32_t>(types[i]);
        if (t < 0 || t > 6)
            throw_error(kC, source, ": tokenizer.ggml.token_type[", i, "] = ", t,
                        " is not a token type (expected 0..6: 1 normal, 2 unknown, 3 control, 4 user-defined, "
                        "5 unused, 6 byte)");
    }
    const struct {
        const char* key;
        int32_t id;
    } ids[] = {{"tokenizer.ggml.bos_token_id", bos_id},
               {"tokenizer.ggml.eos_token_id", eos_id},
               {"tokenizer.ggml.unknown_token_id", unk_id},
               {"tokenizer.ggml.padding_token_id", pad_id}};
    for (const auto& k : ids)
        if (k.id != kNoToken && !valid_id(k.id))
            throw_error(kC, source, ": ", k.key, " = ", k.id, " is out of range (the vocab has ", n, " tokens)");
    if (add_bos && bos_id == kNoToken)
        throw_error(kC, source,
                    ": tokenizer.ggml.add_bos_token is true but there is no BOS token; set "
                    "tokenizer.ggml.bos_token_id or add_bos_token = false");
    if (add_eos && eos_id == kNoToken)
        throw_error(kC, source,
                    ": tokenizer.ggml.add_eos_token is true but there is no EOS token; set "
                    "tokenizer.ggml.eos_token_id or add_eos_token = false");
    if (type == ModelType::Spm && scores.empty())
        throw_error(kC, source, ": tokenizer.ggml.scores is missing; model '", model,
                    "' (SentencePiece-style) needs a score per token (re-convert the vocabulary)");
    for (size_t i = 0; i < merges.size(); ++i)
        if (merges[i].first.empty() || merges[i].second.empty())
            throw_error(kC, source, ": tokenizer.ggml.merges[", i, "] has an empty side");

    token_to_id.clear();
    token_to_id.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        if (tokens[i].empty()) continue;  // never matches any text; decodes to nothing
        auto [it, inserted] = token_to_id.emplace(tokens[i], static_cast<int32_t>(i));
        if (!inserted)
            throw_error(kC, source, ": tokenizer.ggml.tokens has the token '", shown(tokens[i]), "' twice (ids ",
                        it->second, " and ", i, "); token strings must be unique (re-convert the vocabulary)");
    }
}

Vocab load_vocab(const gguf::File& f) {
    Vocab v;
    v.source = f.path();

    auto model = read_key<std::optional<std::string>>(f, "tokenizer.ggml.model", "a string",
                                                      [&] { return f.get_string("tokenizer.ggml.model"); });
    if (!model)
        throw_error(kC, f.path(), ": tokenizer.ggml.model is missing; this GGUF has no tokenizer (use a model "
                    "or vocab file converted with its tokenizer; supported models: ", join(supported_models()), ")");
    v.model = *model;
    if (v.model == "llama") {
        v.type = ModelType::Spm;
    } else if (v.model == "gpt2") {
        v.type = ModelType::Bpe;
    } else {
        throw_error(kC, f.path(), ": tokenizer.ggml.model = '", v.model, "' is not supported (supported: ",
                    join(supported_models()), ")");
    }
    auto pre = read_key<std::optional<std::string>>(f, "tokenizer.ggml.pre", "a string",
                                                    [&] { return f.get_string("tokenizer.ggml.pre"); });
    v.pre = pre.value_or("");
    if (v.type == ModelType::Bpe) {
        if (v.pre.empty()) v.pre = "default";
        if (!PreTokenizer::is_supported(v.pre))
            throw_error(kC, f.path(), ": tokenizer.ggml.pre = '", v.pre,
                        "' is not a supported pre-tokenizer (supported: ", join(PreTokenizer::supported()), ")");
    }

    auto tokens = read_key<std::optional<std::vector<std::string>>>(
        f, "tokenizer.ggml.tokens", "an array of strings", [&] { return f.get_string_array("tokenizer.ggml.tokens"); });
    if (!tokens)
        throw_error(kC, f.path(), ": tokenizer.ggml.tokens is missing; the GGUF has no vocabulary (re-convert the "
                    "model with its tokenizer)");
    v.tokens = std::move(*tokens);
    const size_t n = v.tokens.size();

    auto scores = read_key<std::optional<std::vector<float>>>(
        f, "tokenizer.ggml.scores", "an array of f32", [&] { return f.get_f32_array("tokenizer.ggml.scores"); });
    if (scores) v.scores = std::move(*scores);

    auto types = read_key<std::optional<std::vector<int32_t>>>(f, "tokenizer.ggml.token_type", "an array of integers",
                                                               [&] { return f.get_i32_array("tokenizer.ggml.token_type"); });
    if (types) {
        v.types.reserve(types->size());
        for (size_t i = 0; i < types->size(); ++i) {
            const int32_t t = (*types)[i];
            if (t < 0 || t > 6)
                throw_error(kC, f.path(), ": tokenizer.ggml.token_type[", i, "] = ", t,
                            " is not a token type (expected 0..6: 1 normal, 2 unknown, 3 control, 4 user-defined, "
                            "5 unused, 6 byte)");
            v.types.push_back(static_cast<TokenType>(t));
        }
    }

    if (v.type == ModelType::Bpe) {
        auto merges = read_key<std::optional<std::vector<std::string>>>(
            f, "tokenizer.ggml.merges", "an array of strings", [&] { return f.get_string_array("tokenizer.ggml.merges"); });
        if (!merges)
            throw_error(kC, f.path(), ": tokenizer.ggml.merges is missing; model 'gpt2' (byte-level BPE) needs its "
                        "merge list (re-convert the vocabulary)");
        v.merges.reserve(merges->size());
        for (size_t i = 0; i < merges->size(); ++i) {
            const std::string& m = (*merges)[i];
            // "left right": the separator is the first space after the first byte; both sides
            // non-empty and no further space.
            const size_t pos = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
            if (pos == std::string::npos || pos + 1 >= m.size() || m.find(' ', pos + 1) != std::string::npos)
                throw_error(kC, f.path(), ": tokenizer.ggml.merges[", i, "] = '", shown(m),
                            "' is malformed (expected two symbols separated by one space, e.g. 'Ġ t'); "
                            "re-convert the vocabulary");
            v.merges.emplace_back(m.substr(0, pos), m.substr(pos + 1));
        }
    }

    // Defaults per model type, then the file's keys.
    if (v.type == ModelType::Spm) {
        if (n > 1) v.bos_id = 1;
        if (n > 2) v.eos_id = 2;
        v.unk_id = 0;
        v.add_bos = true;
        v.add_space_prefix = true;
    } else {
        v.add_bos = PreTokenizer::find_info(v.pre)->add_bos;
        v.add_space_prefix = false;
    }
    v.add_eos = false;
    read_id(f, "tokenizer.ggml.bos_token_id", n, v.bos_id);
    read_id(f, "tokenizer.ggml.eos_token_id", n, v.eos_id);
    read_id(f, "tokenizer.ggml.unknown_token_id", n, v.unk_id);
    read_id(f, "tokenizer.ggml.padding_token_id", n, v.pad_id);
    auto get_flag = [&](const char* key, bool& out) {
        auto b = read_key<std::optional<bool>>(f, key, "a bool", [&] { return f.get_bool(key); });
        if (b) out = *b;
    };
    get_flag("tokenizer.ggml.add_bos_token", v.add_bos);
    get_flag("tokenizer.ggml.add_eos_token", v.add_eos);
    get_flag("tokenizer.ggml.add_space_prefix", v.add_space_prefix);

    v.finalize();
    apply_attribute_rules(f, v);
    return v;
}

}  // namespace moe::tokenizer
