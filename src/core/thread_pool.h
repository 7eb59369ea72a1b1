#pragma once
// Persistent worker pool: threads are created once and reused by every parallel region (no thread
// creation per call). The calling thread takes part as worker 0, so a pool of n runs n-1 threads.
//
// Hand-off: a decode step makes ~100 short parallel regions, so waking a sleeping thread through
// the kernel (tens of microseconds on a VM) for each would cost several percent of a token. Idle
// workers and the waiting caller therefore spin on an atomic for a short while (kSpinIters pause
// loops, ~50-100 us) before they block on a condition variable; a region that follows within that
// window starts without a system call, and an idle pool still sleeps. Jobs are FnRefs (no
// allocation per region).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/fn_ref.h"

namespace moe {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);  // n_threads >= 1 (0 or less = hardware concurrency)
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Runs fn(thread_index, n_threads) once on every thread and waits for all. The first exception
    // thrown on any thread is rethrown here after all threads finished. Not reentrant.
    void run(FnRef<void(int, int)> fn);

    // Splits [0, n) into contiguous chunks of at least `grain` items, handed out dynamically, and
    // calls fn(begin, end, thread_index). Chunk boundaries are fixed by n and grain (not by timing),
    // so results written per item are independent of scheduling.
    void parallel_for(int64_t n, int64_t grain, FnRef<void(int64_t, int64_t, int)> fn);

    // Guided self-scheduling over [0, n): each claim takes (what is left) / n_threads items,
    // rounded down to a multiple of `align`, within [min_chunk, max_chunk], and never across a cut (an item
    // index where a new segment starts, e.g. the next matrix). So the first chunks are long (few
    // stream restarts) and the last ones short (the threads finish together). Each chunk follows
    // from the one before it, so the boundaries are fixed by the spec and the thread count, not by
    // timing; only which thread runs a chunk varies.
    struct GuidedSpec {
        int64_t n = 0;
        int64_t align = 1;      // chunk starts stay multiples of align when every cut is one
        int64_t min_chunk = 1;  // rounded up to a multiple of align; a segment's last chunk may be shorter
        int64_t max_chunk = 0;  // 0: none; else rounded down to a multiple of align (at least min_chunk)
        const int64_t* cuts = nullptr;  // ascending, in (0, n); n_cuts of them
        int n_cuts = 0;
    };
    void guided_for(const GuidedSpec& spec, FnRef<void(int64_t, int64_t, int)> fn);

    static constexpr int kSpinIters = 20000;
    // One pause of a spin-wait loop (the pool's own and those of jobs that wait on each other).
    static void relax();

private:
    void worker_loop(int index);
    void call(int index) noexcept;  // runs the current job on this thread, recording an exception

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex mu_;  // guards the sleeping side of both hand-offs and error_
    std::condition_variable cv_start_;
    std::condition_variable cv_done_;
    std::atomic<const FnRef<void(int, int)>*> job_{nullptr};
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    std::atomic<bool> stop_{false};
    std::exception_ptr error_;
};

}  // namespace moe
