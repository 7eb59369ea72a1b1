#pragma once
// Tokenizer vocabulary as stored in GGUF metadata (keys: ../shared/reference/FACTS.md §1).
// `load_vocab` is a hostile-input parser: every array length, id and merge is validated, and errors
// are moe::Error with component "tokenizer" naming the key and what to do.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace moe::gguf {
class File;
}

namespace moe::tokenizer {

// tokenizer.ggml.token_type values (llama.cpp / GGUF convention).
enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};
const char* token_type_name(TokenType t);

// Which algorithm tokenizer.ggml.model selects.
enum class ModelType {
    Spm,  // "llama": SentencePiece-style best-score merging over UTF-8 characters + byte fallback
    Bpe,  // "gpt2": byte-level BPE with merge ranks and a regex pre-tokenizer
};

inline constexpr int32_t kNoToken = -1;
// Vocab::strip bits: when the token is matched in text, whitespace before (left) / after (right)
// it is dropped from the neighbouring text.
inline constexpr uint8_t kStripLeft = 1, kStripRight = 2;
// Largest vocabulary accepted (8x the largest real one, Gemma 3's 262144): bounds the tokenizer's
// tables, whose memory is ~100x the vocab's bytes in the file (docs/SECURITY.md, resource bounds).
inline constexpr size_t kMaxVocab = size_t(1) << 21;

struct Vocab {
    std::string source = "<memory>";  // file the vocab came from (for error messages)
    std::string model;                // tokenizer.ggml.model ("llama" | "gpt2")
    std::string pre;                  // tokenizer.ggml.pre ("" when absent)
    ModelType type = ModelType::Spm;

    std::vector<std::string> tokens;  // tokenizer.ggml.tokens
    std::vector<float> scores;        // tokenizer.ggml.scores (empty = all 0)
    std::vector<TokenType> types;     // tokenizer.ggml.token_type (empty = all Normal)
    std::vector<std::pair<std::string, std::string>> merges;  // tokenizer.ggml.merges, rank = index

    int32_t bos_id = kNoToken;
    int32_t eos_id = kNoToken;
    int32_t unk_id = kNoToken;
    int32_t pad_id = kNoToken;
    bool add_bos = false;           // tokenizer.ggml.add_bos_token (default per model, see load_vocab)
    bool add_eos = false;           // tokenizer.ggml.add_eos_token (default false)
    bool add_space_prefix = false;  // tokenizer.ggml.add_space_prefix (default true for SPM)
    // Per-token strip flags of special tokens (kStripLeft/kStripRight bits; empty = none). GGUF
    // does not store them: load_vocab sets them by model name as llama.cpp does (Phi-3: rstrip).
    std::vector<uint8_t> strip;

    // Heterogeneous lookup: find(string_view) without building a std::string.
    struct TextHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    // Built by finalize(): token text -> id (empty token strings are not indexed).
    std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>> token_to_id;

    size_t size() const { return tokens.size(); }
    int32_t find(std::string_view text) const;  // kNoToken when absent
    float score(int32_t id) const { return scores.empty() ? 0.0f : scores[static_cast<size_t>(id)]; }
    uint8_t strip_of(int32_t id) const { return strip.empty() ? 0 : strip[static_cast<size_t>(id)]; }
    TokenType type_of(int32_t id) const {
        return types.empty() ? TokenType::Normal : types[static_cast<size_t>(id)];
    }
    bool valid_id(int64_t id) const { return id >= 0 && static_cast<uint64_t>(id) < tokens.size(); }

    // Validates the fields (lengths, ids in range, type values, duplicate tokens, BOS/EOS present
    // when the flags need them) and builds token_to_id. Called by load_vocab and by Tokenizer for
    // hand-built vocabs. Throws moe::Error("tokenizer", ...).
    void finalize();
};

// Reads and validates the tokenizer.ggml.* keys of a GGUF file (model files and vocab-only files).
// Defaults when keys are absent (as llama.cpp applies them):
//   "llama": bos 1, eos 2, unk 0 (each only if in range); add_bos true, add_eos false,
//            add_space_prefix true; tokenizer.ggml.scores required.
//   "gpt2":  no default bos/eos/unk; add_bos true only where the pre-tokenizer's PreInfo says so
//            (llama3 family, tekken), add_eos false, add_space_prefix false; merges required.
// Then apply_attribute_rules.
Vocab load_vocab(const gguf::File& file);

// llama.cpp's token attributes that GGUF does not store (vocab_attrs.cpp): tokens whose text marks
// end of turn / fill-in-the-middle (when the id key is absent) or end of generation become control
// tokens; gpt-oss's <|channel|> <|message|> <|start|> <|constrain|> (and <|end|> next to
// <|return|>/<|call|>) become user-defined; a model whose general.name contains "phi-3"/"phi3"
// gets rstrip on its special tokens except <unk>, <s>, <|endoftext|>. Needs a finalized vocab.
void apply_attribute_rules(const gguf::File& file, Vocab& vocab);

// The model names and (for gpt2) pre-tokenizer names this layer supports.
const std::vector<std::string>& supported_models();

}  // namespace moe::tokenizer
