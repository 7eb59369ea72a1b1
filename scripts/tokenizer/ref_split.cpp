// Reference pre-tokenizer splits from llama.cpp (outside the repository): for every regex set in
// SETS (from dump_sets) writes OUT_DIR/<set>.out with one line per string of STRINGS.inp: the byte
// lengths of the pieces llama.cpp's unicode_regex_split (exported by libllama) cuts it into.
//   ref_split SETS STRINGS.inp OUT_DIR
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

std::vector<std::string> unicode_regex_split(const std::string& text, const std::vector<std::string>& regex_exprs,
                                             bool byte_encode);

int main(int argc, char** argv) {
    if (argc != 4) return 2;
    std::ifstream sf(argv[2], std::ios::binary);
    std::stringstream ss;
    ss << sf.rdbuf();
    const std::string inp = ss.str(), sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> strings;
    for (size_t pos = 0; pos < inp.size();) {
        size_t next = inp.find(sep, pos);
        if (next == std::string::npos) next = inp.size();
        strings.push_back(inp.substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::ifstream sets(argv[1]);
    std::vector<std::pair<std::string, std::vector<std::string>>> all;
    for (std::string line; std::getline(sets, line);) {
        if (line.rfind("SET ", 0) == 0) all.push_back({line.substr(4), {}});
        else {
            std::string re;  // hex-encoded
            for (size_t i = 0; i + 1 < line.size(); i += 2) re.push_back(static_cast<char>(std::stoi(line.substr(i, 2), nullptr, 16)));
            all.back().second.push_back(re);
        }
    }
    for (const auto& [name, regexes] : all) {
        FILE* out = std::fopen((std::string(argv[3]) + "/" + name + ".out").c_str(), "w");
        for (const auto& s : strings) {
            // llama.cpp never splits empty text (and its Kimi-K2 path cannot)
            const auto words = s.empty() ? std::vector<std::string>{} : unicode_regex_split(s, regexes, false);
            for (size_t i = 0; i < words.size(); ++i) std::fprintf(out, "%s%zu", i ? " " : "", words[i].size());
            std::fprintf(out, "\n");
        }
        std::fclose(out);
    }
    return 0;
}
