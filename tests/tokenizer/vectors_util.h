#pragma once
// Helpers shared by the tokenizer tests.
#include <cstdint>
#include <string>
#include <vector>

namespace moe::tokenizer::test {

struct VocabCase {
    std::string text;
    std::vector<int32_t> ids;
};

std::string read_file(const std::string& path);
// Reads `<vocab>.inp` / `<vocab>.out` (llama.cpp test-tokenizer-0 format).
std::vector<VocabCase> read_vocab_cases(const std::string& vocab_path);
// Printable form of a test string for failure messages.
std::string escaped(const std::string& s);

}  // namespace moe::tokenizer::test
