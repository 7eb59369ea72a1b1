// Memory-pattern benchmark for the decode panel GEMVs: how fast the CPU streams the ADDRESSES a
// Q4_K panel GEMV reads, with no arithmetic (each load is XORed into an accumulator), against a
// plain sequential read. It separates "the kernel computes too slowly" from "the hardware
// prefetchers do not follow this access pattern" (docs/PERFORMANCE.md, session 26).
//
// A Q4_K panel (qmatmul_panel_layout.h) of K = 2048 is nsb = 8 super-blocks of levels (2048 bytes
// each), then their scales (256 each), then their d (64 each): 18944 bytes, one panel after the
// other. The GEMV walks the levels in order, 64 bytes per load, and reads a super-block's scales
// and d beside them. Patterns (each over the same 620 MB, threads reading disjoint halves):
//   seq        64-byte loads in address order (the `moe bench` read loop's pattern)
//   panel      the panel GEMV's loads over today's layout
//   panel-pf   the same plus the GEMV's PREFETCHT2 of the next panel, one slot per level load
//   levels     only the level loads of today's layout (the scales and d are skipped: gaps)
//   regions    the same loads over a region-major layout: every panel's levels back to back,
//              then every panel's scales, then every panel's d (no gaps in any stream)
// Usage: panel_stream_bench [threads=1] [rounds=2]   prints GB/s (best of 4 passes) per pattern,
// the patterns alternating within each round.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/huge_pages.h"
#include "kernels/cpu/isa_target.h"

namespace {

constexpr int kNsb = 8, kLev = 2048, kSc = 256, kD = 64;
constexpr int64_t kPanel = kNsb * (kLev + kSc + kD);  // 18944 bytes
constexpr int64_t kPanels = 32768;                    // 620 MB

enum class Pattern { Seq, Panel, PanelPf, Levels, Regions };
const char* name(Pattern p) {
    switch (p) {
        case Pattern::Seq: return "seq";
        case Pattern::Panel: return "panel";
        case Pattern::PanelPf: return "panel-pf";
        case Pattern::Levels: return "levels";
        case Pattern::Regions: return "regions";
    }
    return "?";
}

// Where panel p's regions start in a buffer of n panels.
struct PanelAt {
    const uint8_t *L, *S, *D;
};
PanelAt panel_at(const uint8_t* base, int64_t p, int64_t n, bool region_major) {
    if (region_major)
        return {base + p * kNsb * kLev, base + n * kNsb * kLev + p * kNsb * kSc, base + n * kNsb * (kLev + kSc) + p * kNsb * kD};
    const uint8_t* P = base + p * kPanel;
    return {P, P + kNsb * kLev, P + kNsb * (kLev + kSc)};
}

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl")
// Panels [p0, p1) of a buffer of n panels; returns the XOR of every loaded byte (kept alive).
__m512i walk(const uint8_t* base, int64_t p0, int64_t p1, int64_t n, Pattern pat) {
    __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();
    if (pat == Pattern::Seq) {
        const uint8_t* end = base + p1 * kPanel;
        for (const uint8_t* q = base + p0 * kPanel; q + 256 <= end; q += 256) {
            a = _mm512_xor_si512(a, _mm512_loadu_si512(q));
            b = _mm512_xor_si512(b, _mm512_loadu_si512(q + 64));
            a = _mm512_xor_si512(a, _mm512_loadu_si512(q + 128));
            b = _mm512_xor_si512(b, _mm512_loadu_si512(q + 192));
        }
        return _mm512_xor_si512(a, b);
    }
    const bool rm = pat == Pattern::Regions, side = pat != Pattern::Levels;
    for (int64_t p = p0; p < p1; ++p) {
        const PanelAt at = panel_at(base, p, n, rm);
        const char* next = reinterpret_cast<const char*>(at.L) + kPanel;  // today's layout: the next panel
        for (int sb = 0; sb < kNsb; ++sb) {
            const uint8_t* L = at.L + sb * kLev;
#pragma GCC unroll 1
            for (int g = 0; g < 8; ++g) {
#pragma GCC unroll 4
                for (int v = 0; v < 4; ++v) {
                    if (pat == Pattern::PanelPf && p + 1 < p1)
                        for (int off = 64 * (g + 8 * v); off < kPanel / kNsb; off += 64 * 32)
                            asm volatile("prefetcht2 %0" : : "m"(next[sb * (kPanel / kNsb) + off]));
                    a = _mm512_xor_si512(a, _mm512_loadu_si512(L + 256 * g + 64 * v));
                }
                if (side) b = _mm512_xor_si512(b, _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at.S + sb * kSc + 16 * g))));
            }
            if (side) {
                for (int k = 0; k < 4; ++k)
                    b = _mm512_xor_si512(b, _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.S + sb * kSc + 128 + 32 * k))));
                b = _mm512_xor_si512(b, _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at.D + sb * kD))));
            }
        }
    }
    return _mm512_xor_si512(a, b);
}
MOE_TARGET_POP

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
    const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
    const int rounds = argc > 2 ? std::atoi(argv[2]) : 2;
    if (threads < 1 || threads > 64 || rounds < 1) {
        std::fprintf(stderr, "usage: panel_stream_bench [threads=1] [rounds=2]\n");
        return 2;
    }
    if (!__builtin_cpu_supports("avx512bw")) {
        std::fprintf(stderr, "panel_stream_bench: needs AVX-512 (the panel GEMVs it models are AVX-512)\n");
        return 2;
    }
    const size_t bytes = static_cast<size_t>(kPanels * kPanel);
    auto* base = static_cast<uint8_t*>(moe::huge_alloc(bytes));
    if (!base) {
        std::fprintf(stderr, "panel_stream_bench: out of memory (%zu bytes)\n", bytes);
        return 2;
    }
    std::memset(base, 0x5A, bytes);
    const int64_t per = kPanels / threads;
    std::printf("%lld panels of %lld bytes (%.0f MB), %d thread(s), GB/s of the buffer's bytes per pass\n",
                static_cast<long long>(kPanels), static_cast<long long>(kPanel), bytes / 1e6, threads);
    const Pattern pats[] = {Pattern::Seq, Pattern::Panel, Pattern::PanelPf, Pattern::Levels, Pattern::Regions};
    std::vector<uint64_t> sink(static_cast<size_t>(threads) * 8);
    for (int r = 0; r < rounds; ++r) {
        std::string line = "round " + std::to_string(r) + ":";
        for (Pattern pat : pats) {
            double best = 0;
            for (int pass = 0; pass < 5; ++pass) {  // pass 0 warms the TLB
                std::vector<std::thread> th;
                const double t0 = seconds();
                for (int t = 0; t < threads; ++t)
                    th.emplace_back([&, t] {
                        const __m512i s = walk(base, t * per, (t + 1) * per, kPanels, pat);
                        std::memcpy(&sink[static_cast<size_t>(t) * 8], &s, 64);
                    });
                for (auto& x : th) x.join();
                const double s = seconds() - t0;
                if (pass > 0) best = std::max(best, static_cast<double>(per * threads * kPanel) / s / 1e9);
            }
            char cell[64];
            std::snprintf(cell, sizeof cell, "  %s %.1f", name(pat), best);
            line += cell;
        }
        std::printf("%s\n", line.c_str());
    }
    uint64_t x = 0;
    for (uint64_t v : sink) x ^= v;
    std::free(base);
    if (x == 42) std::fputs("", stderr);  // keeps the sums alive
    return 0;
}
