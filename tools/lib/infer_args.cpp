#include "tools/lib/infer_args.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "model/gen.h"

namespace moe::tools {

const char* arg_value(int argc, char** argv, int& i, const char* cmd) {
    if (i + 1 >= argc) throw_error(cmd, "option ", argv[i], " needs a value (see moe ", cmd, " --help)");
    return argv[++i];
}

int64_t parse_int(const std::string& s, const char* option, const char* cmd, int64_t min, int64_t max) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno == ERANGE || v < min || v > max)
        throw_error(cmd, "option ", option, " needs an integer in [", min, ", ", max, "], got '", s, "'");
    return v;
}

double parse_double(const std::string& s, const char* option, const char* cmd) {
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || errno == ERANGE) throw_error(cmd, "option ", option, " needs a number, got '", s, "'");
    return v;
}

std::vector<int32_t> parse_token_list(const std::string& s, const char* cmd) {
    std::vector<int32_t> ids;
    size_t pos = 0;
    auto sep = [](char c) { return c == ',' || std::isspace(static_cast<unsigned char>(c)); };
    while (pos < s.size()) {
        if (sep(s[pos])) {
            ++pos;
            continue;
        }
        size_t end = pos;
        while (end < s.size() && !sep(s[end])) ++end;
        const std::string tok = s.substr(pos, end - pos);
        errno = 0;
        char* stop = nullptr;
        const long long v = std::strtoll(tok.c_str(), &stop, 10);
        if (*stop != '\0' || errno == ERANGE || v < 0 || v > INT32_MAX)
            throw_error(cmd, "'", tok, "' in --tokens is not a token id (expected non-negative integers separated "
                        "by commas)");
        ids.push_back(static_cast<int32_t>(v));
        pos = end;
    }
    return ids;
}

DType parse_kv_type(const std::string& s, const char* cmd) {
    if (s == "f32") return DType::F32;
    if (s == "f16") return DType::F16;
    throw_error(cmd, "--kv-type '", s, "' is not supported (supported: f32, f16)");
}

std::string read_file(const std::string& path, const char* cmd) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw_error(cmd, "cannot open ", path, ": ", std::strerror(errno));
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string trained_default_model_path() {
#ifdef MOE_DEFAULT_MODEL
    return MOE_DEFAULT_MODEL;
#else
    return "models/shakespeare-moe.gguf";
#endif
}

std::string default_model(bool& generated, std::string* what) {
    namespace fs = std::filesystem;
    if (const std::string trained = trained_default_model_path(); fs::exists(trained)) {
        generated = false;
        if (what) *what = "Shakespeare MoE trained with moe train, see docs/TRAINING.md";
        return trained;
    }
    if (what) *what = std::string(kDefaultPreset) + " preset, random weights; the trained model is missing";
    fs::path dir;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = fs::path(x) / "moe-engine";
    else if (const char* h = std::getenv("HOME"); h && *h) dir = fs::path(h) / ".cache" / "moe-engine";
    else dir = fs::temp_directory_path() / "moe-engine-cache";
    const fs::path path = dir / (std::string("default-") + kDefaultPreset + ".gguf");
    generated = false;
    if (fs::exists(path)) return path.string();
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw_error("run", "cannot create the model cache folder ", dir.string(), ": ", ec.message());
    // Write under a temporary name, then rename, so a concurrent or interrupted run never sees a
    // half-written file.
    const fs::path tmp = dir / (path.filename().string() + ".tmp" + std::to_string(::getpid()));
    model::GenSpec g;
    g.preset = kDefaultPreset;
    g.seed = 1;
    g.output = tmp.string();
    model::generate(g);
    fs::rename(tmp, path, ec);
    if (ec) throw_error("run", "cannot move ", tmp.string(), " to ", path.string(), ": ", ec.message());
    generated = true;
    return path.string();
}

}  // namespace moe::tools
