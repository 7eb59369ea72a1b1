// The AMX-BF16 GEMM for dense F32 / F16 / BF16 weights (kernels/cpu/matmul_bf16_amx.h) and the
// TDPBF16PS of the tile emulator (amx_tiles.h):
//  - the emulated TDPBF16PS against a plain loop of the Intel SDM's Operation (two f32 FMA lanes
//    per column from 0, then C + (lane 0 + lane 1); DAZ, FTZ, RNE) on random bf16 tiles with
//    denormals, fewer rows / columns / depth, and hand cases for DAZ, FTZ and the lane order;
//  - the panel layout (bf16_panels_repack): every element where the header says, tails zero, BF16
//    weights copied bit for bit;
//  - the kernel on the emulator: bit for bit against a scalar model of the same order, and within
//    a derived bound of an fp64 reference, on fresh random inputs (the seed is printed), m = 1, 15,
//    16, 17, 40, N = 70 with column ranges that start at later panels and end in tails, K = 32, 96,
//    256; bad calls (K % 32 != 0, K mismatch, range) are one clear error;
//  - the same on real AMX-BF16 tiles where this CPU and kernel allow them (the bound required, the
//    outputs whose bits differ from the SDM model counted and printed: whether the hardware rounds
//    exactly as the pseudocode is not known here), else a printed "absent" line;
//  - MOE_AMX_BF16: 1 where AMX-BF16 is not usable (or off the avx512 path) is one clear error, 0 /
//    unset is off, anything else an error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul_bf16_amx.h"

namespace moe {
namespace {

namespace amx = kernels::amx;
namespace bf = kernels::bf16amx;

uint64_t fresh_seed() {
    static const uint64_t seed = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
    return seed;
}

float daz(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; }
float bits_f(uint32_t b) { return fp32_from_bits(b); }

// A random bf16: mostly normal values of exponent 2^-20 .. 2^20, some zeros and denormals.
uint16_t random_bf16(Rng& rng) {
    const uint32_t sign = static_cast<uint32_t>(rng.next() & 1) << 15, man = static_cast<uint32_t>(rng.next() & 0x7f);
    const int pick = static_cast<int>(rng.next() % 16);
    if (pick == 0) return static_cast<uint16_t>(sign);        // zero
    if (pick == 1) return static_cast<uint16_t>(sign | man);  // denormal (or zero)
    const uint32_t e = 127 - 20 + static_cast<uint32_t>(rng.next() % 41);
    return static_cast<uint16_t>(sign | (e << 7) | man);
}

// ---------------------------------------------------------------- emulator instruction

// C (M x N f32) op= A (M x 2Kq bf16) . B (Kq x 2N bf16), the SDM's Operation written out.
void dpbf16_loop(const uint16_t* A, const uint16_t* B, float* C, int M, int Kq, int N) {
    const auto f = [](uint16_t h) { return daz(bf16_to_fp32(h)); };
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            float l0 = 0, l1 = 0;
            for (int k = 0; k < Kq; ++k) {
                l0 = daz(std::fma(f(A[m * 32 + 2 * k]), f(B[k * 32 + 2 * n]), l0));
                l1 = daz(std::fma(f(A[m * 32 + 2 * k + 1]), f(B[k * 32 + 2 * n + 1]), l1));
            }
            C[m * 16 + n] = daz(daz(C[m * 16 + n]) + daz(l0 + l1));
        }
}

TEST(AmxEmulatorBf16, DotProductMatchesTheSdmLoop) {
    Rng rng(fresh_seed());
    SCOPED_TRACE("seed " + std::to_string(fresh_seed()));
    struct Shape {
        int M, Kq, N;
    };
    for (const Shape sh : {Shape{16, 16, 16}, Shape{16, 8, 16}, Shape{13, 16, 16}, Shape{16, 16, 10}, Shape{1, 1, 1}, Shape{7, 3, 5}})
        for (int rep = 0; rep < 4; ++rep) {
            SCOPED_TRACE("M=" + std::to_string(sh.M) + " Kq=" + std::to_string(sh.Kq) + " N=" + std::to_string(sh.N));
            std::vector<uint16_t> A(16 * 32), B(16 * 32);
            std::vector<float> C0(16 * 16);
            for (auto& v : A) v = random_bf16(rng);
            for (auto& v : B) v = random_bf16(rng);
            for (auto& v : C0) v = bf16_to_fp32(random_bf16(rng)) * 1.5f;  // some denormal accumulators too
            amx::TileConfig cfg;
            cfg.rows[0] = sh.M, cfg.colsb[0] = 4 * sh.N;
            cfg.rows[4] = sh.M, cfg.colsb[4] = 4 * sh.Kq;
            cfg.rows[6] = sh.Kq, cfg.colsb[6] = 4 * sh.N;
            amx::EmuTiles t;
            t.config(cfg);
            t.load<0>(C0.data(), 64);
            t.load<4>(A.data(), 64);
            t.load<6>(B.data(), 64);
            t.dpbf16ps<0, 4, 6>();
            std::vector<float> want = C0, got(16 * 16, 7.0f);
            dpbf16_loop(A.data(), B.data(), want.data(), sh.M, sh.Kq, sh.N);
            t.store<0>(got.data(), 64);
            for (int m = 0; m < 16; ++m)
                for (int n = 0; n < 16; ++n) {
                    if (m < sh.M && n < sh.N) {
                        ASSERT_EQ(0, std::memcmp(&want[m * 16 + n], &got[m * 16 + n], 4)) << "m=" << m << " n=" << n << ": " << want[m * 16 + n] << " vs " << got[m * 16 + n];
                    } else {
                        ASSERT_EQ(7.0f, got[m * 16 + n]) << "store wrote past the configured shape";
                    }
                }
            for (int m = 0; m < 16; ++m)
                for (int b = 0; b < 64; ++b)
                    if (m >= sh.M || b >= 4 * sh.N) {
                        ASSERT_EQ(0, t.bytes(0)[m * 64 + b]) << "m=" << m << " byte " << b;
                    }
        }
}

// One pair row: C[0][0] after TDPBF16PS of A row 0 = a (2 * kq bf16) and B column 0 = b.
float one_dot(const std::vector<float>& a, const std::vector<float>& b, float c) {
    const int kq = static_cast<int>(a.size()) / 2;
    std::vector<uint16_t> A(16 * 32, 0), B(16 * 32, 0);
    for (int i = 0; i < 2 * kq; ++i) {
        A[i] = static_cast<uint16_t>(fp32_to_bits(a[i]) >> 16);
        B[(i / 2) * 32 + i % 2] = static_cast<uint16_t>(fp32_to_bits(b[i]) >> 16);
    }
    amx::TileConfig cfg;
    cfg.rows[0] = 1, cfg.colsb[0] = 4;
    cfg.rows[4] = 1, cfg.colsb[4] = static_cast<uint16_t>(4 * kq);
    cfg.rows[6] = static_cast<uint8_t>(kq), cfg.colsb[6] = 4;
    amx::EmuTiles t;
    t.config(cfg);
    t.load<0>(&c, 4);
    t.load<4>(A.data(), 64);
    t.load<6>(B.data(), 64);
    t.dpbf16ps<0, 4, 6>();
    float y = -1;
    t.store<0>(&y, 4);
    return y;
}

TEST(AmxEmulatorBf16, DazFtzAndLaneOrder) {
    const float den = bits_f(0x00010000u), big = std::ldexp(1.0f, 100), tiny = std::ldexp(1.0f, -70), u = std::ldexp(1.0f, -24);
    // DAZ: a denormal bf16 input is zero (the exact product den * 2^100 would be normal)
    EXPECT_EQ(0.0f, one_dot({den, 0}, {big, 0}, 0.0f));
    // FTZ: 2^-70 * 2^-70 = 2^-140 is an f32 denormal: flushed
    EXPECT_EQ(0.0f, one_dot({tiny, 0}, {tiny, 0}, 0.0f));
    // a denormal accumulator reads as zero
    EXPECT_EQ(1.0f, one_dot({1, 0}, {1, 0}, bits_f(1)));
    // the lanes: even 1, odd 2^-24 + 2^-24 = 2^-23, summed before C: 1 + 2^-23 (into C term by
    // term, as the Intrinsics Guide's simplified loop, 1 + 2^-24 + 2^-24 rounds to 1 twice)
    EXPECT_EQ(1.0f + 2 * u, one_dot({1, u, 0, u}, {1, 1, 0, 1}, 0.0f));
    // C + (l0 + l1): 1 + (2^-24 + 2^-24) = 1 + 2^-23, not (1 + 2^-24) + 2^-24 = 1
    EXPECT_EQ(1.0f + 2 * u, one_dot({u, u}, {1, 1}, 1.0f));
}

// ---------------------------------------------------------------- panels

struct Case {
    DType t;
    int64_t N, K, m;
    std::vector<unsigned char> w;   // N rows of K values of type t
    std::vector<double> wv;         // the weights' exact values
    std::vector<float> x;           // [m][K]
    std::vector<uint16_t> P;        // panels
    size_t row_stride() const { return static_cast<size_t>(K) * (t == DType::F32 ? 4 : 2); }
};

Case make_case(Rng& rng, DType t, int64_t N, int64_t K, int64_t m, float xscale) {
    Case c{t, N, K, m, {}, {}, {}, {}};
    c.w.resize(static_cast<size_t>(N) * c.row_stride());
    c.wv.resize(static_cast<size_t>(N * K));
    for (int64_t i = 0; i < N * K; ++i) {
        const float v = rng.normal();
        if (t == DType::F32) {
            std::memcpy(c.w.data() + 4 * i, &v, 4);
            c.wv[i] = v;
        } else {
            const uint16_t h = t == DType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
            std::memcpy(c.w.data() + 2 * i, &h, 2);
            c.wv[i] = t == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
        }
    }
    c.x.resize(static_cast<size_t>(m * K));
    for (auto& v : c.x) v = xscale * rng.normal();
    c.P.resize(bf::bf16_panel_bytes(N, K) / 2);
    bf::bf16_panels_repack(t, c.w.data(), c.row_stride(), N, K, c.P.data());
    return c;
}

uint16_t w_bf16(const Case& c, int64_t n, int64_t k) {
    const size_t i = static_cast<size_t>(n * c.K + k);
    uint16_t h;
    if (c.t == DType::F32) {
        float f;
        std::memcpy(&f, c.w.data() + 4 * i, 4);
        return fp32_to_bf16(f);
    }
    std::memcpy(&h, c.w.data() + 2 * i, 2);
    return c.t == DType::BF16 ? h : fp32_to_bf16(fp16_to_fp32(h));
}

TEST(Bf16Panels, LayoutTailsAndErrors) {
    Rng rng(fresh_seed() + 1);
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
        const Case c = make_case(rng, t, 37, 64, 1, 1.0f);
        ASSERT_EQ(bf::bf16_panel_bytes(37, 64), size_t{3} * 64 * 32);
        for (int64_t n = 0; n < 48; ++n)
            for (int64_t k = 0; k < 64; ++k) {
                const uint16_t got = c.P[(n / 16) * 64 * 16 + (k / 2) * 32 + 2 * (n % 16) + k % 2];
                ASSERT_EQ(n < 37 ? w_bf16(c, n, k) : 0, got) << dtype_name(t) << " n=" << n << " k=" << k;
                if (t == DType::BF16 && n < 37) {
                    uint16_t h;
                    std::memcpy(&h, c.w.data() + 2 * (n * 64 + k), 2);
                    ASSERT_EQ(h, got) << "BF16 weights are copied, not rounded";
                }
            }
    }
    std::vector<uint16_t> out(bf::bf16_panel_bytes(16, 64));
    std::vector<float> w(16 * 64, 1.0f);
    EXPECT_THROW(bf::bf16_panels_repack(DType::F32, w.data(), 48 * 4, 16, 48, out.data()), Error);
    EXPECT_THROW(bf::bf16_panels_repack(DType::Q8_0, w.data(), 64 * 4, 16, 64, out.data()), Error);
    EXPECT_TRUE(bf::bf16_panels_supported(DType::BF16));
    EXPECT_FALSE(bf::bf16_panels_supported(DType::Q8_0));
}

// round_rows_bf16 (AVX512-BF16 where the CPU has it) against fp32_to_bf16: equal bits on normal
// values, ties, zeros, infinities and NaNs; f32 denormals may become a zero of their sign.
TEST(Bf16Panels, ActivationRoundingMatchesScalar) {
    Rng rng(fresh_seed() + 4);
    const int64_t m = 5, K = 96, ldx = 100;
    std::vector<float> x(static_cast<size_t>(m * ldx));
    for (size_t i = 0; i < x.size(); ++i) {
        const uint32_t b = static_cast<uint32_t>(rng.next());
        switch (i % 8) {
            case 0: x[i] = rng.normal(); break;
            case 1: x[i] = bits_f((b & 0xffff0000u) | 0x8000u); break;  // a tie
            case 2: x[i] = bits_f((b & 0x807f0000u) | (b & 0xffffu)); break;  // denormal (exponent 0)
            case 3: x[i] = bits_f(b); break;  // anything (NaNs, infinities too)
            case 4: x[i] = i % 16 == 4 ? -0.0f : std::numeric_limits<float>::infinity(); break;
            default: x[i] = bits_f(b & 0xbfffffffu); break;  // finite
        }
    }
    std::vector<uint16_t> v(static_cast<size_t>(m * K)), s(v.size());
    bf::round_rows_bf16(x.data(), ldx, m, K, v.data());
    bf::round_rows_bf16_scalar(x.data(), ldx, m, K, s.data());
    for (int64_t r = 0; r < m; ++r)
        for (int64_t k = 0; k < K; ++k) {
            const float f = x[r * ldx + k];
            const uint16_t a = v[r * K + k], b = s[r * K + k];
            if (std::fpclassify(f) == FP_SUBNORMAL) {
                ASSERT_TRUE(a == b || a == (b & 0x8000u)) << std::hex << fp32_to_bits(f) << ": " << a << " vs " << b;
            } else {
                ASSERT_EQ(a, b) << std::hex << "x bits " << fp32_to_bits(f);
            }
        }
    EXPECT_THROW(bf::round_rows_bf16(x.data(), ldx, m, 48, v.data()), Error);
}

// ---------------------------------------------------------------- the kernel

// The kernel's order, scalar: per K step of 32, lanes l0 / l1 over the 16 pairs (FMA chains from 0),
// C = C + (l0 + l1); DAZ / FTZ on every step as the instruction.
float model_dot(const Case& c, int64_t r, int64_t n) {
    float C = 0;
    for (int64_t s = 0; s < c.K; s += 32) {
        float l[2] = {0, 0};
        for (int64_t kp = 0; kp < 16; ++kp)
            for (int i = 0; i < 2; ++i) {
                const int64_t k = s + 2 * kp + i;
                const float xa = daz(bf16_to_fp32(fp32_to_bf16(c.x[r * c.K + k]))), wb = daz(bf16_to_fp32(w_bf16(c, n, k)));
                l[i] = daz(std::fma(xa, wb, l[i]));
            }
        C = daz(C + daz(l[0] + l[1]));
    }
    return C;
}

using Fn = void (*)(const bf::Bf16PanelMatrix&, const kernels::MatmulArgs&);

// exact: every output's bits must equal the model's (the emulator); else (real tiles, whose
// rounding only the SDM's pseudocode documents) the bound is required and differing bits are counted.
void expect_exact_and_bounded(Fn fn, const char* what, bool exact) {
    Rng rng(fresh_seed() + 2);
    std::printf("%s: seed %llu\n", what, static_cast<unsigned long long>(fresh_seed()));
    int cases = 0;
    double worst = 0;  // max |error| / bound
    int64_t outputs = 0, differ = 0;
    for (DType t : {DType::F32, DType::F16, DType::BF16})
        for (int64_t K : {32, 96, 256})
            for (int64_t m : {1, 15, 16, 17, 40}) {
                const int64_t N = 70;
                const float xscale = m == 17 ? 300.0f : 1.0f;
                SCOPED_TRACE(std::string(what) + " " + dtype_name(t) + " K=" + std::to_string(K) + " m=" + std::to_string(m) + " seed " + std::to_string(fresh_seed()));
                const Case c = make_case(rng, t, N, K, m, xscale);
                const bf::Bf16PanelMatrix pm{c.P.data(), N, K};
                // Bound: x~ = x (1 + d), |d| <= 2^-8 (bf16 RNE: 8 significant bits); w~ = w (1 + e),
                // |e| <= 2^-8 for F32 / F16 weights, e = 0 for BF16 (used as stored). x~ w~ is exact in
                // f32 (8 + 8 significant bits; N(0, 1) samples stay far from under- / overflow). Each
                // product then meets at most 15 lane FMA roundings (the first FMA of a lane adds to 0),
                // the lane sum and K / 32 additions into C: n = K / 32 + 16 roundings of u = 2^-24, so
                // |y - sum x w| <= [(1 + 2^-8)(1 + e) - 1 + g_n (1 + 2^-8)(1 + e)] sum |x w|, g_n = n u / (1 - n u).
                const double u = std::ldexp(1.0, -24), e = t == DType::BF16 ? 0.0 : std::ldexp(1.0, -8);
                const double rr = (1 + std::ldexp(1.0, -8)) * (1 + e), nn = double(K / 32 + 16), g = nn * u / (1 - nn * u);
                for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, N}, {16, N - 1}, {48, 53}, {32, 69}}) {
                    SCOPED_TRACE("columns " + std::to_string(n0) + ".." + std::to_string(n1));
                    const int64_t w = n1 - n0, ldy = w + 3;  // 3 sentinel columns per row
                    std::vector<float> y(static_cast<size_t>(m * ldy), -7.0f);
                    kernels::MatmulArgs a;
                    a.x = c.x.data();
                    a.ldx = K;
                    a.y = y.data();
                    a.ldy = ldy;
                    a.m = m;
                    a.K = K;
                    a.n0 = n0;
                    a.n1 = n1;
                    fn(pm, a);
                    for (int64_t r = 0; r < m; ++r) {
                        for (int64_t n = n0; n < n1; ++n) {
                            const float got = y[r * ldy + n - n0], want = model_dot(c, r, n);
                            if (exact) {
                                ASSERT_EQ(0, std::memcmp(&got, &want, 4)) << "row " << r << " column " << n << ": " << got << " vs model " << want;
                            }
                            ++outputs;
                            differ += std::memcmp(&got, &want, 4) != 0;
                            double ref = 0, mag = 0;
                            for (int64_t k = 0; k < K; ++k) {
                                ref += double(c.x[r * K + k]) * c.wv[n * K + k];
                                mag += std::fabs(double(c.x[r * K + k]) * c.wv[n * K + k]);
                            }
                            const double bound = (rr - 1 + g * rr) * mag, err = std::fabs(double(got) - ref);
                            ASSERT_LE(err, bound) << "row " << r << " column " << n << ": " << got << " vs fp64 " << ref;
                            if (bound > 0) worst = std::max(worst, err / bound);
                        }
                        for (int64_t j = w; j < ldy; ++j) ASSERT_EQ(-7.0f, y[r * ldy + j]) << "wrote past column n1, row " << r;
                    }
                    ++cases;
                }
            }
    std::printf("%s: %d shapes, %lld of %lld outputs bit-identical to the scalar model of the SDM's order; fp64 error at most %.3f of the derived bound\n",
                what, cases, static_cast<long long>(outputs - differ), static_cast<long long>(outputs), worst);
}

TEST(AmxBf16, EmulatedEqualsModelAndIsBounded) { expect_exact_and_bounded(bf::matmul_bf16_amx_emulated, "AMX-BF16 GEMM on the tile emulator", true); }

TEST(AmxBf16, RealTilesEqualModelAndAreBounded) {
    if (!kernels::amx_bf16_usable()) {
        std::cout << "[ absent ] real AMX-BF16 path not tested on this machine: " << kernels::amx_bf16_absent_reason()
                  << " (the emulated kernel is tested above)" << std::endl;
        GTEST_SKIP();
    }
    std::cout << "real AMX-BF16 tiles present: testing matmul_bf16_amx" << std::endl;
    expect_exact_and_bounded(bf::matmul_bf16_amx, "AMX-BF16 GEMM on real tiles", false);
}

TEST(AmxBf16, BadCallsAreOneClearError) {
    Rng rng(fresh_seed() + 3);
    const Case c = make_case(rng, DType::BF16, 32, 64, 3, 1.0f);
    std::vector<float> y(3 * 32);
    const auto expect_error = [&](const bf::Bf16PanelMatrix& w, int64_t K, int64_t n0, int64_t n1, const char* what) {
        kernels::MatmulArgs a;
        a.x = c.x.data(), a.ldx = 64, a.y = y.data(), a.ldy = 32, a.m = 3, a.K = K, a.n0 = n0, a.n1 = n1;
        try {
            bf::matmul_bf16_amx_emulated(w, a);
            ADD_FAILURE() << "no error for " << what;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("[kernels]"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    };
    const bf::Bf16PanelMatrix pm{c.P.data(), 32, 64};
    expect_error(pm, 64, 8, 32, "multiple of 16");
    expect_error(pm, 64, 0, 33, "must lie in the matrix");
    expect_error(pm, 32, 0, 32, "K = 32");
    expect_error(bf::Bf16PanelMatrix{c.P.data(), 32, 48}, 48, 0, 32, "multiple of 32");
    EXPECT_EQ(kernels::amx_bf16_usable(), kernels::amx_bf16_absent_reason()[0] == '\0');
    if (!kernels::amx_usable()) {
        EXPECT_FALSE(kernels::amx_bf16_usable());
    }
}

// ---------------------------------------------------------------- selection

TEST(AmxBf16, EnvVariable) {
    const char* old_b = std::getenv("MOE_AMX_BF16");
    const char* old_i = std::getenv("MOE_FORCE_ISA");
    const std::string saved_b = old_b ? old_b : "", saved_i = old_i ? old_i : "";
    unsetenv("MOE_FORCE_ISA");
    const auto expect_error = [](const char* what) {
        try {
            kernels::CpuKernels::from_env();
            ADD_FAILURE() << "no error for " << what;
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find("[kernels]"), std::string::npos) << msg;
            EXPECT_NE(msg.find(what), std::string::npos) << msg;
        }
    };
    unsetenv("MOE_AMX_BF16");
    EXPECT_FALSE(kernels::CpuKernels::from_env().amx_bf16());
    setenv("MOE_AMX_BF16", "0", 1);
    EXPECT_FALSE(kernels::CpuKernels::from_env().amx_bf16());
    setenv("MOE_AMX_BF16", "yes", 1);
    expect_error("MOE_AMX_BF16='yes' is not 0 or 1");
    setenv("MOE_AMX_BF16", "1", 1);
    if (kernels::amx_bf16_usable()) {
        EXPECT_TRUE(kernels::CpuKernels::from_env().amx_bf16());
        setenv("MOE_FORCE_ISA", "avx2", 1);
        expect_error("runs on the avx512 path");
    } else {
        std::cout << "[ absent ] AMX-BF16 not usable here (" << kernels::amx_bf16_absent_reason() << "): MOE_AMX_BF16=1 must be one clear error" << std::endl;
        expect_error("MOE_AMX_BF16=1: AMX-BF16 is not usable here");
        expect_error(kernels::amx_bf16_absent_reason());
        EXPECT_THROW(kernels::CpuKernels(kernels::Isa::Avx512, false, true), Error);
    }
    EXPECT_THROW(kernels::CpuKernels(kernels::Isa::Scalar, false, true), Error);
    if (old_b) setenv("MOE_AMX_BF16", saved_b.c_str(), 1);
    else unsetenv("MOE_AMX_BF16");
    if (old_i) setenv("MOE_FORCE_ISA", saved_i.c_str(), 1);
    else unsetenv("MOE_FORCE_ISA");
}

}  // namespace
}  // namespace moe
