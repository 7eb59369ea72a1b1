// The expert cache does not allocate on the decode path: acquire (hits, misses, evictions),
// wait_ready, prefetch and release reuse buffers sized at construction. This binary replaces the
// global operator new to count allocations made by this thread while counting is on.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <random>
#include <vector>

#include "moe/expert_cache.h"

// The replacements below are malloc/free based; GCC 12 inlines them into new/delete pairs and then
// flags the free() inside as mismatched (a false positive for a replaced operator delete).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
thread_local bool t_counting = false;
thread_local long t_allocs = 0;
}  // namespace

void* operator new(std::size_t n) {
    if (t_counting) ++t_allocs;
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace moe;
namespace fs = std::filesystem;

namespace {

TEST(ExpertCacheAlloc, NoAllocationOnHitsMissesEvictionsAndPrefetch) {
    const fs::path p = fs::temp_directory_path() / ("moe-test-cache-alloc-" + std::to_string(::getpid()) + ".bin");
    const int L = 3, E = 8;
    const uint64_t stride[3] = {3001, 3001, 2003};
    std::vector<ExpertLayerFile> layers(L);
    uint64_t off = 100;
    for (int l = 0; l < L; ++l) {
        layers[static_cast<size_t>(l)].layer = l;
        for (int c = 0; c < 3; ++c) {
            layers[static_cast<size_t>(l)].offset[c] = off;
            layers[static_cast<size_t>(l)].stride[c] = stride[c];
            off += E * stride[c];
        }
    }
    {
        std::vector<char> b(off + 64, 7);
        std::FILE* f = std::fopen(p.c_str(), "wb");
        ASSERT_TRUE(f);
        std::fwrite(b.data(), 1, b.size(), f);
        std::fclose(f);
    }
    std::mt19937 g(std::random_device{}());
    for (ExpertIo io : {ExpertIo::Uring, ExpertIo::Pread})
        for (const char* policy : {"lru", "lfu", "lfu-history"}) {
            ExpertCacheSpec spec;
            spec.path = p.string();
            spec.n_layer = L;
            spec.n_expert = E;
            spec.layers = layers;
            spec.n_slots = 7;
            spec.policy = policy;
            spec.io = io;
            ExpertCache cache(spec);
            ExpertSlices out[3];
            uint8_t ready[3];
            auto step = [&](int layer) {
                int32_t ids[3];
                for (int i = 0; i < 3;) {  // 3 distinct experts
                    ids[i] = static_cast<int32_t>(g() % E);
                    bool dup = false;
                    for (int j = 0; j < i; ++j) dup |= ids[j] == ids[i];
                    if (!dup) ++i;
                }
                cache.acquire_async(layer, ids, 3, out);
                const int32_t next[2] = {static_cast<int32_t>(g() % E), static_cast<int32_t>((g() % (E - 1) + 1 + ids[0]) % E)};
                cache.prefetch((layer + 1) % L, next, next[0] == next[1] ? 1 : 2);
                std::fill(ready, ready + 3, 0);
                while (cache.wait_ready(ready, 3) > 0) {
                }
                cache.release(layer);
            };
            for (int t = 0; t < 4; ++t) step(t % L);  // first use
            t_allocs = 0;
            t_counting = true;
            for (int t = 0; t < 300; ++t) step(t % L);
            t_counting = false;
            const ExpertCacheCounters c = cache.total();
            EXPECT_EQ(t_allocs, 0) << expert_io_name(io) << " " << policy;
            EXPECT_GT(c.misses, 100) << policy;  // the loop did miss and evict
            EXPECT_GT(c.evictions, 100) << policy;
            EXPECT_GT(c.hits, 0) << policy;
        }
    fs::remove(p);
}

}  // namespace
