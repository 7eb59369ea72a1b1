// Replays every checked-in fuzz input (fuzz/corpus/<target>/ seeds, fuzz/regressions/<target>/
// crash inputs once fixed) through the same entry function libFuzzer drives, here built by GCC in
// the normal build (and under ASan+UBSan in the portable one). An entry aborts on a broken
// property and lets any exception other than moe::Error escape, so a reintroduced bug fails here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fuzz/fuzz_target.h"
#include "fuzz/fuzz_test_util.h"

namespace {

using moe::fuzz::kTargets;

TEST(FuzzReplay, EveryTargetHasASeedCorpus) {
    for (const auto& t : kTargets) {
        SCOPED_TRACE(t.name);
        const auto dir = moe::testutil::fuzz_dir() / "corpus" / t.name;
        ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
        size_t n = 0;
        for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.is_regular_file();
        EXPECT_GE(n, 2u) << "seed corpus " << dir << " has fewer than 2 files";
    }
}

TEST(FuzzReplay, CorporaAndRegressions) {
    const bool verbose = std::getenv("MOE_FUZZ_REPLAY_VERBOSE") != nullptr;
    size_t total = 0;
    for (const auto& t : kTargets) {
        const auto inputs = moe::testutil::fuzz_inputs(t.name);
        for (const auto& in : inputs) {
            SCOPED_TRACE(in.path.string());
            // An entry that aborts takes the process with it: name the input first when asked.
            if (verbose) std::fprintf(stderr, "replaying %s\n", in.path.c_str());
            EXPECT_NO_THROW(t.fn(reinterpret_cast<const uint8_t*>(in.bytes.data()), in.bytes.size()));
        }
        total += inputs.size();
    }
    std::printf("replayed %zu fuzz inputs over %zu targets\n", total, std::size(kTargets));
    EXPECT_GT(total, 0u);
}

// Edge inputs every target must take: empty, one byte of each value, and all 256 bytes.
TEST(FuzzReplay, EdgeInputs) {
    std::string all;
    for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
    for (const auto& t : kTargets) {
        SCOPED_TRACE(t.name);
        EXPECT_NO_THROW(t.fn(nullptr, 0));
        for (int b = 0; b < 256; ++b) {
            const uint8_t one = static_cast<uint8_t>(b);
            EXPECT_NO_THROW(t.fn(&one, 1));
        }
        EXPECT_NO_THROW(t.fn(reinterpret_cast<const uint8_t*>(all.data()), all.size()));
    }
}

}  // namespace
