#pragma once
// Persistent worker pool: threads are created once and reused by every parallel region (no thread
// creation per call). The calling thread takes part as worker 0, so a pool of n runs n-1 threads.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace moe {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);  // n_threads >= 1 (0 or less = hardware concurrency)
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Runs fn(thread_index, n_threads) once on every thread and waits for all. Not reentrant.
    void run(const std::function<void(int, int)>& fn);

    // Splits [0, n) into contiguous chunks of at least `grain` items, handed out dynamically, and
    // calls fn(begin, end, thread_index). Chunk boundaries are fixed by n and grain (not by timing),
    // so results written per item are independent of scheduling.
    void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

private:
    void worker_loop(int index);

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable cv_start_;
    std::condition_variable cv_done_;
    const std::function<void(int, int)>* job_ = nullptr;
    uint64_t generation_ = 0;
    int pending_ = 0;
    bool stop_ = false;
};

}  // namespace moe
