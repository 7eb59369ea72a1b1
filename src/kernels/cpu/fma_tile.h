#pragma once
// The f32 FMA register tile shared by the f32 and the f16/bf16 weight kernels (matmul_f32.cpp,
// matmul_half.cpp): MR activation rows x NR weight rows, one vector accumulator per output, full
// vectors over K then one masked tail vector, a fixed horizontal sum. The kernels differ only in
// how a weight vector is loaded (a Load policy), so f16/bf16 give the f32 kernel's bits on the
// converted weights by construction.
//
// The SIMD halves (fma_tile_avx512.inc, fma_tile_avx2.inc) have no include guard on purpose: a
// kernel file includes each inside an anonymous namespace and a MOE_TARGET_PUSH region (isa_target.h), so the
// tile is compiled for that file's instruction set (and stays internal to it). This header holds
// the ISA-free part: the blocking driver.
#include <cstdint>

#include "kernels/cpu/cpu_kernels.h"

namespace moe::kernels::fma_tile {

using BlockFn = void (*)(const MatmulArgs&, int64_t r0, int64_t n);

// Weight row n of a.w as T*.
template <typename T>
inline const T* wrow(const MatmulArgs& a, int64_t n) {
    return reinterpret_cast<const T*>(static_cast<const char*>(a.w) + n * static_cast<int64_t>(a.w_row_stride));
}

// Rows in blocks of MR, weight rows in blocks of NR; tails use the smaller entries of tab (same
// per-output operation sequence). Weight-row block outer, so a block of weight rows is reused
// across every activation row while it is hot in cache.
template <int MR, int NR>
void drive(const MatmulArgs& a, const BlockFn (&tab)[MR][NR]) {
    for (int64_t n = a.n0; n < a.n1;) {
        const int nr = static_cast<int>(a.n1 - n >= NR ? NR : a.n1 - n);
        for (int64_t r = 0; r < a.m;) {
            const int mr = static_cast<int>(a.m - r >= MR ? MR : a.m - r);
            tab[mr - 1][nr - 1](a, r, n);
            r += mr;
        }
        n += nr;
    }
}

}  // namespace moe::kernels::fma_tile
