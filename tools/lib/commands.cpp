#include "tools/lib/commands.h"

namespace moe::tools {
namespace {
const Command kCommands[] = {
    {"version", "print the version and how this build was configured", cmd_version},
    {"gen", "write a random-weight MoE model of a preset as GGUF (PRESET -o OUT.gguf)", cmd_gen},
    {"inspect", "architecture, tensors, parameter counts and memory plan of a GGUF or config.json", cmd_inspect},
    {"run", "generate text from a prompt (-m MODEL -p TEXT -n N; no -m: built-in demo model)", cmd_run},
    {"eval", "write the logits of a token list as float32 [n_tokens][n_vocab] (--tokens --logits-out)", cmd_eval},
    {"perplexity", "perplexity of a text file, llama.cpp's method (-m MODEL -f FILE --ctx N)", cmd_perplexity},
    {"bench", "prompt and generation tokens/s, llama-bench-style rows (-m MODEL -p 512 -n 128 -t 2)", cmd_bench},
    {"cache-sim", "expert-cache hit rates of policies vs Belady's optimum on a routing trace (--trace FILE)",
     cmd_cache_sim},
    {"tokenize", "print the token ids of a text (-m MODEL -p TEXT | -f FILE)", cmd_tokenize},
    {"detokenize", "print the text of token ids (-m MODEL --ids 1,2,3)", cmd_detokenize},
    {"train", "train a small MoE on a text file and write it as GGUF (--data TEXT --out MODEL.gguf)", cmd_train},
    {"serve", "OpenAI-compatible HTTP server with continuous batching (-m MODEL --port 8080 --parallel 4)", cmd_serve},
    {"bench-serve", "load generator for an OpenAI server: N streaming clients, tok/s, TTFT and ITL p50/p99", cmd_bench_serve},
    {"bench-moe", "time the MoE block alone over shapes (T,E,k,D,F): tokens/s, stage split, GFLOP/s, GB/s", cmd_bench_moe},
    {"place", "plan expert placement for --ep from loads (--counts JSON | --trace TSV) --ranks R [--nodes N] [--replicas K]", cmd_place},
    {"sim-ep", "simulate --ep all-to-all bytes/time per layer and token for a config on N nodes x G ranks", cmd_sim_ep},
};
}  // namespace

const Command* find_command(const std::string& name) {
    for (const auto& c : kCommands)
        if (name == c.name) return &c;
    return nullptr;
}

void print_usage(std::FILE* out) {
    std::fprintf(out, "usage: moe <command> [options]   (moe <command> --help for a command's options)\n\ncommands:\n");
    for (const auto& c : kCommands) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
}

}  // namespace moe::tools
