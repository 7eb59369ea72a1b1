#pragma once
// The tile operations of the AMX prefill GEMMs (qmatmul_panel_amx.cpp, matmul_bf16_amx.cpp) as two interchangeable
// policies, so that one kernel template runs on real tiles where the CPU has AMX and on an exact
// scalar emulator everywhere (the tests' only way to check the kernel's layout and scale handling
// on a machine without AMX):
//   AmxTiles  the AMX-TILE / AMX-INT8 / AMX-BF16 intrinsics (LDTILECFG, TILELOADD, TILEZERO,
//             TDPB**D, TDPBF16PS, TILESTORED, TILERELEASE); call only where amx_usable() (isa.h),
//             dpbf16ps only where amx_bf16_usable()
//   EmuTiles  a tile register file object (8 tiles x 16 rows x 64 bytes plus the configured rows
//             and bytes per row) executing the same instructions as the ISA reference defines
//             them; no global state: each kernel call gets its own object
// Interface (tile indices are template arguments: the instructions encode them as immediates):
//   config(cfg), load<T>(base, stride), zero<T>(), store<T>(base, stride), release(),
//   dpbsud<C, A, B>() (A int8, B uint8), dpbusd (A uint8, B int8), dpbssd, dpbuud, dpbf16ps.
// TDPB**D: C[m][n] (int32, wrapping) += sum_{k < colsb(A) / 4} sum_{i < 4} A[m][4k + i] * B[k][4n + i]
// for m < rows(C), n < colsb(C) / 4; A is rows(C) x colsb(A) bytes, B is colsb(A) / 4 rows x
// colsb(C) bytes ("VNNI layout": B[k][4n + i] = the value at depth 4k + i of output column n).
// TDPBF16PS: the same shapes with bf16 pairs in place of byte quads (B[k][2n + i] = the value at
// depth 2k + i of column n) and f32 C; its exact rounding steps are at EmuTiles::dpbf16ps.
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstring>

#include <immintrin.h>

#include "core/error.h"

namespace moe::kernels::amx {

// LDTILECFG's 64-byte operand, palette 1: bytes per row and rows of tiles 0..7 (8..15 reserved, 0).
struct alignas(64) TileConfig {
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads 64 bytes");

inline constexpr int kTiles = 8, kTileRows = 16, kTileColsb = 64;

class EmuTiles {
public:
    // As LDTILECFG: checks the palette-1 limits (the instruction faults on others) and zeroes every tile.
    void config(const TileConfig& c) {
        if (c.palette != 1) throw_error("kernels", "AMX emulator: palette ", int(c.palette), " (only palette 1)");
        for (int t = 0; t < kTiles; ++t)
            if (c.rows[t] > kTileRows || c.colsb[t] > kTileColsb || (c.rows[t] == 0) != (c.colsb[t] == 0))
                throw_error("kernels", "AMX emulator: tile ", t, " configured ", int(c.rows[t]), " rows x ", c.colsb[t], " bytes");
        cfg_ = c;
        configured_ = true;
        std::memset(t_, 0, sizeof t_);
    }
    // TILELOADD: rows(T) rows of colsb(T) bytes, stride bytes apart; the rest of the tile zero.
    template <int T>
    void load(const void* base, size_t stride) {
        check<T>();
        std::memset(t_[T], 0, sizeof t_[T]);
        for (int r = 0; r < cfg_.rows[T]; ++r) std::memcpy(t_[T][r], static_cast<const uint8_t*>(base) + r * stride, cfg_.colsb[T]);
    }
    template <int T>
    void zero() {
        check<T>();
        std::memset(t_[T], 0, sizeof t_[T]);
    }
    // TILESTORED: rows(T) rows of colsb(T) bytes.
    template <int T>
    void store(void* base, size_t stride) const {
        check<T>();
        for (int r = 0; r < cfg_.rows[T]; ++r) std::memcpy(static_cast<uint8_t*>(base) + r * stride, t_[T][r], cfg_.colsb[T]);
    }
    template <int C, int A, int B>
    void dpbsud() { dp<C, A, B, true, false>(); }
    template <int C, int A, int B>
    void dpbusd() { dp<C, A, B, false, true>(); }
    template <int C, int A, int B>
    void dpbssd() { dp<C, A, B, true, true>(); }
    template <int C, int A, int B>
    void dpbuud() { dp<C, A, B, false, false>(); }
    // TDPBF16PS as the Intel SDM (vol. 2, "TDPBF16PS -- Dot Product of BF16 Tiles Accumulated into
    // Packed Single Precision Tile", Operation) defines it: per row m, two f32 lanes per column n
    // start at 0; for k < colsb(A) / 4, lane i (i = 0, 1) = FMA(A.bf16[m][2k + i], B.bf16[k][2n + i],
    // lane i); then C[m][n] = C[m][n] + (lane 0 + lane 1). Every step with DAZ (denormal inputs as
    // zero) and FTZ (denormal results as zero), round to nearest even; MXCSR neither read nor
    // written. (The Intrinsics Guide's loop, two FMAs straight into C per k, is a simplification:
    // its sums round differently; the SDM's is implemented.) Products of two bf16 are exact in f32,
    // so FMA = the product added with one rounding.
    template <int C, int A, int B>
    void dpbf16ps() {
        const auto [M, N, K] = chain<C, A, B>("TDPBF16PS");
        for (int m = 0; m < M; ++m) {
            float acc[16];
            std::memcpy(acc, t_[C][m], sizeof acc);
            float lane[16][2] = {};
            for (int k = 0; k < K; ++k)
                for (int n = 0; n < N; ++n)
                    for (int i = 0; i < 2; ++i)
                        lane[n][i] = ftz(std::fma(daz(bf16(t_[A][m], 2 * k + i)), daz(bf16(t_[B][k], 2 * n + i)), daz(lane[n][i])));
            for (int n = 0; n < N; ++n) acc[n] = ftz(daz(acc[n]) + ftz(daz(lane[n][0]) + daz(lane[n][1])));
            std::memset(t_[C][m], 0, kTileColsb);
            std::memcpy(t_[C][m], acc, 4 * static_cast<size_t>(N));
        }
        for (int m = M; m < kTileRows; ++m) std::memset(t_[C][m], 0, kTileColsb);
    }
    // TILERELEASE: back to the unconfigured state.
    void release() {
        configured_ = false;
        cfg_ = TileConfig{};
        std::memset(t_, 0, sizeof t_);
    }

    // For tests: the 16 x 64 bytes of tile t.
    const uint8_t* bytes(int t) const { return &t_[t][0][0]; }

private:
    template <int T>
    void check() const {
        static_assert(T >= 0 && T < kTiles, "tiles 0..7");
        if (!configured_ || cfg_.rows[T] == 0) throw_error("kernels", "AMX emulator: tile ", T, " used unconfigured");
    }
    // The instruction faults (#UD) on shapes that do not chain: rows(C) = rows(A), colsb(C) =
    // colsb(B), colsb(A) / 4 = rows(B); the accumulator row's bytes past colsb(C) and rows past
    // rows(C) are zeroed.
    struct Mnk {
        int M, N, K;
    };
    template <int C, int A, int B>
    Mnk chain(const char* op) const {
        check<C>();
        check<A>();
        check<B>();
        static_assert(C != A && C != B && A != B, "the tile dot products take three distinct tiles");
        const int M = cfg_.rows[C], N = cfg_.colsb[C] / 4, K = cfg_.colsb[A] / 4;
        if (cfg_.rows[A] != M || cfg_.colsb[B] != cfg_.colsb[C] || cfg_.rows[B] != K || cfg_.colsb[A] % 4 || cfg_.colsb[C] % 4)
            throw_error("kernels", "AMX emulator: ", op, " shapes C ", M, "x", int(cfg_.colsb[C]), ", A ", int(cfg_.rows[A]), "x",
                        int(cfg_.colsb[A]), ", B ", int(cfg_.rows[B]), "x", int(cfg_.colsb[B]), " do not chain");
        return {M, N, K};
    }
    // bf16 element e of a tile row, as f32 (the bits in the upper half); DAZ / FTZ: a denormal as
    // a zero of its sign.
    static float bf16(const uint8_t* row, int e) {
        uint16_t h;
        std::memcpy(&h, row + 2 * e, 2);
        const uint32_t b = static_cast<uint32_t>(h) << 16;
        float f;
        std::memcpy(&f, &b, 4);
        return f;
    }
    static float daz(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; }
    static float ftz(float f) { return daz(f); }
    template <int C, int A, int B, bool kSa, bool kSb>
    void dp() {
        const auto [M, N, K] = chain<C, A, B>("TDPB**D");
        for (int m = 0; m < M; ++m) {
            uint32_t acc[16];
            std::memcpy(acc, t_[C][m], sizeof acc);
            for (int k = 0; k < K; ++k)
                for (int n = 0; n < N; ++n)
                    for (int i = 0; i < 4; ++i) {
                        const uint8_t a = t_[A][m][4 * k + i], b = t_[B][k][4 * n + i];
                        const int32_t av = kSa ? int32_t(int8_t(a)) : int32_t(a), bv = kSb ? int32_t(int8_t(b)) : int32_t(b);
                        acc[n] += static_cast<uint32_t>(av * bv);  // 32-bit wrap, as the instruction
                    }
            std::memset(t_[C][m], 0, kTileColsb);
            std::memcpy(t_[C][m], acc, 4 * static_cast<size_t>(N));
        }
        for (int m = M; m < kTileRows; ++m) std::memset(t_[C][m], 0, kTileColsb);
    }

    TileConfig cfg_{};
    bool configured_ = false;
    alignas(64) uint8_t t_[kTiles][kTileRows][kTileColsb] = {};
};

#if defined(__x86_64__)
// The AMX intrinsics take tile numbers as literals (GCC's are macros that paste them into the
// instruction text), so each template argument is mapped to a literal here. The kernels use
// accumulators 0..3, A tiles 4..5 and B tiles 6..7 (and 5 as a B tile beside A tile 4).
#define MOE_AMX_T8(OP)                                     \
    if constexpr (T == 0) OP(0);                           \
    else if constexpr (T == 1) OP(1);                      \
    else if constexpr (T == 2) OP(2);                      \
    else if constexpr (T == 3) OP(3);                      \
    else if constexpr (T == 4) OP(4);                      \
    else if constexpr (T == 5) OP(5);                      \
    else if constexpr (T == 6) OP(6);                      \
    else OP(7)
#define MOE_AMX_DP_B(op, c, a)                     \
    if constexpr (B == 5) _tile_##op(c, a, 5);     \
    else if constexpr (B == 6) _tile_##op(c, a, 6); \
    else _tile_##op(c, a, 7)
#define MOE_AMX_DP_A(op, c)                        \
    if constexpr (A == 4) { MOE_AMX_DP_B(op, c, 4); } \
    else if constexpr (B == 6) { _tile_##op(c, 5, 6); } \
    else { _tile_##op(c, 5, 7); }
#define MOE_AMX_DP(op)                                  \
    static_assert(C >= 0 && C < 4 && ((A == 4 && B >= 5 && B <= 7) || (A == 5 && (B == 6 || B == 7))), \
                  "AmxTiles: C 0..3, A 4 with B 5..7 or A 5 with B 6..7"); \
    if constexpr (C == 0) { MOE_AMX_DP_A(op, 0) }       \
    else if constexpr (C == 1) { MOE_AMX_DP_A(op, 1) }  \
    else if constexpr (C == 2) { MOE_AMX_DP_A(op, 2) }  \
    else { MOE_AMX_DP_A(op, 3) }

// GCC's TILELOADD and LDTILECFG asm names no memory operand beyond 8 bytes, so the compiler
// could sink earlier stores (the fill buffers, the config) past them: a compiler barrier first.
struct AmxTiles {
    [[gnu::target("amx-tile")]] void config(const TileConfig& c) {
        asm volatile("" ::: "memory");
        _tile_loadconfig(&c);
    }
    template <int T>
    [[gnu::target("amx-tile")]] void load(const void* base, size_t stride) {
        static_assert(T >= 0 && T < kTiles, "tiles 0..7");
        asm volatile("" ::: "memory");
#define MOE_AMX_LOAD(t) _tile_loadd(t, base, static_cast<long>(stride))
        MOE_AMX_T8(MOE_AMX_LOAD);
#undef MOE_AMX_LOAD
    }
    template <int T>
    [[gnu::target("amx-tile")]] void zero() {
        static_assert(T >= 0 && T < kTiles, "tiles 0..7");
#define MOE_AMX_ZERO(t) _tile_zero(t)
        MOE_AMX_T8(MOE_AMX_ZERO);
#undef MOE_AMX_ZERO
    }
    template <int T>
    [[gnu::target("amx-tile")]] void store(void* base, size_t stride) const {
        static_assert(T >= 0 && T < kTiles, "tiles 0..7");
#define MOE_AMX_STORE(t) _tile_stored(t, base, static_cast<long>(stride))
        MOE_AMX_T8(MOE_AMX_STORE);
#undef MOE_AMX_STORE
    }
    template <int C, int A, int B>
    [[gnu::target("amx-tile,amx-int8")]] void dpbsud() { MOE_AMX_DP(dpbsud) }
    template <int C, int A, int B>
    [[gnu::target("amx-tile,amx-int8")]] void dpbusd() { MOE_AMX_DP(dpbusd) }
    template <int C, int A, int B>
    [[gnu::target("amx-tile,amx-int8")]] void dpbssd() { MOE_AMX_DP(dpbssd) }
    template <int C, int A, int B>
    [[gnu::target("amx-tile,amx-int8")]] void dpbuud() { MOE_AMX_DP(dpbuud) }
    template <int C, int A, int B>
    [[gnu::target("amx-tile,amx-bf16")]] void dpbf16ps() { MOE_AMX_DP(dpbf16ps) }
    [[gnu::target("amx-tile")]] void release() { _tile_release(); }
};
#undef MOE_AMX_T8
#undef MOE_AMX_DP_B
#undef MOE_AMX_DP_A
#undef MOE_AMX_DP
#endif

}  // namespace moe::kernels::amx
