#pragma once
// 2 MiB pages for the weights. Decode streams every active weight once per token; with 4 KiB
// pages each 4 KiB costs a TLB entry, and in a VM a miss walks two page tables. Measured on this
// project's 2-core VMs (docs/PERFORMANCE.md, "2 MiB pages"): a 2-thread streaming read goes from
// 25-38 GB/s on 4 KiB pages to 32-55 GB/s on 2 MiB pages. Transparent huge pages are usually in
// `madvise` mode, so the engine asks for them on the ranges that hold weights:
// - the GGUF file mapping (gguf::File::open): a page-cache fault in a MADV_HUGEPAGE range reads a
//   2 MiB folio and maps it with one PMD, where the file system has large folios (ext4, xfs on
//   recent kernels). Pages already cached as 4 KiB folios stay 4 KiB until they leave the cache.
// - anonymous weight copies (--repack-experts panels, the expert cache's slots): huge_alloc.
// Advice only: the bytes are the same either way; MOE_HUGEPAGES=0 turns the advice off.
#include <cstddef>
#include <cstdint>
#include <string>

namespace moe {

inline constexpr size_t kHugePage = size_t{2} << 20;

// False when MOE_HUGEPAGES=0 (read on each call: no global state).
bool huge_pages_wanted();

// madvise(MADV_HUGEPAGE) on [p, p + n) when wanted; false when not wanted or refused.
bool advise_huge(void* p, size_t n);

// n bytes (rounded up to 2 MiB), 2 MiB-aligned, advised huge; release with std::free.
// Returns nullptr when out of memory.
void* huge_alloc(size_t n);

// How much of [p, p + n) this process has resident, and on 2 MiB mappings, from /proc/self/smaps
// (whole mappings that overlap the range are counted, so pass a mapping's own range).
struct HugeCoverage {
    uint64_t rss = 0;     // resident bytes
    uint64_t huge = 0;    // of which mapped by 2 MiB entries (AnonHugePages + FilePmdMapped)
    bool advised = false; // every overlapping mapping carries MADV_HUGEPAGE ("hg" in VmFlags)
    bool known = false;   // smaps was readable and a mapping overlapped
};
HugeCoverage huge_coverage(const void* p, size_t n);
// The same over the whole process's anonymous memory (smaps_rollup: Rss, AnonHugePages).
HugeCoverage huge_coverage_anon();

// The kernel's THP mode, "always" / "madvise" / "never", or "unknown".
std::string thp_mode();

}  // namespace moe
