#include "fuzz/fuzz_test_util.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace moe::testutil {

std::filesystem::path fuzz_dir() { return std::filesystem::path(MOE_TEST_DATA_DIR) / ".." / ".." / "fuzz"; }

std::vector<FuzzInput> fuzz_inputs(const std::string& target) {
    std::vector<FuzzInput> out;
    for (const char* kind : {"corpus", "regressions"}) {
        const auto dir = fuzz_dir() / kind / target;
        if (!std::filesystem::is_directory(dir)) continue;
        for (const auto& e : std::filesystem::directory_iterator(dir)) {
            if (!e.is_regular_file() || e.path().filename() == ".gitkeep") continue;
            std::ifstream in(e.path(), std::ios::binary);
            std::ostringstream ss;
            ss << in.rdbuf();
            out.push_back({e.path(), ss.str()});
        }
    }
    std::sort(out.begin(), out.end(), [](const FuzzInput& a, const FuzzInput& b) { return a.path < b.path; });
    return out;
}

}  // namespace moe::testutil
