// core/huge_pages.h: 2 MiB-page advice for weight memory. Whether the kernel hands out a 2 MiB
// page depends on fragmentation, so the tests assert what is deterministic: the alignment, the
// MADV_HUGEPAGE flag on the mapping ("hg" in smaps), MOE_HUGEPAGES=0 turning it off, the bytes,
// and the smaps accounting (resident >= what was touched, 2 MiB-mapped <= resident).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/huge_pages.h"
#include "core/rng.h"

namespace {

struct EnvGuard {  // restores MOE_HUGEPAGES
    std::string old;
    bool had;
    EnvGuard() : had(std::getenv("MOE_HUGEPAGES") != nullptr) {
        if (had) old = std::getenv("MOE_HUGEPAGES");
    }
    ~EnvGuard() {
        if (had) setenv("MOE_HUGEPAGES", old.c_str(), 1);
        else unsetenv("MOE_HUGEPAGES");
    }
};

bool kernel_has_thp() { return moe::thp_mode() != "unknown"; }

TEST(HugePages, AllocIsAlignedAdvisedAndHoldsItsBytes) {
    EnvGuard g;
    unsetenv("MOE_HUGEPAGES");
    ASSERT_TRUE(moe::huge_pages_wanted());
    const size_t n = (6 << 20) + 12345;  // not a multiple of 2 MiB: rounded up
    auto* p = static_cast<uint8_t*>(moe::huge_alloc(n));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % moe::kHugePage, 0u);
    moe::Rng rng(0x4a9e);
    std::vector<uint8_t> ref(n);
    for (auto& b : ref) b = static_cast<uint8_t>(rng.next());
    std::memcpy(p, ref.data(), n);
    EXPECT_EQ(0, std::memcmp(p, ref.data(), n));
    const moe::HugeCoverage c = moe::huge_coverage(p, n);
    ASSERT_TRUE(c.known) << "no /proc/self/smaps mapping for the allocation";
    EXPECT_GE(c.rss, n - 4096) << "every touched page is resident";
    EXPECT_LE(c.huge, c.rss);
    if (kernel_has_thp()) EXPECT_TRUE(c.advised) << "THP " << moe::thp_mode() << ": MADV_HUGEPAGE missing";
    else std::printf("[ info ] kernel without THP: advice not checked\n");
    std::printf("[ info ] THP %s: %llu of %llu resident bytes on 2 MiB pages\n", moe::thp_mode().c_str(),
                static_cast<unsigned long long>(c.huge), static_cast<unsigned long long>(c.rss));
    std::free(p);
}

TEST(HugePages, EnvZeroTurnsTheAdviceOff) {
    EnvGuard g;
    setenv("MOE_HUGEPAGES", "0", 1);
    EXPECT_FALSE(moe::huge_pages_wanted());
    auto* p = static_cast<uint8_t*>(moe::huge_alloc(4 << 20));
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x5a, 4 << 20);
    EXPECT_FALSE(moe::advise_huge(p, 4 << 20));
    const moe::HugeCoverage c = moe::huge_coverage(p, 4 << 20);
    ASSERT_TRUE(c.known);
    EXPECT_FALSE(c.advised);
    std::free(p);
    setenv("MOE_HUGEPAGES", "1", 1);
    EXPECT_TRUE(moe::huge_pages_wanted());
}

TEST(HugePages, CoverageOfNothingIsUnknown) {
    EXPECT_FALSE(moe::huge_coverage(nullptr, 100).known);
    int x = 0;
    EXPECT_FALSE(moe::huge_coverage(&x, 0).known);
    const moe::HugeCoverage a = moe::huge_coverage_anon();
    EXPECT_TRUE(a.known);
    EXPECT_LE(a.huge, a.rss);
}

}  // namespace
