#include "format/gguf_keys.h"

namespace moe::gguf {
namespace {

struct KnownKey {
    std::string_view name;
    KeyKind kind;
};

constexpr KnownKey kGlobalKeys[] = {
    {"general.architecture", KeyKind::String},
    {"general.alignment", KeyKind::U32},  // llama.cpp reads it strictly as u32
    {"general.quantization_version", KeyKind::Integer},
    {"general.name", KeyKind::String},
    {"general.file_type", KeyKind::Integer},
    {"tokenizer.ggml.model", KeyKind::String},
    {"tokenizer.ggml.pre", KeyKind::String},
    {"tokenizer.ggml.tokens", KeyKind::StringArray},
    {"tokenizer.ggml.scores", KeyKind::FloatArray},
    {"tokenizer.ggml.token_type", KeyKind::IntegerArray},
    {"tokenizer.ggml.merges", KeyKind::StringArray},
    {"tokenizer.ggml.bos_token_id", KeyKind::Integer},
    {"tokenizer.ggml.eos_token_id", KeyKind::Integer},
    {"tokenizer.ggml.eot_token_id", KeyKind::Integer},
    {"tokenizer.ggml.eom_token_id", KeyKind::Integer},
    {"tokenizer.ggml.unknown_token_id", KeyKind::Integer},
    {"tokenizer.ggml.seperator_token_id", KeyKind::Integer},  // sic, the llama.cpp spelling
    {"tokenizer.ggml.separator_token_id", KeyKind::Integer},
    {"tokenizer.ggml.padding_token_id", KeyKind::Integer},
    {"tokenizer.ggml.mask_token_id", KeyKind::Integer},
    {"tokenizer.ggml.add_bos_token", KeyKind::Bool},
    {"tokenizer.ggml.add_eos_token", KeyKind::Bool},
    {"tokenizer.ggml.add_space_prefix", KeyKind::Bool},
    {"tokenizer.chat_template", KeyKind::String},
};

// Keys under "<arch>.".
constexpr KnownKey kArchKeys[] = {
    {"vocab_size", KeyKind::Integer},
    {"context_length", KeyKind::Integer},
    {"embedding_length", KeyKind::Integer},
    {"block_count", KeyKind::Integer},
    {"feed_forward_length", KeyKind::IntegerOrIntegerArray},
    {"leading_dense_block_count", KeyKind::Integer},
    {"expert_count", KeyKind::Integer},
    {"expert_used_count", KeyKind::Integer},
    {"expert_shared_count", KeyKind::Integer},
    {"expert_feed_forward_length", KeyKind::Integer},
    {"expert_shared_feed_forward_length", KeyKind::Integer},
    {"expert_weights_scale", KeyKind::Float},
    {"expert_weights_norm", KeyKind::Bool},
    {"expert_gating_func", KeyKind::Integer},
    {"attention.head_count", KeyKind::IntegerOrIntegerArray},
    {"attention.head_count_kv", KeyKind::IntegerOrIntegerArray},
    {"attention.key_length", KeyKind::Integer},
    {"attention.value_length", KeyKind::Integer},
    {"attention.layer_norm_epsilon", KeyKind::Float},
    {"attention.layer_norm_rms_epsilon", KeyKind::Float},
    {"attention.sliding_window", KeyKind::Integer},
    {"rope.dimension_count", KeyKind::Integer},
    {"rope.freq_base", KeyKind::Float},
    {"rope.scaling.type", KeyKind::String},
    {"rope.scaling.factor", KeyKind::Float},
    {"rope.scaling.original_context_length", KeyKind::Integer},
};

bool array_of(const Value& v, bool (*pred)(const Value&)) {
    if (v.type != ValueType::ARRAY) return false;
    for (const Value& e : v.arr)
        if (!pred(e)) return false;
    // An empty array still declares its element type; check that too.
    Value probe;
    probe.type = v.elem_type;
    return pred(probe);
}

bool is_int(const Value& v) { return v.is_integer(); }
bool is_float(const Value& v) { return v.is_float(); }
bool is_string(const Value& v) { return v.type == ValueType::STRING; }

}  // namespace

std::optional<KeyKind> known_key_kind(std::string_view key, std::string_view arch) {
    for (const auto& k : kGlobalKeys)
        if (k.name == key) return k.kind;
    if (!arch.empty() && key.size() > arch.size() && key.substr(0, arch.size()) == arch &&
        key[arch.size()] == '.') {
        const std::string_view suffix = key.substr(arch.size() + 1);
        for (const auto& k : kArchKeys)
            if (k.name == suffix) return k.kind;
    }
    return std::nullopt;
}

bool value_matches(const Value& v, KeyKind kind) {
    switch (kind) {
        case KeyKind::String: return is_string(v);
        case KeyKind::U32: return v.type == ValueType::U32;
        case KeyKind::Integer: return is_int(v);
        case KeyKind::Float: return is_float(v);
        case KeyKind::Bool: return v.type == ValueType::BOOL;
        case KeyKind::IntegerOrIntegerArray: return is_int(v) || array_of(v, is_int);
        case KeyKind::StringArray: return array_of(v, is_string);
        case KeyKind::FloatArray: return array_of(v, is_float);
        case KeyKind::IntegerArray: return array_of(v, is_int);
    }
    return false;
}

const char* key_kind_name(KeyKind kind) {
    switch (kind) {
        case KeyKind::String: return "string";
        case KeyKind::U32: return "u32";
        case KeyKind::Integer: return "an integer";
        case KeyKind::Float: return "f32 or f64";
        case KeyKind::Bool: return "bool";
        case KeyKind::IntegerOrIntegerArray: return "an integer or an array of integers";
        case KeyKind::StringArray: return "array[string]";
        case KeyKind::FloatArray: return "array[f32]";
        case KeyKind::IntegerArray: return "array[integer]";
    }
    return "?";
}

}  // namespace moe::gguf
