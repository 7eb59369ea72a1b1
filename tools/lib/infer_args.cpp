#include "tools/lib/infer_args.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/mem_limit.h"
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
    if (s == "q8_0") return DType::Q8_0;  // approximate: kernels/ref/kv_q8.h, docs/KV.md
    throw_error(cmd, "--kv-type '", s, "' is not supported (supported: f32, f16, q8_0)");
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

uint64_t parse_mem(const std::string& s, const char* cmd) {
    if (s == "auto") {
        const MemLimit lim = process_memory_limit();
        const uint64_t b = auto_memory_budget(lim);
        if (b == 0) throw_error(cmd, "--mem auto: the memory limit (", lim.source, ") of ", lim.bytes, " bytes leaves no budget");
        std::fprintf(stderr, "moe %s: --mem auto: %.1f MiB (limit %.1f MiB from %s, minus a margin)\n", cmd,
                     static_cast<double>(b) / (1 << 20), static_cast<double>(lim.bytes) / (1 << 20), lim.source.c_str());
        return b;
    }
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    double mul = 1;
    std::string suf(end ? end : "");
    if (suf.size() == 2 && (suf[1] == 'B' || suf[1] == 'b' || suf[1] == 'i')) suf.pop_back();
    if (suf == "K" || suf == "k") mul = 1024.0;
    else if (suf == "M" || suf == "m") mul = 1024.0 * 1024;
    else if (suf == "G" || suf == "g") mul = 1024.0 * 1024 * 1024;
    else if (suf == "T" || suf == "t") mul = 1024.0 * 1024 * 1024 * 1024;
    else if (!suf.empty()) mul = -1;
    const double bytes = v * mul;
    if (s.empty() || end == s.c_str() || errno == ERANGE || mul < 0 || !(bytes >= 1) || bytes > 1e18)
        throw_error(cmd, "--mem '", s, "' is not a size: give bytes or a number with K, M, G or T (powers of 1024), ",
                    "e.g. --mem 4G, or --mem auto");
    return static_cast<uint64_t>(bytes);
}

bool parse_cache_option(int argc, char** argv, int& i, const char* cmd, model::ExpertCacheOptions& o) {
    const std::string a = argv[i];
    if (a == "--mem") {
        o.mem_budget = parse_mem(arg_value(argc, argv, i, cmd), cmd);
    } else if (a == "--cache-policy") {
        o.policy = arg_value(argc, argv, i, cmd);
    } else if (a == "--cache-profile") {
        o.profile = arg_value(argc, argv, i, cmd);
    } else if (a == "--expert-io") {
        const std::string v = arg_value(argc, argv, i, cmd);
        if (v == "uring") o.io = ExpertIo::Uring;
        else if (v == "pread") o.io = ExpertIo::Pread;
        else throw_error(cmd, "--expert-io '", v, "' is not one of uring, pread");
    } else if (a == "--no-direct") {
        o.direct = false;
    } else if (a == "--no-prefetch") {
        o.prefetch = false;
    } else if (a == "--repack-experts") {
        o.repack_experts = true;
    } else if (a == "--repack") {
        o.repack = true;
    } else if (a == "--no-repack") {
        o.repack = o.repack_experts = o.repack_auto = false;
    } else {
        return false;
    }
    return true;
}

model::ModelOptions cli_model_options() {
    model::ModelOptions mo;
    mo.cache.repack_auto = true;
    return mo;
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
