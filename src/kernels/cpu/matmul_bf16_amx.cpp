// AMX-BF16 prefill GEMM over the bf16 panels of matmul_bf16_amx.h (issue 15): one TDPBF16PS
// multiplies 16 tokens x 16 columns x 32 values (512 bf16 FMAs per instruction).
//
// One template, gemm_tiles<Tiles>, over the tile policies of amx_tiles.h: AmxTiles (the
// intrinsics) and EmuTiles (the scalar emulator, the tests' way to check layout and order on a
// machine without AMX). Per call: the activation rows rounded to bf16 (round_rows_bf16) into a per-thread buffer
// [m rounded up to 16][K] (rows past m zero, so a short last token group reads zeros), one tile
// configuration (released at the end), then per pair of 16-column panels (n, n + 16) and per group
// of up to 32 tokens:
//   tiles 0..3   C: 16 tokens x 16 columns f32, C[2h + j] = token group h x panel j, zeroed once,
//                accumulated over all K / 32 steps, stored, the first nc columns and the group's
//                real rows copied to y
//   tiles 4, 5   A: 16 token rows x 32 bf16 (64 bytes, 2K bytes apart) of token group h, step s
//   tiles 6, 7   B: 16 pair rows x 64 bytes of panel j, step s (the panel's rows 16s .. 16s + 15)
// Column tails (nc < 16) compute the panel's zero columns and store only nc.
//
// Verified (tests/kernels/test_amx_bf16.cpp): the EmuTiles instantiation bit for bit against a
// scalar model of the accumulation order and within a derived bound of an fp64 reference; the
// AmxTiles instantiation the same only where amx_bf16_usable() (elsewhere the test says absent).
#include "kernels/cpu/matmul_bf16_amx.h"

#include <immintrin.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/isa_target.h"

namespace moe::kernels::bf16amx {

namespace {
// Per-thread scratch (grown, never shrunk), 64-byte aligned.
uint16_t* bf16_scratch(size_t elems) {
    thread_local std::vector<unsigned char> buf;
    const size_t bytes = elems * 2;
    if (buf.size() < bytes + 64) buf.resize(bytes + 64);
    return reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
}

void check_k(int64_t K, const char* what) {
    if (K <= 0 || K % 32 != 0)
        throw_error("kernels", what, ": K = ", K, " is not a positive multiple of 32 (the depth of one TDPBF16PS tile step)");
}

[[gnu::target("avx512f,avx512bf16")]] void round_rows_avx512(const float* x, int64_t ldx, int64_t m, int64_t K, uint16_t* out) {
    for (int64_t r = 0; r < m; ++r)
        for (int64_t k = 0; k < K; k += 32) {
            const float* p = x + r * ldx + k;
            // low half of the result from the second operand: values k .. k + 15, then k + 16 .. k + 31
            const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(p));
            _mm512_storeu_si512(out + r * K + k, reinterpret_cast<const __m512i&>(v));
        }
}

bool cpu_has_avx512bf16() {
#if defined(__x86_64__)
    static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
    return has;
#else
    return false;
#endif
}

uint16_t to_bf16(DType t, const unsigned char* row, int64_t k) {
    if (t == DType::BF16) {
        uint16_t h;
        std::memcpy(&h, row + 2 * k, 2);
        return h;  // as stored: no rounding
    }
    if (t == DType::F16) {
        uint16_t h;
        std::memcpy(&h, row + 2 * k, 2);
        return fp32_to_bf16(fp16_to_fp32(h));
    }
    float f;
    std::memcpy(&f, row + 4 * k, 4);
    return fp32_to_bf16(f);
}
}  // namespace

void round_rows_bf16_scalar(const float* x, int64_t ldx, int64_t m, int64_t K, uint16_t* out) {
    for (int64_t r = 0; r < m; ++r)
        for (int64_t k = 0; k < K; ++k) out[r * K + k] = fp32_to_bf16(x[r * ldx + k]);
}

void round_rows_bf16(const float* x, int64_t ldx, int64_t m, int64_t K, uint16_t* out) {
    check_k(K, "bf16 activation rows");
    if (cpu_has_avx512bf16()) round_rows_avx512(x, ldx, m, K, out);
    else round_rows_bf16_scalar(x, ldx, m, K, out);
}

bool bf16_panels_supported(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

size_t bf16_panel_bytes(int64_t N, int64_t K) { return static_cast<size_t>((N + 15) / 16) * static_cast<size_t>(K) * 32; }

void bf16_panels_repack(DType t, const void* w, size_t row_stride, int64_t N, int64_t K, uint16_t* out) {
    if (!bf16_panels_supported(t)) throw_error("kernels", "bf16 panels: weight type ", dtype_name(t), " has none (F32, F16, BF16)");
    check_k(K, "bf16 panels");
    const int64_t np = (N + 15) / 16;
    // panel p, pair row k: [16 columns][2 values]
    for (int64_t p = 0; p < np; ++p) {
        uint16_t* P = out + static_cast<size_t>(p) * static_cast<size_t>(K) * 16;
        for (int c = 0; c < 16; ++c) {
            const int64_t n = 16 * p + c;
            const unsigned char* row = static_cast<const unsigned char*>(w) + static_cast<size_t>(n) * row_stride;
            for (int64_t k = 0; k < K; ++k) P[(k / 2) * 32 + 2 * c + k % 2] = n < N ? to_bf16(t, row, k) : 0;
        }
    }
}

}  // namespace moe::kernels::bf16amx

// AMX so that AmxTiles' methods inline (the compiler never emits tile instructions of its own:
// only AmxTiles' run, and only where amx_bf16_usable()).
MOE_TARGET_PUSH("amx-tile,amx-bf16")

namespace moe::kernels::bf16amx {

namespace {

using amx::TileConfig;

template <class Tiles>
void gemm_tiles(Tiles& t, const Bf16PanelMatrix& w, const MatmulArgs& a) {
    check_k(w.K, "AMX-BF16 GEMM");
    if (a.K != w.K) throw_error("kernels", "AMX-BF16 GEMM: K = ", a.K, " but the panels hold rows of ", w.K);
    if (a.n0 < 0 || a.n1 > w.N || a.n0 > a.n1 || a.n0 % 16 != 0)
        throw_error("kernels", "AMX-BF16 GEMM: columns [", a.n0, ", ", a.n1, ") of ", w.N,
                    "; the range must lie in the matrix and start at a multiple of 16 (a panel)");
    if (a.m <= 0 || a.n1 <= a.n0) return;
    const int64_t K = w.K, mp = (a.m + 15) / 16 * 16;
    const size_t pk = static_cast<size_t>(K) * 16;  // uint16 per panel
    uint16_t* xb = bf16_scratch(static_cast<size_t>(mp) * static_cast<size_t>(K));
    round_rows_bf16(a.x, a.ldx, a.m, K, xb);
    std::memset(xb + a.m * K, 0, static_cast<size_t>((mp - a.m) * K) * 2);

    TileConfig cfg;
    for (int i = 0; i < 8; ++i) cfg.rows[i] = 16, cfg.colsb[i] = 64;
    t.config(cfg);
    alignas(64) float cbuf[4][16][16];
    const size_t as = static_cast<size_t>(K) * 2;
    for (int64_t n = a.n0; n < a.n1; n += 32) {
        int nc[2];
        nc[0] = static_cast<int>(a.n1 - n >= 16 ? 16 : a.n1 - n);
        nc[1] = static_cast<int>(a.n1 - n - 16 >= 16 ? 16 : (a.n1 - n - 16 > 0 ? a.n1 - n - 16 : 0));
        const int np = nc[1] > 0 ? 2 : 1;
        const uint16_t* B0 = w.panels + static_cast<size_t>(n / 16) * pk;
        const uint16_t* B1 = B0 + pk;
        for (int64_t r0 = 0; r0 < a.m; r0 += 32) {
            const int nt = static_cast<int>(a.m - r0 >= 32 ? 32 : a.m - r0), nh = nt > 16 ? 2 : 1;
            const uint16_t* A0 = xb + r0 * K;
            const uint16_t* A1 = A0 + 16 * K;
            t.template zero<0>();
            if (np == 2) t.template zero<1>();
            if (nh == 2) t.template zero<2>();
            if (nh == 2 && np == 2) t.template zero<3>();
            for (int64_t s = 0; s < K; s += 32) {
                // B rows s / 2 .. s / 2 + 15 (32 uint16 each); A columns s .. s + 31
                t.template load<6>(B0 + s * 16, 64);
                if (np == 2) t.template load<7>(B1 + s * 16, 64);
                t.template load<4>(A0 + s, as);
                t.template dpbf16ps<0, 4, 6>();
                if (np == 2) t.template dpbf16ps<1, 4, 7>();
                if (nh == 2) {
                    t.template load<5>(A1 + s, as);
                    t.template dpbf16ps<2, 5, 6>();
                    if (np == 2) t.template dpbf16ps<3, 5, 7>();
                }
            }
            t.template store<0>(cbuf[0], 64);
            if (np == 2) t.template store<1>(cbuf[1], 64);
            if (nh == 2) t.template store<2>(cbuf[2], 64);
            if (nh == 2 && np == 2) t.template store<3>(cbuf[3], 64);
            for (int i = 0; i < nt; ++i)
                for (int j = 0; j < np; ++j)
                    std::memcpy(a.y + (r0 + i) * a.ldy + (n + 16 * j - a.n0), cbuf[2 * (i / 16) + j][i % 16], 4 * static_cast<size_t>(nc[j]));
        }
    }
    t.release();
}

}  // namespace

void matmul_bf16_amx(const Bf16PanelMatrix& w, const MatmulArgs& a) {
    amx::AmxTiles t;
    gemm_tiles(t, w, a);
}

void matmul_bf16_amx_emulated(const Bf16PanelMatrix& w, const MatmulArgs& a) {
    amx::EmuTiles t;
    gemm_tiles(t, w, a);
}

}  // namespace moe::kernels::bf16amx

MOE_TARGET_POP
