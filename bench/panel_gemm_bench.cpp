// Kernel benchmark of the prefill panel GEMM (kernels/cpu/qmatmul_panel_gemm.cpp, panel_gemm_avx512)
// over repacked Q4_K / Q5_K / Q6_K / Q4_0 / Q8_0 / Q5_0 / MXFP4 matrices: m activation rows (one expert call's tokens)
// against each of `matrices` N x K matrices, one thread.
// Usage: panel_gemm_bench [Q4_K|Q5_K|Q6_K|Q4_0|Q8_0|Q5_0|MXFP4] [matrices=16] [N=1024] [K=2048] [m=64] [alternations=3] [PATH | PATH/PATH]
// PATH: avx512, amx, amx-nopf.
// Thread CPU time of a pass over all matrices, best of 5 (each timing 4 passes). GMAC/s = m N K per
// matrix and pass; % of peak against one zmm vpdpbusd (64 MACs) per cycle at the clock
// /proc/cpuinfo reports (MOE_BENCH_GHZ overrides it; a VM may report the base clock, not the boost)
// and against a measured loop of independent vpdpbusd (the real ceiling whatever the clock). Also checks the panel GEMM's bits against the
// block kernel (CpuKernels(Avx512).matmul over the original blocks) and prints a checksum of y, so
// two builds can be compared.
// Path amx: the AMX-INT8 panel GEMM (qmatmul_panel_amx.h) on real tiles, against a measured loop of
// independent TDPBUSD (16 x 16 x 64 MACs each) on four accumulator tiles; an error where AMX is not usable.
// Path amx-nopf: the same without the next-panel prefetch (AmxGemmOptions::prefetch_next).
// Two paths (A/B): single passes alternate between them, 20 x alternations pairs, the order turning
// each pair; prints the median and quartiles of the per-pair speed ratio A / B (the tiles' speed
// on a Xeon VM comes and goes in spells: within a pair it rarely changes, docs/PERFORMANCE.md).
#include <immintrin.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/huge_pages.h"
#include "core/rng.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_amx.h"
#include "kernels/cpu/qmatmul_panel_gemm.h"
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

double clock_ghz() {
    if (const char* e = std::getenv("MOE_BENCH_GHZ")) return std::atof(e);
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("cpu MHz", 0) == 0) return std::atof(line.substr(line.find(':') + 1).c_str()) / 1e3;
    return 0.0;
}

// Measured vpdpbusd zmm throughput (MACs per second): 12 independent accumulators, so latency is hidden.
[[gnu::target("avx512f,avx512bw,avx512vnni")]] double vnni_peak_macs() {
    __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
    asm volatile("" : "+v"(a), "+v"(b));
    __m512i c0 = a, c1 = a, c2 = a, c3 = a, c4 = a, c5 = a, c6 = a, c7 = a, c8 = a, c9 = a, c10 = a, c11 = a;
    constexpr int64_t kIters = 20000000;
    double best = 1e30;
    for (int t = 0; t < 3; ++t) {
        const double t0 = thread_seconds();
        for (int64_t it = 0; it < kIters; ++it) {
            asm volatile(
                "vpdpbusd %12, %13, %0\n\tvpdpbusd %12, %13, %1\n\tvpdpbusd %12, %13, %2\n\tvpdpbusd %12, %13, %3\n\t"
                "vpdpbusd %12, %13, %4\n\tvpdpbusd %12, %13, %5\n\tvpdpbusd %12, %13, %6\n\tvpdpbusd %12, %13, %7\n\t"
                "vpdpbusd %12, %13, %8\n\tvpdpbusd %12, %13, %9\n\tvpdpbusd %12, %13, %10\n\tvpdpbusd %12, %13, %11"
                : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6), "+v"(c7), "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11)
                : "v"(a), "v"(b));
        }
        best = std::min(best, thread_seconds() - t0);
    }
    const __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                                       _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7)),
                                                        _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11))));
    // Lanes summed through memory: GCC 12's _mm512_reduce_add_epi32 trips -Wmaybe-uninitialized.
    alignas(64) int32_t lanes[16];
    _mm512_store_si512(lanes, s);
    int32_t sink = 0;
    for (int32_t v : lanes) sink += v;
    asm volatile("" : : "r"(sink));
    return 64.0 * 12 * kIters / best;
}

// Measured TDPBUSD throughput (MACs per second): four independent accumulators (C 0..3 from A 4..5 x
// B 6..7), so the dot products' latency is hidden. Call only where amx_usable().
double amx_peak_macs() {
    namespace amx = moe::kernels::amx;
    amx::TileConfig cfg;
    for (int t = 0; t < 8; ++t) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    alignas(64) static uint8_t buf[16 * 64];
    for (int i = 0; i < 16 * 64; ++i) buf[i] = static_cast<uint8_t>(i * 7 + 1);
    amx::AmxTiles tl;
    tl.config(cfg);
    tl.load<4>(buf, 64);
    tl.load<5>(buf, 64);
    tl.load<6>(buf, 64);
    tl.load<7>(buf, 64);
    constexpr int64_t kIters = 2000000;
    double best = 1e30;
    for (int t = 0; t < 3; ++t) {
        tl.zero<0>();
        tl.zero<1>();
        tl.zero<2>();
        tl.zero<3>();
        const double t0 = thread_seconds();
        for (int64_t it = 0; it < kIters; ++it) {
            tl.dpbusd<0, 4, 6>();
            tl.dpbusd<1, 4, 7>();
            tl.dpbusd<2, 5, 6>();
            tl.dpbusd<3, 5, 7>();
        }
        best = std::min(best, thread_seconds() - t0);
    }
    alignas(64) static int32_t out[16 * 16];
    tl.store<0>(out, 64);
    tl.release();
    asm volatile("" : : "r"(out[0]) : "memory");
    return 16.0 * 16 * 64 * 4 * kIters / best;
}

uint8_t* alloc_or_die(size_t bytes) {
    auto* p = static_cast<uint8_t*>(huge_alloc(bytes));
    if (!p) {
        std::fprintf(stderr, "panel_gemm_bench: out of memory (%zu bytes)\n", bytes);
        std::exit(2);
    }
    return p;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string tn = argc > 1 ? argv[1] : "Q4_K";
    const std::optional<DType> ot = dtype_from_name(tn);
    if (!ot || (*ot != DType::Q4_K && *ot != DType::Q5_K && *ot != DType::Q6_K && *ot != DType::Q4_0 && *ot != DType::Q8_0 && *ot != DType::Q5_0 && *ot != DType::MXFP4)) {
        std::fprintf(stderr, "panel_gemm_bench: type %s: Q4_K, Q5_K, Q6_K, Q4_0, Q8_0, Q5_0 or MXFP4\n", tn.c_str());
        return 2;
    }
    const DType type = *ot;
    const int nmat = argc > 2 ? std::atoi(argv[2]) : 16;
    const int64_t N = argc > 3 ? std::atoll(argv[3]) : 1024, K = argc > 4 ? std::atoll(argv[4]) : 2048,
                  m = argc > 5 ? std::atoll(argv[5]) : 64;
    const int alts = argc > 6 ? std::atoi(argv[6]) : 3;
    const std::string path = argc > 7 ? argv[7] : "avx512";
    struct PathOpts {
        std::string name;
        bool amx = false;
        panel::AmxGemmOptions o;
    };
    std::vector<PathOpts> paths;
    for (size_t at = 0; at <= path.size();) {
        const size_t slash = std::min(path.find('/', at), path.size());
        PathOpts po;
        po.name = path.substr(at, slash - at);
        if (po.name != "avx512" && po.name != "amx" && po.name != "amx-nopf") {
            std::fprintf(stderr, "panel_gemm_bench: path %s: avx512, amx or amx-nopf (or two of them as A/B)\n", po.name.c_str());
            return 2;
        }
        po.amx = po.name != "avx512";
        po.o.prefetch_next = po.name != "amx-nopf";
        paths.push_back(po);
        at = slash + 1;
    }
    if (paths.size() > 2) {
        std::fprintf(stderr, "panel_gemm_bench: at most two paths (A/B)\n");
        return 2;
    }
    const bool use_amx = paths[0].amx || paths.back().amx;
    if (use_amx && !kernels::amx_usable()) {
        std::fprintf(stderr, "panel_gemm_bench: AMX is not usable here: %s\n", kernels::amx_absent_reason());
        return 2;
    }
    if (nmat < 1 || N < 16 || K % 256 != 0 || K <= 0 || m < 3) {
        std::fprintf(stderr, "panel_gemm_bench: need matrices >= 1, N >= 16, K a positive multiple of 256, m >= 3\n");
        return 2;
    }
    if (!panel::panel_gemv_usable()) {
        std::fprintf(stderr, "panel_gemm_bench: this CPU lacks AVX-512 VNNI + GFNI\n");
        return 2;
    }
    const int blk = static_cast<int>(dtype_info(type).bytes);
    const size_t stride = row_bytes(type, static_cast<uint64_t>(K)), mat_bytes = stride * static_cast<size_t>(N),
                 pmat_bytes = panel::panel_matrix_bytes(type, N, K);
    uint8_t* w = alloc_or_die(mat_bytes * nmat);
    uint8_t* P = alloc_or_die(pmat_bytes * nmat);
    Rng rng(0x9e3a);
    ref::fill_random_blocks(type, rng, w, static_cast<int64_t>(mat_bytes * nmat / blk), 1.0f);
    for (int i = 0; i < nmat; ++i) panel::repack_matrix(type, w + i * mat_bytes, stride, N, K, P + i * pmat_bytes);
    std::vector<float> x(static_cast<size_t>(m * K));
    for (auto& v : x) v = rng.normal();
    const size_t xq_stride = ref::act_q8_row_bytes(K);
    // On 2 MiB pages, as the model's activation rows: on 4 KiB pages each AMX A tile (16 rows
    // xq_stride ~6 KB apart) touches 16 pages, and the AMX kernels measured ~20 % slower.
    unsigned char* xq = alloc_or_die(xq_stride * m);
    kernels::quantize_act_rows(kernels::Isa::Avx512, kernels::act_quant(type), x.data(), K, m, K, xq, xq_stride);
    std::vector<float> y(static_cast<size_t>(nmat) * m * N), ye(y.size());

    const auto args = [&](int i, float* yo) {
        kernels::MatmulArgs a;
        a.w = w + i * mat_bytes;
        a.w_row_stride = stride;
        a.x = x.data();
        a.ldx = K;
        a.y = yo + static_cast<size_t>(i) * m * N;
        a.ldy = N;
        a.m = m;
        a.K = K;
        a.n0 = 0;
        a.n1 = N;
        a.xq = xq;
        a.xq_stride = xq_stride;
        return a;
    };
    const auto pass_of = [&](const PathOpts& po) {
        for (int i = 0; i < nmat; ++i) {
            const panel::PanelMatrix pm{type, P + i * pmat_bytes, N, K};
            if (po.amx)
                panel::panel_gemm_amx(pm, args(i, y.data()), po.o);
            else
                panel::panel_gemm_avx512(pm, args(i, y.data()));
        }
    };
    const auto pass = [&] { pass_of(paths[0]); };

    // same bits as the block kernel (the test is tests/kernels/test_panel_gemm.cpp)
    const kernels::CpuKernels kc(kernels::Isa::Avx512);
    const kernels::MatmulKernel& k = kc.matmul(type, "bench");
    for (int i = 0; i < nmat; ++i) k(args(i, ye.data()));
    for (const PathOpts& po : paths) {
        pass_of(po);
        if (std::memcmp(ye.data(), y.data(), y.size() * sizeof(float)) != 0) {
            std::fprintf(stderr, "panel_gemm_bench: panel GEMM output (path %s) differs from the block kernel's\n", po.name.c_str());
            return 1;
        }
    }
    uint64_t h = 1469598103934665603ull;  // FNV-1a of y's bytes
    for (size_t b = 0; b < y.size() * sizeof(float); ++b) h = (h ^ reinterpret_cast<const uint8_t*>(y.data())[b]) * 1099511628211ull;

    const double ghz = clock_ghz(), vnni_peak = vnni_peak_macs() / 1e9, macs = static_cast<double>(m) * N * K * nmat;
    const double peak = use_amx ? amx_peak_macs() / 1e9 : vnni_peak;
    const char* unit = use_amx ? "TDPBUSD" : "vpdpbusd";
    if (use_amx) std::printf("measured peaks, 1 thread: vpdpbusd %.1f GMAC/s, TDPBUSD %.1f GMAC/s\n", vnni_peak, peak);
    std::printf("%s %s %d matrices of %lld x %lld, m = %lld, 1 thread, clock %.3f GHz, y checksum %016llx\n", path.c_str(), tn.c_str(), nmat,
                static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(m), ghz, static_cast<unsigned long long>(h));
    if (paths.size() == 2) {
        const int pairs = 20 * std::max(alts, 1);
        std::vector<double> ratio, ga;
        for (int i = 0; i < pairs; ++i) {
            double sec[2];
            for (int j = 0; j < 2; ++j) {
                const int v = (i + j) % 2;
                const double t0 = thread_seconds();
                pass_of(paths[static_cast<size_t>(v)]);
                sec[v] = thread_seconds() - t0;
            }
            ratio.push_back(sec[1] / sec[0]);
            ga.push_back(macs / sec[0] / 1e9);
        }
        std::sort(ratio.begin(), ratio.end());
        std::sort(ga.begin(), ga.end());
        const size_t q = ratio.size();
        std::printf("%s / %s: %d pairs of single passes, speed ratio median %.3f, quartiles %.3f %.3f; %s median %.1f GMAC/s\n",
                    paths[0].name.c_str(), paths[1].name.c_str(), pairs, ratio[q / 2], ratio[q / 4], ratio[3 * q / 4],
                    paths[0].name.c_str(), ga[q / 2]);
        std::free(w);
        std::free(P);
        return 0;
    }
    constexpr int kPasses = 4, kBest = 5;
    for (int alt = 0; alt < alts; ++alt) {
        double best = 1e30;
        for (int t = 0; t < kBest; ++t) {
            const double t0 = thread_seconds();
            for (int p = 0; p < kPasses; ++p) pass();
            best = std::min(best, (thread_seconds() - t0) / kPasses);
        }
        const double gmac = macs / best / 1e9;
        std::printf("alt %d: %.3f ms/pass, %.1f GMAC/s, %.1f %% of 1 vpdpbusd/cycle at %.3f GHz (%.1f GMAC/s), %.1f %% of the measured %s peak (%.1f GMAC/s)\n",
                    alt, 1e3 * best, gmac, ghz > 0 ? 100.0 * gmac / (64.0 * ghz) : 0.0, ghz, 64.0 * ghz, 100.0 * gmac / peak, unit, peak);
    }
    std::free(w);
    std::free(P);
    return 0;
}
