#pragma once
// Test helpers for tests/fuzz: the checked-in fuzz inputs of a target.
#include <filesystem>
#include <string>
#include <vector>

namespace moe::testutil {

// fuzz/ in the source tree.
std::filesystem::path fuzz_dir();

struct FuzzInput {
    std::filesystem::path path;
    std::string bytes;
};

// Every file of fuzz/corpus/<target>/ and fuzz/regressions/<target>/, sorted by path.
std::vector<FuzzInput> fuzz_inputs(const std::string& target);

}  // namespace moe::testutil
