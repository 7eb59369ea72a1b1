#pragma once
// Table of well-known GGUF metadata keys and the value types they must have. A file whose
// `general.architecture` is "llama" and whose `llama.block_count` is a string is rejected at load,
// naming the key, instead of failing somewhere deep in model setup.
#include <optional>
#include <string>
#include <string_view>

#include "format/gguf.h"

namespace moe::gguf {

// What a known key must hold. Integer/Float accept any width (files in the wild mix u32 and u64).
enum class KeyKind {
    String, U32, Integer, Float, Bool,
    IntegerOrIntegerArray,  // per-layer values (e.g. head_count_kv in some architectures)
    StringArray, FloatArray, IntegerArray,
};

// Expected kind of `key`, or nullopt when the key is not one we know. `arch` is the value of
// general.architecture (empty if absent); `<arch>.xxx` keys are looked up by their suffix.
std::optional<KeyKind> known_key_kind(std::string_view key, std::string_view arch);
bool value_matches(const Value& v, KeyKind kind);
const char* key_kind_name(KeyKind kind);

}  // namespace moe::gguf
