#pragma once
// Option parsing shared by the inference subcommands (run, eval, perplexity, bench) and the
// built-in default model. Every bad value is a moe::Error naming the option (the CLI prints one
// line and exits 1).
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/model.h"

namespace moe::tools {

// Value of option argv[i] (advances i).
const char* arg_value(int argc, char** argv, int& i, const char* cmd);
int64_t parse_int(const std::string& s, const char* option, const char* cmd, int64_t min, int64_t max);
double parse_double(const std::string& s, const char* option, const char* cmd);
// "1,2,3" (commas and/or whitespace) -> ids; every entry a non-negative 32-bit integer.
std::vector<int32_t> parse_token_list(const std::string& s, const char* cmd);
// "f32" | "f16"
DType parse_kv_type(const std::string& s, const char* cmd);
std::string read_file(const std::string& path, const char* cmd);

// --mem SIZE|auto: bytes with an optional K/M/G/T suffix (powers of 1024; "4G", "512M", "1.5G"),
// or auto (core/mem_limit.h; prints the limit it used to stderr). Result > 0.
uint64_t parse_mem(const std::string& s, const char* cmd);
// The expert-cache options of run/eval/perplexity/bench (--mem, --cache-policy, --cache-profile,
// --expert-io, --no-direct, --no-prefetch, --repack-experts, --repack, --no-repack); true when argv[i] was one of them (value consumed).
bool parse_cache_option(int argc, char** argv, int& i, const char* cmd, model::ExpertCacheOptions& o);
// The model options run/eval/perplexity/bench/serve start from: the library's defaults plus the
// CLI's repack default (ExpertCacheOptions::repack_auto; --no-repack, --repack, --repack-experts
// and --mem override it).
model::ModelOptions cli_model_options();
inline constexpr const char* kCacheUsage =
    "  --mem SIZE|auto  memory budget (K/M/G = powers of 1024): routed experts stream from the file\n"
    "                   into a cache of what is left after the resident part (docs/TIERING.md);\n"
    "                   auto = the cgroup memory limit (else MemAvailable) minus a margin\n"
    "  --cache-policy P expert cache policy: lru (default), lfu, lfu-history, pinned\n"
    "  --cache-profile F routing profile for pinned (moe run --routing-trace TSV or counts JSON)\n"
    "  --expert-io M    expert reads: uring (default, io_uring) or pread\n"
    "  --no-direct      buffered expert reads instead of O_DIRECT\n"
    "  --no-prefetch    no router-lookahead prefetch of the next layer's experts\n"
    "  --repack-experts repack the Q2_K / Q3_K / Q4_K / Q6_K / Q8_0 / Q4_0 / Q5_K / Q5_0 / MXFP4\n"
    "                   routed and shared experts at load into panels (16 rows column-interleaved,\n"
    "                   on 2 MiB pages) that decode and prefill read instead of the blocks, whose\n"
    "                   pages are released: same output, faster decode and prefill, load time; not\n"
    "                   with --mem (docs/PERFORMANCE.md)\n"
    "  --repack         --repack-experts plus the dense projections (attention, dense FFN) and the\n"
    "                   lm head of those types: all read as panels, their blocks released too.\n"
    "                   The default where no --mem is given and the file fits the memory limit\n"
    "                   (cgroup, else MemAvailable) with a margin\n"
    "  --no-repack      read the blocks in the file mapping (no load-time repack)\n";

// The built-in default model: the Shakespeare MoE trained by `moe train` and committed as
// models/shakespeare-moe.gguf (docs/TRAINING.md; its path is compiled in as MOE_DEFAULT_MODEL).
// Where that file is absent (a binary moved away from its source tree), preset kDefaultPreset
// generated (random weights, seed 1) on first use into $XDG_CACHE_HOME/moe-engine/ (else
// ~/.cache/moe-engine/, else /tmp/moe-engine-cache/).
inline constexpr const char* kDefaultPreset = "tiny-qwen3moe";
// Path of the default model, generating the fallback if needed; `generated` tells whether it was
// made now; `what` (optional) gets a short description for messages.
std::string default_model(bool& generated, std::string* what = nullptr);
// Path of the trained default model file (it may not exist).
std::string trained_default_model_path();

}  // namespace moe::tools
