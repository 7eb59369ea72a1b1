#include "core/thread_pool.h"

#include <algorithm>


#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MOE_CPU_RELAX() _mm_pause()
#else
#define MOE_CPU_RELAX() std::this_thread::yield()
#endif

namespace moe {

void ThreadPool::relax() { MOE_CPU_RELAX(); }

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n_threads_ = n_threads;
    workers_.reserve(static_cast<size_t>(n_threads - 1));
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_.store(true, std::memory_order_release);
    }
    cv_start_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::call(int index) noexcept {
    try {
        (*job_.load(std::memory_order_acquire))(index, n_threads_);
    } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
    }
}

void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        // Spin first (a new region usually follows within microseconds), then sleep. The
        // generation is bumped under mu_, so checking it under mu_ cannot miss a wake-up.
        bool go = false;
        for (int i = 0; i < kSpinIters && !go; ++i) {
            go = generation_.load(std::memory_order_acquire) != seen || stop_.load(std::memory_order_acquire);
            if (!go) MOE_CPU_RELAX();
        }
        if (!go) {
            std::unique_lock<std::mutex> lock(mu_);
            cv_start_.wait(lock, [&] {
                return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
            });
        }
        if (stop_.load(std::memory_order_acquire)) return;
        seen = generation_.load(std::memory_order_acquire);
        call(index);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard<std::mutex> lock(mu_);  // the caller may be about to sleep on cv_done_
            cv_done_.notify_one();
        }
    }
}

void ThreadPool::run(FnRef<void(int, int)> fn) {
    if (n_threads_ == 1) {
        fn(0, 1);
        return;
    }
    job_.store(&fn, std::memory_order_release);
    pending_.store(n_threads_ - 1, std::memory_order_release);
    {
        std::lock_guard<std::mutex> lock(mu_);
        generation_.fetch_add(1, std::memory_order_acq_rel);
    }
    cv_start_.notify_all();  // no system call when every worker is still spinning
    call(0);
    bool done = false;
    for (int i = 0; i < kSpinIters && !done; ++i) {
        done = pending_.load(std::memory_order_acquire) == 0;
        if (!done) MOE_CPU_RELAX();
    }
    if (!done) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    job_.store(nullptr, std::memory_order_relaxed);
    std::exception_ptr error;
    {
        std::lock_guard<std::mutex> lock(mu_);
        std::swap(error, error_);
    }
    if (error) std::rethrow_exception(error);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, FnRef<void(int64_t, int64_t, int)> fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    const int64_t n_chunks = (n + grain - 1) / grain;
    if (n_threads_ == 1 || n_chunks == 1) {
        fn(0, n, 0);
        return;
    }
    std::atomic<int64_t> next{0};
    auto body = [&](int tid, int) {
        for (;;) {
            const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
            if (c >= n_chunks) break;
            const int64_t b = c * grain;
            fn(b, std::min(n, b + grain), tid);
        }
    };
    run(body);
}

void ThreadPool::guided_for(const GuidedSpec& spec, FnRef<void(int64_t, int64_t, int)> fn) {
    const int64_t n = spec.n, align = std::max<int64_t>(1, spec.align);
    const int64_t min_chunk = (std::max<int64_t>(1, spec.min_chunk) + align - 1) / align * align;
    const int64_t max_chunk = spec.max_chunk > 0 ? std::max(min_chunk, spec.max_chunk / align * align) : n;
    if (n <= 0) return;
    // The end of the chunk that starts at c (the cut after c bounds it).
    auto chunk_end = [&](int64_t c) {
        int64_t seg_end = n;
        for (int i = 0; i < spec.n_cuts; ++i)
            if (spec.cuts[i] > c) {
                seg_end = spec.cuts[i];
                break;
            }
        const int64_t size = std::clamp((n - c) / n_threads_ / align * align, min_chunk, max_chunk);
        return std::min(seg_end, c + size);
    };
    if (n_threads_ == 1) {
        for (int64_t c = 0; c < n;) {
            const int64_t e = chunk_end(c);
            fn(c, e, 0);
            c = e;
        }
        return;
    }
    std::atomic<int64_t> cursor{0};
    run([&](int tid, int) {
        int64_t c = cursor.load(std::memory_order_relaxed);
        while (c < n) {
            const int64_t e = chunk_end(c);
            if (!cursor.compare_exchange_weak(c, e, std::memory_order_relaxed)) continue;  // c reloaded
            fn(c, e, tid);
            c = cursor.load(std::memory_order_relaxed);
        }
    });
}

}  // namespace moe
