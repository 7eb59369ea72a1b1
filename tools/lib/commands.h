#pragma once
// Registry of `moe` subcommands. Each subcommand lives in tools/lib/cmd_<name>.cpp and registers
// itself in commands.cpp's table.
#include <cstdio>
#include <string>

namespace moe::tools {

struct Command {
    const char* name;
    const char* summary;
    int (*run)(int argc, char** argv);  // argv[0] is the subcommand name
};

const Command* find_command(const std::string& name);
void print_usage(std::FILE* out);

// Subcommand entry points.
int cmd_version(int argc, char** argv);
int cmd_gen(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_bench_moe(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_train(int argc, char** argv);
int cmd_cache_sim(int argc, char** argv);
int cmd_place(int argc, char** argv);
int cmd_sim_ep(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_bench_serve(int argc, char** argv);

}  // namespace moe::tools
