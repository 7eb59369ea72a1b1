// Kernel benchmark of the decode panel layout (--repack-experts) (kernels/cpu/qmatmul_panel_layout.h): the
// engine's Q3_K / Q2_K / Q4_K / Q6_K / Q8_0 / Q4_0 / Q5_K / Q5_0 / MXFP4 decode GEMV (CpuKernels(Avx512).matmul, m = 1: gemv16_q3k /
// gemv16_q2k / gemv16_q4k / gemv16_q6k / gemv16_q80 / direct_row<DQ4_0> / gemv16<G45_K<true>> /
// direct_row<DLegacy<Q5_0>> / gemv16_mxfp4 over the original
// blocks) against the panel GEMV over the repacked matrices, same activation row (the type's: Q8_K, Q8_0's per
// 32; prepared once).
// Usage (decode reads DRAM: give it matrices totalling at least 8x the L3, it says so): panel_gemv_bench [Q3_K|Q2_K|Q4_K|Q6_K|Q8_0|Q4_0|Q5_K|Q5_0|MXFP4] [matrices=16]
// [N=1024] [K=2048] [alternations=3]   (K a multiple of the type's panel_k_step: 256; Q8_0, Q4_0, Q5_0, MXFP4: 32, e.g. 2880)
// One thread: thread CPU time of a pass over all matrices, best of 5 (each timing 8 passes).
// Two threads: each thread the same pass over its row half of every matrix, started together; the
// pass time is the wall time until the slower thread ends, best of 5 (and the mean of the 5). GB/s are bytes of the ORIGINAL weights per second (the
// panels of every type read as much); GFLOP/s =
// 2 N K per matrix and pass. Also times the scalar repack (one thread). Both the blocks and the
// panels are on 2 MiB pages (huge_alloc, as the engine's file mapping and panels; MOE_HUGEPAGES=0: 4 KiB).
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "core/huge_pages.h"
#include "core/rng.h"
#include "core/timer.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/quant_random.h"
#include "kernels/ref/quantize_act.h"

using namespace moe;
namespace panel = moe::kernels::panel;

namespace {

double thread_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// n bytes from huge_alloc (zeroed by the kernel's fresh pages).
struct HugeBuf {
    struct Free {
        void operator()(uint8_t* p) const { std::free(p); }
    };
    std::unique_ptr<uint8_t, Free> p;
    size_t n = 0;
    void resize(size_t bytes) {
        p.reset(static_cast<uint8_t*>(huge_alloc(bytes)));
        if (!p) {
            std::fprintf(stderr, "panel_gemv_bench: out of memory (%zu bytes)\n", bytes);
            std::exit(2);
        }
        n = bytes;
    }
    uint8_t* data() const { return p.get(); }
    size_t size() const { return n; }
};

struct Setup {
    DType type;
    int nmat;
    int64_t N, K;
    size_t stride, mat_bytes, panel_bytes;
    HugeBuf w, P;  // [nmat] matrices, original and repacked
    std::vector<unsigned char> xq;
    std::vector<float> x;
    std::vector<float> y;  // [nmat][N]
};

// One pass over every matrix, rows [r0, r1) (r0 a multiple of 16).
void pass_engine(Setup& s, const kernels::MatmulKernel& k, int64_t r0, int64_t r1) {
    for (int i = 0; i < s.nmat; ++i) {
        kernels::MatmulArgs a;
        a.w = s.w.data() + i * s.mat_bytes;
        a.w_row_stride = s.stride;
        a.x = s.x.data();
        a.ldx = s.K;
        a.y = s.y.data() + i * s.N + r0;
        a.ldy = s.N;
        a.m = 1;
        a.K = s.K;
        a.n0 = r0;
        a.n1 = r1;
        a.xq = s.xq.data();
        a.xq_stride = s.xq.size();
        k(a);
    }
}
void pass_panel(Setup& s, int64_t r0, int64_t r1) {
    const ref::ActQ8Row x = ref::act_q8_row(s.xq.data(), s.K);
    for (int i = 0; i < s.nmat; ++i) {
        const panel::PanelMatrix pm{s.type, s.P.data() + i * s.panel_bytes, s.N, s.K};
        panel::panel_gemv_avx512(pm, x, r0, r1, s.y.data() + i * s.N + r0);
    }
}

// The L3 this CPU sees: sysfs first (in a VM, sysconf's CPUID answer can be the whole host
// socket's: 384 MiB on a 2-vCPU guest whose sysfs and lscpu say 32 MiB), else sysconf; 0 if unknown.
long l3_bytes() {
    if (FILE* f = std::fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r")) {
        long v = 0;
        char unit = 0;
        const int got = std::fscanf(f, "%ld%c", &v, &unit);
        std::fclose(f);
        if (got >= 1 && v > 0) return unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : v;
    }
    return std::max(0L, sysconf(_SC_LEVEL3_CACHE_SIZE));
}

constexpr int kPasses = 8, kBest = 5;

// Per-pass seconds of fn(r0, r1) over kBest timings, on `threads` threads splitting the rows: the
// best and the mean (on this project's VMs the best read ~10 % faster than the mean: a model's
// decode, which runs each matrix once per token, sees the mean; session 34).
// One thread: its CPU time. Two: both start the timed passes together (a barrier after the warm
// pass) and the time is the wall time until the slower one ends, so neither streams alone while
// the other is still starting or already done (that tail read as extra bandwidth: each thread's
// own CPU time, unsynchronised, was this bench's two-thread number before session 20).
struct PassTime {
    double best = 1e30, mean = 0;
};
PassTime time_it(const Setup& s, int threads, const std::function<void(int64_t, int64_t)>& fn) {
    PassTime pt;
    for (int t = 0; t < kBest; ++t) {
        std::vector<double> sec(threads);
        std::barrier sync(threads);
        const auto work = [&](int th) {
            const int64_t half = (s.N / 16 + threads - 1) / threads * 16;
            const int64_t r0 = th * half, r1 = std::min<int64_t>(s.N, r0 + half);
            fn(r0, r1);  // warm
            sync.arrive_and_wait();
            const Timer wall;  // two threads: from the common start
            const double t0 = thread_seconds();
            for (int p = 0; p < kPasses; ++p) fn(r0, r1);
            sec[th] = (threads == 1 ? thread_seconds() - t0 : wall.seconds()) / kPasses;
        };
        if (threads == 1) {
            work(0);
        } else {
            std::vector<std::thread> ts;
            for (int th = 0; th < threads; ++th) ts.emplace_back(work, th);
            for (auto& th : ts) th.join();
        }
        const double slowest = *std::max_element(sec.begin(), sec.end());
        pt.best = std::min(pt.best, slowest);
        pt.mean += slowest / kBest;
    }
    return pt;
}

}  // namespace

int main(int argc, char** argv) {
    Setup s;
    const std::string tn = argc > 1 ? argv[1] : "Q3_K";
    if (tn != "Q3_K" && tn != "Q2_K" && tn != "Q4_K" && tn != "Q6_K" && tn != "Q8_0" && tn != "Q4_0" && tn != "Q5_K" && tn != "Q5_0" && tn != "MXFP4") {
        std::fprintf(stderr, "panel_gemv_bench: type %s has no panel layout (Q3_K, Q2_K, Q4_K, Q6_K, Q8_0, Q4_0, Q5_K, Q5_0 or MXFP4)\n", tn.c_str());
        return 2;
    }
    s.type = tn == "Q3_K" ? DType::Q3_K : tn == "Q2_K" ? DType::Q2_K : tn == "Q4_K" ? DType::Q4_K : tn == "Q6_K" ? DType::Q6_K
           : tn == "Q4_0" ? DType::Q4_0 : tn == "Q5_K" ? DType::Q5_K : tn == "Q5_0" ? DType::Q5_0
           : tn == "MXFP4" ? DType::MXFP4 : DType::Q8_0;
    s.nmat = argc > 2 ? std::atoi(argv[2]) : 16;
    s.N = argc > 3 ? std::atoll(argv[3]) : 1024;
    s.K = argc > 4 ? std::atoll(argv[4]) : 2048;
    const int alts = argc > 5 ? std::atoi(argv[5]) : 3;
    if (s.nmat < 1 || s.N < 16 || s.K <= 0 || s.K % panel::panel_k_step(s.type) != 0) {
        std::fprintf(stderr, "panel_gemv_bench: need matrices >= 1, N >= 16, K a positive multiple of %d (%s's panel step)\n",
                     panel::panel_k_step(s.type), tn.c_str());
        return 2;
    }
    if (!panel::panel_gemv_usable()) {
        std::fprintf(stderr, "panel_gemv_bench: this CPU lacks AVX-512 VNNI + GFNI (the panel GEMV)\n");
        return 2;
    }
    const int blk = s.type == DType::Q3_K   ? panel::kQ3kBlockBytes
                    : s.type == DType::Q2_K ? panel::kQ2kBlockBytes
                    : s.type == DType::Q4_K ? panel::kQ4kBlockBytes
                    : s.type == DType::Q6_K ? panel::kQ6kBlockBytes
                    : s.type == DType::Q5_K ? panel::kQ5kBlockBytes
                    : s.type == DType::Q4_0 ? panel::kQ40BlockBytes  // per 32 values
                    : s.type == DType::Q5_0 ? panel::kQ50BlockBytes  // per 32 values
                    : s.type == DType::MXFP4 ? panel::kMxfp4BlockBytes  // per 32 values
                                            : panel::kQ80BlockBytes;  // per 32 values
    s.stride = static_cast<size_t>(row_bytes(s.type, static_cast<uint64_t>(s.K)));
    s.mat_bytes = s.stride * static_cast<size_t>(s.N);
    s.panel_bytes = panel::panel_matrix_bytes(s.type, s.N, s.K);
    s.w.resize(s.mat_bytes * s.nmat);
    s.P.resize(s.panel_bytes * s.nmat);
    Rng rng(0xbe7c4);
    ref::fill_random_blocks(s.type, rng, s.w.data(), static_cast<int64_t>(s.w.size() / blk), 1.0f);
    s.x.resize(s.K);
    for (auto& v : s.x) v = rng.normal();
    s.xq.resize(ref::act_q8_row_bytes(s.K));
    ref::quantize_act_q8(s.x.data(), s.K, s.xq.data(), kernels::act_quant(s.type));
    s.y.resize(static_cast<size_t>(s.nmat * s.N));

    // repack cost: one thread, all matrices, best of 3
    double rep = 1e30;
    for (int t = 0; t < 3; ++t) {
        const double t0 = thread_seconds();
        for (int i = 0; i < s.nmat; ++i)
            panel::repack_matrix(s.type, s.w.data() + i * s.mat_bytes, s.stride, s.N, s.K, s.P.data() + i * s.panel_bytes);
        rep = std::min(rep, thread_seconds() - t0);
    }
    const double mb = static_cast<double>(s.w.size()) / 1e6;
    std::printf("%s %d matrices of %lld x %lld: %.2f MB original, %.2f MB panels (+%.2f %%)\n", tn.c_str(), s.nmat, static_cast<long long>(s.N),
                static_cast<long long>(s.K), mb, static_cast<double>(s.P.size()) / 1e6,
                100.0 * (static_cast<double>(s.P.size()) / static_cast<double>(s.w.size()) - 1.0));
    std::printf("repack (scalar, 1 thread): %.1f ms per MB of %s (%.1f MB/s)\n", 1e3 * rep / mb, tn.c_str(), mb / rep);
    // Each pass streams one layout's matrices; one not well past the L3 leaves part of itself
    // there for the next pass, and the GB/s are not DRAM's (session 20: 64 matrices of 1024 x 2048
    // Q4_K, 75 MB beside a 32 MiB L3, read 15 % faster at one thread and up to 2x at two than 384).
    const long l3 = l3_bytes();
    if (l3 > 0) {
        const double x = static_cast<double>(s.w.size()) / static_cast<double>(l3);
        std::printf("working set %.1f x the L3 (%.0f MiB)%s\n", x, static_cast<double>(l3) / 1048576.0,
                    x < 8 ? ": the GB/s include L3 hits; for DRAM streaming use at least 8 x (e.g. 384 matrices of 1024 x 2048)" : ": DRAM streaming");
    }

    // same bits (a bench sanity check; the test is tests/kernels/test_panel_gemv.cpp)
    const kernels::CpuKernels kc(kernels::Isa::Avx512);
    const kernels::MatmulKernel& k = kc.matmul(s.type, "bench");
    pass_engine(s, k, 0, s.N);
    const std::vector<float> ye = s.y;
    pass_panel(s, 0, s.N);
    if (std::memcmp(ye.data(), s.y.data(), ye.size() * sizeof(float)) != 0) {
        std::fprintf(stderr, "panel_gemv_bench: panel GEMV output differs from the engine's\n");
        return 1;
    }
    const double gb = static_cast<double>(s.w.size()) / 1e9, gf = 2.0 * static_cast<double>(s.N) * static_cast<double>(s.K) * s.nmat / 1e9;
    for (int alt = 0; alt < alts; ++alt) {
        for (int threads : {1, 2}) {
            const PassTime pe = time_it(s, threads, [&](int64_t r0, int64_t r1) { pass_engine(s, k, r0, r1); });
            const PassTime pp = time_it(s, threads, [&](int64_t r0, int64_t r1) { pass_panel(s, r0, r1); });
            const double te = pe.best, tp = pp.best;
            std::printf("alt %d, %d thread%s: engine %.2f GB/s %.1f GFLOP/s (%.3f ms/pass), panel %.2f GB/s %.1f GFLOP/s (%.3f ms/pass), "
                        "panel / engine %.3fx; mean of the %d timings: engine %.2f, panel %.2f GB/s\n",
                        alt, threads, threads > 1 ? "s" : " ", gb / te, gf / te, 1e3 * te, gb / tp, gf / tp, 1e3 * tp, te / tp, kBest,
                        gb / pe.mean, gb / pp.mean);
        }
    }
    return 0;
}
