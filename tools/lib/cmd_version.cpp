#include <cstdio>

#include "tools/lib/commands.h"

namespace moe::tools {

int cmd_version(int, char**) {
    std::printf("moe-engine %s (%s, %s)\n", MOE_VERSION, MOE_BUILD_FLAGS, __VERSION__);
    return 0;
}

}  // namespace moe::tools
