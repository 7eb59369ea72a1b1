#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

using namespace moe;

TEST(ThreadPool, RunsEveryThreadOnce) {
    for (int n : {1, 2, 3, 8}) {
        ThreadPool pool(n);
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        for (int rep = 0; rep < 50; ++rep)
            pool.run([&](int tid, int nt) {
                ASSERT_EQ(nt, n);
                hits[static_cast<size_t>(tid)]++;
            });
        for (auto& h : hits) EXPECT_EQ(h.load(), 50);
    }
}

TEST(ThreadPool, ParallelForCoversRangeExactlyOnce) {
    ThreadPool pool(4);
    for (int64_t n : {0, 1, 7, 64, 1000, 4097}) {
        for (int64_t grain : {1, 3, 64, 5000}) {
            std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
            pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int tid) {
                EXPECT_GE(tid, 0);
                EXPECT_LT(tid, 4);
                EXPECT_LE(e - b, grain);
                for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)]++;
            });
            for (auto& s : seen) ASSERT_EQ(s.load(), 1);
        }
    }
}

// guided_for: every item once; chunk starts aligned within their segment, sizes within
// [min_chunk, max_chunk] except a segment's last, no chunk across a cut, chunks shrinking towards
// the end, and the same boundaries on every run (they follow from the spec, not from timing).
TEST(ThreadPool, GuidedForCoversRangeInShrinkingAlignedChunks) {
    std::mt19937 rng(20261205);
    for (int threads : {1, 2, 3, 4}) {
        ThreadPool pool(threads);
        for (int trial = 0; trial < 40; ++trial) {
            const int64_t align = std::vector<int64_t>{1, 4, 16}[rng() % 3];
            ThreadPool::GuidedSpec g;
            g.n = static_cast<int64_t>(rng() % 5000);
            g.align = align;
            g.min_chunk = static_cast<int64_t>(1 + rng() % 100);
            g.max_chunk = rng() % 2 ? 0 : static_cast<int64_t>(100 + rng() % 1000);
            std::vector<int64_t> cuts;  // segment starts, multiples of align
            for (int i = static_cast<int>(rng() % 4); i > 0; --i)
                if (g.n > align) cuts.push_back(1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(g.n - 1)) / align * align);
            std::sort(cuts.begin(), cuts.end());
            cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
            cuts.erase(std::remove(cuts.begin(), cuts.end(), int64_t{0}), cuts.end());
            g.cuts = cuts.data();
            g.n_cuts = static_cast<int>(cuts.size());
            const int64_t min_c = (g.min_chunk + align - 1) / align * align;
            const int64_t max_c = g.max_chunk > 0 ? std::max(min_c, g.max_chunk / align * align) : g.n;
            std::map<int64_t, int64_t> first_run;
            for (int rep = 0; rep < 2; ++rep) {
                std::vector<std::atomic<int>> seen(static_cast<size_t>(g.n));
                std::mutex mu;
                std::map<int64_t, int64_t> chunks;  // begin -> end
                pool.guided_for(g, [&](int64_t b, int64_t e, int tid) {
                    ASSERT_GE(tid, 0);
                    ASSERT_LT(tid, threads);
                    ASSERT_LT(b, e);
                    for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)]++;
                    std::lock_guard<std::mutex> l(mu);
                    chunks[b] = e;
                });
                for (auto& s : seen) ASSERT_EQ(s.load(), 1);
                int64_t prev = -1;
                for (const auto& [b, e] : chunks) {
                    int64_t seg_start = 0, seg_end = g.n;
                    for (int64_t c : cuts) {
                        if (c <= b) seg_start = c;
                        else {
                            seg_end = c;
                            break;
                        }
                    }
                    EXPECT_LE(e, seg_end) << "chunk [" << b << ", " << e << ") crosses the cut at " << seg_end;
                    EXPECT_EQ((b - seg_start) % align, 0) << "chunk start " << b;
                    if (e < seg_end) {
                        EXPECT_GE(e - b, min_c);
                        EXPECT_LE(e - b, max_c);
                        EXPECT_EQ((e - b) % align, 0);
                    }
                    if (threads > 1 && prev >= 0 && e < seg_end && b > 0) {
                        EXPECT_LE(e - b, std::max(prev, min_c)) << "chunks grow";
                    }
                    prev = e == seg_end ? -1 : e - b;
                }
                if (rep == 0) first_run = chunks;
                else EXPECT_EQ(chunks, first_run) << "boundaries changed between runs";
            }
        }
    }
}

TEST(ThreadPool, GuidedForPropagatesExceptions) {
    ThreadPool pool(2);
    ThreadPool::GuidedSpec g;
    g.n = 1000;
    g.min_chunk = 10;
    EXPECT_THROW(pool.guided_for(g, [](int64_t b, int64_t, int) { if (b > 500) throw std::runtime_error("boom"); }),
                 std::runtime_error);
}

TEST(ThreadPool, UsesPersistentThreads) {
    ThreadPool pool(3);
    std::set<std::thread::id> ids1, ids2;
    std::mutex mu;
    pool.run([&](int, int) { std::lock_guard<std::mutex> l(mu); ids1.insert(std::this_thread::get_id()); });
    pool.run([&](int, int) { std::lock_guard<std::mutex> l(mu); ids2.insert(std::this_thread::get_id()); });
    EXPECT_EQ(ids1.size(), 3u);
    EXPECT_EQ(ids1, ids2);
}

TEST(ThreadPool, PropagatesExceptions) {
    ThreadPool pool(2);
    EXPECT_THROW(pool.run([](int tid, int) { if (tid == 1) throw std::runtime_error("boom"); }), std::runtime_error);
    // still usable afterwards
    std::atomic<int> n{0};
    pool.run([&](int, int) { n++; });
    EXPECT_EQ(n.load(), 2);
}
