// Reference ids from llama.cpp's public API (outside the repository): reads strings in the
// test-tokenizer-0 .inp format and prints one line of ids per string (add_special=false,
// parse_special as given). Mode "d" instead prints, per string, llama_detokenize of those ids
// (remove_special=false, unparse_special=false) in hex.
// Usage: ref_tokenize VOCAB.gguf STRINGS.inp [0|1|d] > OUT
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "llama.h"
static void quiet(ggml_log_level, const char*, void*) {}
int main(int argc, char** argv) {
    if (argc < 3) return 2;
    const bool ps = argc > 3 && argv[3][0] == '1';
    const bool detok = argc > 3 && argv[3][0] == 'd';
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    auto mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model* m = llama_model_load_from_file(argv[1], mp);
    if (!m) { std::fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    const llama_vocab* v = llama_model_get_vocab(m);
    std::ifstream f(argv[2], std::ios::binary);
    std::stringstream ss; ss << f.rdbuf();
    const std::string inp = ss.str(), sep = "\n__ggml_vocab_test__\n";
    size_t pos = 0;
    while (pos < inp.size()) {
        size_t next = inp.find(sep, pos);
        if (next == std::string::npos) next = inp.size();
        const std::string s = inp.substr(pos, next - pos);
        std::vector<llama_token> ids(s.size() * 4 + 16);
        int n = llama_tokenize(v, s.data(), (int)s.size(), ids.data(), (int)ids.size(), false, ps);
        if (n < 0) { std::fprintf(stderr, "tokenize failed\n"); return 1; }
        if (detok) {
            std::string text(s.size() * 4 + 64, '\0');
            const int len = llama_detokenize(v, ids.data(), n, text.data(), (int)text.size(), false, false);
            if (len < 0) { std::fprintf(stderr, "detokenize failed\n"); return 1; }
            for (int i = 0; i < len; ++i) std::printf("%02x", (unsigned char)text[i]);
        } else {
            for (int i = 0; i < n; ++i) std::printf("%s%d", i ? " " : "", ids[i]);
        }
        std::printf("\n");
        pos = next + sep.size();
    }
    llama_model_free(m);
    return 0;
}
