#include "tokenizer/vectors_util.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace moe::tokenizer::test {

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Format (llama.cpp tests/test-tokenizer-0.cpp): the .inp file is the test strings, each followed
// by the separator "\n__ggml_vocab_test__\n" (so a string's own leading/trailing newlines are
// part of it); the .out file has one line per string with the expected ids separated by spaces
// (lines may have a leading space; an empty line means no tokens).
std::vector<VocabCase> read_vocab_cases(const std::string& vocab_path) {
    const std::string inp = read_file(vocab_path + ".inp");
    const std::string outp = read_file(vocab_path + ".out");
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> texts;
    for (size_t pos = 0; pos < inp.size();) {
        const size_t next = inp.find(sep, pos);
        if (next == std::string::npos) {
            texts.push_back(inp.substr(pos));
            break;
        }
        texts.push_back(inp.substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::vector<std::vector<int32_t>> ids;
    std::istringstream lines(outp);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream ls(line);
        std::vector<int32_t> row;
        for (long v; ls >> v;) row.push_back(static_cast<int32_t>(v));
        if (!ls.eof()) throw std::runtime_error("bad line in " + vocab_path + ".out: " + line);
        ids.push_back(std::move(row));
    }
    if (texts.size() != ids.size())
        throw std::runtime_error(vocab_path + ": " + std::to_string(texts.size()) + " inputs but " +
                                 std::to_string(ids.size()) + " expected-id lines");
    std::vector<VocabCase> cases;
    for (size_t i = 0; i < texts.size(); ++i) cases.push_back({texts[i], ids[i]});
    return cases;
}

std::string escaped(const std::string& s) {
    std::string r;
    for (unsigned char c : s) {
        if (c == '\n') r += "\\n";
        else if (c == '\t') r += "\\t";
        else if (c < 0x20) r += "\\x" + std::to_string(c);
        else r.push_back(static_cast<char>(c));
    }
    return r;
}

}  // namespace moe::tokenizer::test
