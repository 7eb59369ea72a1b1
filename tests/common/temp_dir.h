#pragma once
// One scratch folder per test binary, <tmp>/moe-test-<tag>-<pid>: made on the first call, removed
// with everything in it when the binary's tests end (a gtest Environment registered at start-up,
// so the removal also runs when no test asked for the folder). tests/ is an include directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace moe::testutil {

namespace detail {
inline std::filesystem::path& binary_temp_dir_made() {
    static std::filesystem::path made;  // empty until binary_temp_dir() made it
    return made;
}
struct RemoveBinaryTempDir : ::testing::Environment {
    void TearDown() override {
        if (!binary_temp_dir_made().empty()) std::filesystem::remove_all(binary_temp_dir_made());
    }
};
inline ::testing::Environment* const g_remove_binary_temp_dir =
    ::testing::AddGlobalTestEnvironment(new RemoveBinaryTempDir);
}  // namespace detail

// The binary's folder; `tag` names it (the first call's tag counts: use one per binary).
inline const std::filesystem::path& binary_temp_dir(const std::string& tag) {
    static const std::filesystem::path dir = [&] {
        std::filesystem::path d = std::filesystem::temp_directory_path() / ("moe-test-" + tag + "-" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        detail::binary_temp_dir_made() = d;
        return d;
    }();
    return dir;
}

}  // namespace moe::testutil
