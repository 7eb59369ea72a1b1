#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
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
