#pragma once
// Test helper: a `moe gen` preset written once into `dir` (kept if it already exists).
#include <filesystem>
#include <string>

#include "core/dtype.h"

namespace moe::testutil {

// dir / "<preset>-<type>.gguf" (or "<preset>.gguf" with name_type = false), generated with one
// thread (identical bytes for any thread count) if missing. Returns its path.
std::string gen_model(const std::filesystem::path& dir, const std::string& preset, DType type, uint64_t seed,
                      bool name_type = true);

}  // namespace moe::testutil
