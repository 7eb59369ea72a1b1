// The read loop behind `moe bench`'s bandwidth ceiling (bench_membw.h).
#include "tools/lib/bench_membw.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "core/error.h"
#include "core/huge_pages.h"
#include "core/mem_limit.h"
#include "core/thread_pool.h"
#include "core/timer.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace moe::tools {
namespace {

// Sum of one contiguous slice (the sum is returned so the loads cannot be optimised away).
uint64_t read_slice(const uint64_t* p, size_t n) {
#if defined(__AVX512F__)
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 8));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 16));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 24));
    }
    // Lanes summed through memory: GCC 12's _mm512_reduce_add_epi64 trips -Wuninitialized.
    alignas(64) uint64_t lanes[8];
    _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
    uint64_t s = 0;
    for (uint64_t v : lanes) s += v;
    for (; i < n; ++i) s += p[i];
    return s;
#else
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    for (; i < n; ++i) s0 += p[i];
    return s0 + s1 + s2 + s3;
#endif
}

}  // namespace

// Best-of-reps streaming read over `mib` MiB with `threads` threads (each its own slice), GB/s.
double measure_read_bw(int threads, int64_t mib, int reps) {
    const size_t bytes = static_cast<size_t>(mib) << 20;
    const size_t n = bytes / sizeof(uint64_t);
    // On 2 MiB pages, as the weights are (core/huge_pages.h): the ceiling is the better of the two.
    auto* buf = static_cast<uint64_t*>(huge_alloc(bytes));
    if (!buf) throw_error("bench", "cannot allocate ", mib, " MiB for the bandwidth measurement");
    ThreadPool pool(threads);
    const size_t per = (n / static_cast<size_t>(threads)) / 8 * 8;
    pool.run([&](int tid, int) {  // first touch by the thread that reads the slice
        uint64_t* p = buf + static_cast<size_t>(tid) * per;
        for (size_t i = 0; i < per; ++i) p[i] = i ^ static_cast<size_t>(tid);
    });
    std::atomic<uint64_t> sink{0};
    double best = 0;
    for (int r = 0; r < reps + 1; ++r) {  // pass 0 warms the page tables
        Timer t;
        pool.run([&](int tid, int) { sink += read_slice(buf + static_cast<size_t>(tid) * per, per); });
        const double s = t.seconds();
        if (r > 0) best = std::max(best, static_cast<double>(per * static_cast<size_t>(threads) * 8) / s / 1e9);
    }
    std::free(buf);
    if (sink.load() == 42) std::fputs("", stderr);  // keep the sums alive
    return best;
}

// The same, in a child process: its buffer never counts in this process's peak RSS. The child is a
// fresh `moe bench --membw` (posix_spawn of /proc/self/exe: vfork semantics, no copy-on-write), not
// a fork(): a fork write-protects every page of this process, and the first write to each page
// after it (KV cache rows, activation buffers) then took a fault; with a sample around every tg
// repetition that was ~5 % of an OLMoE tg128 run on this project's VMs (docs/PERFORMANCE.md,
// session 28). Falls back to measuring in this process when the spawn fails.
double measure_read_bw_child(int threads, int64_t mib, int reps) {
    int fd[2];
    if (pipe(fd) != 0) return measure_read_bw(threads, mib, reps);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    posix_spawn_file_actions_addclose(&fa, fd[1]);
    std::vector<std::string> words = {"moe", "bench", "--membw", "-t", std::to_string(threads), "--membw-mib",
                                      std::to_string(mib), "-r", std::to_string(reps), "-o", "json"};
    std::vector<char*> args;
    for (auto& w : words) args.push_back(w.data());
    args.push_back(nullptr);
    std::fflush(stdout);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (rc != 0) {
        close(fd[0]);
        return measure_read_bw(threads, mib, reps);
    }
    std::string out;
    char buf[256];
    for (ssize_t got; (got = read(fd[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(got));
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    const std::string key = "\"membw_gbs\": ";
    const auto at = out.find(key);
    const double v = at == std::string::npos ? 0 : std::strtod(out.c_str() + at + key.size(), nullptr);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !(v > 0))
        throw_error("bench", "bandwidth measurement failed (child `moe bench --membw` exit status ", status,
                    "); pass the bandwidth with --bw GBS");
    return v;
}

// The buffer of a model run's bandwidth samples: as large as the model's file (its weights, which
// decode cycles through: every expert is routed sooner or later), at least 256 MiB, and at most
// half of what the process may still use. On this project's 2-vCPU VMs the read loop's speed
// depends on its buffer's size, not only on the cache: 2 threads read 91-98 GB/s over 256 MiB,
// 71-73 over 1 GiB and 64-69 over 4 GiB, one thread 43 against 35 (docs/PERFORMANCE.md, session
// 34; likely the host's page walks: the guest's 2 MiB pages do not say how the host maps them),
// and the panel GEMV loses as much (Q4_K, 2 threads: 58-74 GB/s over 0.3 GB of matrices, 49-50
// over 3.6 GB). A 256 MiB sample put the ceiling of a 4 GB model ~30 % above what any read of
// its weights reaches. `resident` = bytes this process holds already (the model, once loaded).
int64_t footprint_mib(const std::string& model, double resident) {
    std::error_code ec;
    const auto file = std::filesystem::file_size(model, ec);
    int64_t mib = ec ? 1024 : static_cast<int64_t>(file >> 20);
    try {
        const double left = static_cast<double>(process_memory_limit().bytes) - resident;
        mib = std::min(mib, static_cast<int64_t>(std::max(0.0, left) / 2 / 1048576.0));
    } catch (const Error&) {
        mib = std::min<int64_t>(mib, 1024);  // no limit readable: the old default
    }
    return std::max<int64_t>(mib, 256);
}

}  // namespace moe::tools
