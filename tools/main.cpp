// `moe` command line: dispatches to one file per subcommand (tools/cmd_*.cpp).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "core/error.h"
#include "tools/lib/commands.h"

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
        moe::tools::print_usage(stdout);
        return argc < 2 ? 1 : 0;
    }
    const std::string name = argv[1];
    const moe::tools::Command* cmd = moe::tools::find_command(name);
    if (!cmd) {
        std::fprintf(stderr, "moe: unknown command '%s' (run 'moe help' for the list)\n", name.c_str());
        return 2;
    }
    try {
        return cmd->run(argc - 1, argv + 1);
    } catch (const moe::Error& e) {
        std::fprintf(stderr, "moe %s: error: %s\n", name.c_str(), e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "moe %s: error: %s\n", name.c_str(), e.what());
        return 1;
    }
}
