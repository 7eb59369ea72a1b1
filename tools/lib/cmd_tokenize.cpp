// `moe tokenize` and `moe detokenize`: text <-> token ids with the tokenizer of a GGUF model or a
// vocab-only GGUF file (only the tokenizer.ggml.* metadata is read).
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tools/lib/commands.h"

namespace moe::tools {

namespace {

void tokenize_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--parse-special]\n"
                 "  Prints the token ids of TEXT (or of FILE's contents), comma separated.\n"
                 "  -m MODEL         GGUF model or vocab-only GGUF file\n"
                 "  -p TEXT          text to tokenize\n"
                 "  -f FILE          read the text from FILE (bytes as they are)\n"
                 "  --no-bos         do not add BOS/EOS even where the vocab asks for them\n"
                 "  --parse-special  recognise special-token texts such as <|endoftext|> (default: plain text)\n");
}

void detokenize_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe detokenize -m MODEL [--ids 1,2,3] [--special] [--clean-spaces]\n"
                 "  Prints the text of the token ids (from --ids, else from stdin; separated by commas or\n"
                 "  whitespace), exactly, with no newline added.\n"
                 "  -m MODEL    GGUF model or vocab-only GGUF file\n"
                 "  --ids LIST  the ids\n"
                 "  --special   print the text of control tokens (e.g. <s>) instead of nothing\n"
                 "  --clean-spaces  llama.cpp's space clean-up (\" ,\" -> \",\") where the vocab's family uses it\n");
}

// Value of option argv[i] (advances i); a missing value is a usage error.
const char* value_of(int argc, char** argv, int& i, const char* cmd) {
    if (i + 1 >= argc) throw_error(cmd, "option ", argv[i], " needs a value (see moe ", cmd, " --help)");
    return argv[++i];
}

std::string read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw_error("tokenize", "cannot open ", path, ": ", std::strerror(errno));
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::vector<int32_t> parse_ids(const std::string& s) {
    std::vector<int32_t> ids;
    size_t pos = 0;
    while (pos < s.size()) {
        if (s[pos] == ',' || std::isspace(static_cast<unsigned char>(s[pos]))) {
            ++pos;
            continue;
        }
        size_t end = pos;
        while (end < s.size() && s[end] != ',' && !std::isspace(static_cast<unsigned char>(s[end]))) ++end;
        const std::string tok = s.substr(pos, end - pos);
        errno = 0;
        char* stop = nullptr;
        const long long v = std::strtoll(tok.c_str(), &stop, 10);
        if (tok.empty() || *stop != '\0' || errno == ERANGE || v < 0 || v > INT32_MAX)
            throw_error("detokenize", "'", tok, "' is not a token id (expected non-negative integers separated by "
                        "commas or spaces)");
        ids.push_back(static_cast<int32_t>(v));
        pos = end;
    }
    return ids;
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
    std::string model, text, file;
    bool have_text = false, have_file = false;
    tokenizer::EncodeOptions opts;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            tokenize_usage(stdout);
            return 0;
        } else if (a == "-m" || a == "--model") {
            model = value_of(argc, argv, i, "tokenize");
        } else if (a == "-p" || a == "--prompt") {
            text = value_of(argc, argv, i, "tokenize");
            have_text = true;
        } else if (a == "-f" || a == "--file") {
            file = value_of(argc, argv, i, "tokenize");
            have_file = true;
        } else if (a == "--no-bos") {
            opts.add_bos = false;
            opts.add_eos = false;
        } else if (a == "--parse-special") {
            opts.parse_special = true;
        } else {
            std::fprintf(stderr, "moe tokenize: unknown option '%s'\n", a.c_str());
            tokenize_usage(stderr);
            return 2;
        }
    }
    if (model.empty() || have_text == have_file) {
        std::fprintf(stderr, "moe tokenize: need -m MODEL and exactly one of -p TEXT / -f FILE\n");
        tokenize_usage(stderr);
        return 2;
    }
    if (have_file) text = read_all(file);
    const auto gguf = gguf::File::open(model);
    const auto tok = tokenizer::Tokenizer::from_gguf(gguf);
    const std::vector<int32_t> ids = tok.encode(text, opts);
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(ids[i]);
    }
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

int cmd_detokenize(int argc, char** argv) {
    std::string model, ids_text;
    bool have_ids = false;
    tokenizer::DecodeOptions opts;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            detokenize_usage(stdout);
            return 0;
        } else if (a == "-m" || a == "--model") {
            model = value_of(argc, argv, i, "detokenize");
        } else if (a == "--ids") {
            ids_text = value_of(argc, argv, i, "detokenize");
            have_ids = true;
        } else if (a == "--special") {
            opts.render_special = true;
        } else if (a == "--clean-spaces") {
            opts.clean_spaces = true;
        } else {
            std::fprintf(stderr, "moe detokenize: unknown option '%s'\n", a.c_str());
            detokenize_usage(stderr);
            return 2;
        }
    }
    if (model.empty()) {
        std::fprintf(stderr, "moe detokenize: need -m MODEL\n");
        detokenize_usage(stderr);
        return 2;
    }
    if (!have_ids) ids_text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    const std::vector<int32_t> ids = parse_ids(ids_text);
    const auto gguf = gguf::File::open(model);
    const auto tok = tokenizer::Tokenizer::from_gguf(gguf);
    const std::string text = tok.decode(ids, opts);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

}  // namespace moe::tools
