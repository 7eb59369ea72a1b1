#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>

#include "core/error.h"

namespace moe {

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n_threads_ = n_threads;
    workers_.reserve(static_cast<size_t>(n_threads - 1));
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_start_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int, int)>* job;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            job = job_;
        }
        (*job)(index, n_threads_);
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (--pending_ == 0) cv_done_.notify_one();
        }
    }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
    if (n_threads_ == 1) {
        fn(0, 1);
        return;
    }
    // Exceptions must not escape a worker: capture the first and rethrow on the caller.
    std::exception_ptr error;
    std::mutex error_mu;
    std::function<void(int, int)> guarded = [&](int i, int n) {
        try {
            fn(i, n);
        } catch (...) {
            std::lock_guard<std::mutex> lock(error_mu);
            if (!error) error = std::current_exception();
        }
    };
    {
        std::lock_guard<std::mutex> lock(mu_);
        job_ = &guarded;
        pending_ = n_threads_ - 1;
        ++generation_;
    }
    cv_start_.notify_all();
    guarded(0, n_threads_);
    {
        std::unique_lock<std::mutex> lock(mu_);
        cv_done_.wait(lock, [&] { return pending_ == 0; });
        job_ = nullptr;
    }
    if (error) std::rethrow_exception(error);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    const int64_t n_chunks = (n + grain - 1) / grain;
    if (n_threads_ == 1 || n_chunks == 1) {
        fn(0, n, 0);
        return;
    }
    std::atomic<int64_t> next{0};
    run([&](int tid, int) {
        for (;;) {
            const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
            if (c >= n_chunks) break;
            const int64_t b = c * grain;
            fn(b, std::min(n, b + grain), tid);
        }
    });
}

}  // namespace moe
