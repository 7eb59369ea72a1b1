// `moe gen PRESET -o OUT.gguf`: writes a random-weight MoE model (src/model/gen.h) that loads in
// llama.cpp unchanged.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "model/gen.h"
#include "model/param_count.h"
#include "model/presets.h"
#include "tools/lib/commands.h"

namespace moe::tools {
namespace {

void gen_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe gen PRESET -o OUT.gguf [--layers N] [--type f32|f16|bf16|q8_0|mxfp4] [--vocab FILE]\n"
                 "               [--seed S] [--threads N]\n"
                 "       moe gen --list\n"
                 "  Writes a random-weight model of PRESET as GGUF (tensor names, shapes and metadata as\n"
                 "  llama.cpp expects them). Same seed -> same bytes.\n"
                 "  -o FILE        output path\n"
                 "  --layers N     only N blocks (default: the preset's)\n"
                 "  --type T       weight type: f32 (default), f16, bf16, q8_0 (norms/routers stay f32); mxfp4:\n"
                 "                 expert stacks MXFP4, other matrices q8_0 (llama-quantize MXFP4_MOE)\n"
                 "  --vocab FILE   copy the tokenizer from a GGUF vocab file (n_vocab follows it);\n"
                 "                 default: built-in 320-token byte-level BPE vocab (padded for real presets)\n"
                 "  --seed S       random seed (default 0)\n"
                 "  --threads N    generator threads (default: all cores)\n"
                 "  --list         list the presets\n");
}

const char* value_of(int argc, char** argv, int& i) {
    if (i + 1 >= argc) throw_error("gen", "option ", argv[i], " needs a value (see moe gen --help)");
    return argv[++i];
}

int64_t parse_int(const char* s, const char* opt) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s, &end, 10);
    if (errno || end == s || *end) throw_error("gen", opt, " expects an integer, got '", s, "'");
    return v;
}

std::string human_bytes(double b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) b /= 1024, ++u;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f %s", b, units[u]);
    return buf;
}

std::string human_params(uint64_t n) {
    char buf[32];
    if (n >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.3fB", n / 1e9);
    else if (n >= 1000000ull) std::snprintf(buf, sizeof buf, "%.3fM", n / 1e6);
    else std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
    return buf;
}

void list_presets() {
    std::printf("%-20s %-9s %6s %10s %10s  %s\n", "preset", "arch", "layers", "total", "active", "description");
    for (const auto& p : model::presets()) {
        const auto counts = model::count_params(model::describe_catalog(model::tensor_catalog(p.config), DType::F32), p.config);
        std::printf("%-20s %-9s %6lld %10s %10s  %s\n", p.name.c_str(), p.config.arch.c_str(),
                    static_cast<long long>(p.config.n_layer), human_params(counts.total).c_str(),
                    human_params(counts.active).c_str(), p.description.c_str());
    }
}

}  // namespace

int cmd_gen(int argc, char** argv) {
    model::GenSpec spec;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            gen_usage(stdout);
            return 0;
        } else if (a == "--list") {
            list_presets();
            return 0;
        } else if (a == "-o" || a == "--output") {
            spec.output = value_of(argc, argv, i);
        } else if (a == "--layers") {
            spec.layers = parse_int(value_of(argc, argv, i), "--layers");
            if (spec.layers <= 0) throw_error("gen", "--layers must be >= 1 (got ", spec.layers, ")");
        } else if (a == "--type") {
            const std::string t = value_of(argc, argv, i);
            const auto dt = dtype_from_name(t);
            if (!dt || (*dt != DType::F32 && *dt != DType::F16 && *dt != DType::BF16 && *dt != DType::Q8_0 &&
                        *dt != DType::MXFP4))
                throw_error("gen", "--type '", t, "' is not supported (use f32, f16, bf16, q8_0 or mxfp4)");
            spec.type = *dt;
        } else if (a == "--vocab") {
            spec.vocab_file = value_of(argc, argv, i);
        } else if (a == "--seed") {
            const char* s = value_of(argc, argv, i);
            errno = 0;
            char* end = nullptr;
            spec.seed = std::strtoull(s, &end, 10);
            if (errno || end == s || *end || s[0] == '-') throw_error("gen", "--seed expects a non-negative integer, got '", s, "'");
        } else if (a == "--threads") {
            spec.threads = static_cast<int>(parse_int(value_of(argc, argv, i), "--threads"));
        } else if (!a.empty() && a[0] == '-') {
            throw_error("gen", "unknown option '", a, "' (see moe gen --help)");
        } else if (spec.preset.empty()) {
            spec.preset = a;
        } else {
            throw_error("gen", "unexpected argument '", a, "' (one preset only; see moe gen --help)");
        }
    }
    if (spec.preset.empty()) {
        gen_usage(stderr);
        return 1;
    }
    if (spec.output.empty()) throw_error("gen", "no output file (use -o OUT.gguf)");

    const model::ModelConfig cfg = model::gen_config(spec);
    const auto counts = model::count_params(model::describe_catalog(model::tensor_catalog(cfg), spec.type), cfg);
    // Progress bar on stderr when it is a terminal or the file is large (> 100 MB).
    const bool tty = isatty(STDERR_FILENO);
    const bool show = tty || counts.resident_bytes > 100'000'000ull;
    const auto t0 = std::chrono::steady_clock::now();
    int last_pct = -1;
    if (show) {
        spec.progress = [&](uint64_t done, uint64_t total) {
            const int pct = total ? static_cast<int>(done * 100 / total) : 100;
            // A terminal gets a bar redrawn every percent; a log gets one line every 10%.
            if (pct == last_pct || (!tty && pct / 10 == last_pct / 10)) return;
            last_pct = pct;
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const int width = 40, fill = pct * width / 100;
            std::fprintf(stderr, "%s[%.*s%*s] %3d%%  %s / %s  %.0f MB/s %s", tty ? "\r" : "", fill, "========================================",
                         width - fill, "", pct, human_bytes(static_cast<double>(done)).c_str(),
                         human_bytes(static_cast<double>(total)).c_str(), secs > 0 ? done / secs / 1e6 : 0.0, tty ? "" : "\n");
            std::fflush(stderr);
        };
    }
    const model::GenResult r = model::generate(spec);
    if (show && tty) std::fprintf(stderr, "\n");
    std::printf("wrote %s: %s (%s), %lld layers, %llu tensors, %s params (%s active), %s of weights as %s\n",
                spec.output.c_str(), spec.preset.c_str(), r.config.arch.c_str(), static_cast<long long>(r.config.n_layer),
                static_cast<unsigned long long>(r.n_tensors), human_params(r.n_params).c_str(),
                human_params(counts.active).c_str(),
                human_bytes(static_cast<double>(r.data_bytes)).c_str(), dtype_name(spec.type));
    return 0;
}

}  // namespace moe::tools
