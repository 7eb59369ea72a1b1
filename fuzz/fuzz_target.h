#pragma once
// Fuzz entry points (docs/SECURITY.md). Each takes arbitrary bytes and must return normally: a
// moe::Error (the promised "clear error" for bad input) is caught inside; anything else (another
// exception, a crash, a sanitizer report, a broken property checked with MOE_FUZZ_CHECK) is a bug.
// The same functions are driven by libFuzzer (fuzz/libfuzzer_main.cpp, clang build) and replayed
// over the checked-in corpora by the normal test suite (tests/fuzz/test_fuzz_replay.cpp, GCC).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"

namespace moe::tokenizer {
class Tokenizer;
}

namespace moe::fuzz {

#define MOE_FUZZ_TARGET(name) void name(const uint8_t* data, size_t size);
#include "fuzz/targets.def"
#undef MOE_FUZZ_TARGET

struct Target {
    const char* name;
    void (*fn)(const uint8_t*, size_t);
};

inline constexpr Target kTargets[] = {
#define MOE_FUZZ_TARGET(name) {#name, &name},
#include "fuzz/targets.def"
#undef MOE_FUZZ_TARGET
};

// Runs `f()` and swallows moe::Error only (a rejected input is a pass).
template <typename F>
void expect_clean(F&& f) {
    try {
        f();
    } catch (const moe::Error&) {
    }
}

// Folder of the project's test fixtures (tests/data), for targets that need a vocabulary.
const char* data_dir();
// The vocab-only GGUF tests/data/vocab/<file>, loaded once (immutable afterwards).
const tokenizer::Tokenizer& vocab_tokenizer(const char* file);
inline constexpr const char* kVocabBpe = "ggml-vocab-gpt-2.gguf";        // gpt2 byte-level BPE
inline constexpr const char* kVocabSpm = "ggml-vocab-llama-spm.gguf";    // llama SentencePiece
// Loads what target `name` needs once (the vocabularies), before the first input: libFuzzer's
// LLVMFuzzerInitialize and test_resource_bounds (before its fork) call it, so that a slow first
// load is not charged to an input's -timeout or bound. Unknown names need nothing.
void prepare(const char* name);

}  // namespace moe::fuzz

// A property the engine promises for every input; failing aborts so the fuzzer records the input.
#define MOE_FUZZ_CHECK(cond, ...) MOE_ASSERT(cond, "fuzz property: " __VA_OPT__(, ) __VA_ARGS__)
