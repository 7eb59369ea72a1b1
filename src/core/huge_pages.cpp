#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace moe {

bool huge_pages_wanted() {
    const char* v = std::getenv("MOE_HUGEPAGES");
    return !(v && std::strcmp(v, "0") == 0);
}

bool advise_huge(void* p, size_t n) {
#ifdef MADV_HUGEPAGE
    if (!huge_pages_wanted() || !p || n == 0) return false;
    // madvise wants a page-aligned start; widen to the enclosing 4 KiB pages.
    const auto a = reinterpret_cast<uintptr_t>(p), lo = a & ~uintptr_t{4095};
    return ::madvise(reinterpret_cast<void*>(lo), n + (a - lo), MADV_HUGEPAGE) == 0;
#else
    (void)p;
    (void)n;
    return false;
#endif
}

void* huge_alloc(size_t n) {
    const size_t bytes = (n + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, bytes == 0 ? kHugePage : bytes);
    if (p) advise_huge(p, bytes);  // before the first touch: faults then take 2 MiB pages
    return p;
}

namespace {
uint64_t kib_field(const std::string& line) {
    const auto c = line.find(':');
    return c == std::string::npos ? 0 : std::strtoull(line.c_str() + c + 1, nullptr, 10) * 1024;
}
}  // namespace

HugeCoverage huge_coverage(const void* p, size_t n) {
    HugeCoverage c;
    std::ifstream f("/proc/self/smaps");
    if (!f || !p || n == 0) return c;
    const auto lo = reinterpret_cast<uintptr_t>(p), hi = lo + n;
    bool in = false, all_hg = true;
    std::string line;
    while (std::getline(f, line)) {
        // A mapping header: "start-end perms offset dev inode [path]" (hex addresses, a '-' between).
        const auto dash = line.find('-');
        const auto sp = line.find(' ');
        if (dash != std::string::npos && sp != std::string::npos && dash < sp && line.find(':') > sp) {
            const uintptr_t s = std::strtoull(line.substr(0, dash).c_str(), nullptr, 16);
            const uintptr_t e = std::strtoull(line.substr(dash + 1, sp - dash - 1).c_str(), nullptr, 16);
            in = s < hi && e > lo;
            if (in) c.known = true;
            continue;
        }
        if (!in) continue;
        if (line.rfind("Rss:", 0) == 0) c.rss += kib_field(line);
        else if (line.rfind("AnonHugePages:", 0) == 0 || line.rfind("FilePmdMapped:", 0) == 0) c.huge += kib_field(line);
        else if (line.rfind("VmFlags:", 0) == 0) {
            std::istringstream fl(line.substr(8));
            std::string flag;
            bool hg = false;
            while (fl >> flag) hg = hg || flag == "hg";
            all_hg = all_hg && hg;
        }
    }
    c.advised = c.known && all_hg;
    return c;
}

HugeCoverage huge_coverage_anon() {
    HugeCoverage c;
    std::ifstream f("/proc/self/smaps_rollup");
    std::string line;
    while (f && std::getline(f, line)) {
        if (line.rfind("Anonymous:", 0) == 0) c.rss = kib_field(line), c.known = true;
        else if (line.rfind("AnonHugePages:", 0) == 0) c.huge = kib_field(line);
    }
    return c;
}

std::string thp_mode() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string s;
    if (!f || !std::getline(f, s)) return "unknown";
    const auto a = s.find('['), b = s.find(']');
    return a == std::string::npos || b == std::string::npos || b < a ? "unknown" : s.substr(a + 1, b - a - 1);
}

}  // namespace moe
