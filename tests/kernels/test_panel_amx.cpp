// The AMX-INT8 panel GEMM (kernels/cpu/qmatmul_panel_amx.h) and its tile emulator (amx_tiles.h):
//  - each emulated tile instruction (TDPBSUD / TDPBUSD / TDPBSSD / TDPBUUD, loads with fewer rows
//    or bytes, stores, zero) against a plain loop on random bytes, and shapes that do not chain
//    are an error;
//  - the kernel on the emulator gives exactly the bits of panel_gemm_avx512 and of the scalar
//    path, on random panels and activations, for m = 1, 15, 16, 17, 40 (token groups of 16 and
//    zero-padded tails), column ranges with tails (nc < 16) starting at later panels, K 256 and 2048
//    (Q8_0, Q4_0, Q5_0 and MXFP4 also 32, 64, 96 and 2880: K % 256 != 0, one to three blocks), all nine
//    AMX types;
//  - the same with the next-panel prefetch off (AmxGemmOptions; fewer shapes);
//  - the same on real AMX tiles where this CPU and kernel allow them, else a printed "absent" line;
//    (Q4_K, Q5_K and Q6_K run the kernels with the scales folded into the tiles,
//    qmatmul_panel_amx_folded.cpp);
//  - MOE_FORCE_ISA=amx (every AMX type on tiles; one clear error where AMX is not usable), avx512
//    (AMX off), and the default (only the panel_amx_default types on tiles).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_amx.h"
#include "kernels/cpu/qmatmul_panel_gemm.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/panel_case_util.h"
#include "kernels/ref/quant_random.h"
#include "kernels/ref/quantize_act.h"

namespace moe {
namespace {

using kernels::Isa;
namespace panel = kernels::panel;
namespace amx = kernels::amx;

// ---------------------------------------------------------------- emulator instructions

// C (M x N int32) += A (M x 4Kq bytes) . B (Kq x 4N bytes), the ISA reference's loop.
void dp_loop(bool sa, bool sb, const uint8_t* A, const uint8_t* B, int32_t* C, int M, int Kq, int N) {
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            int64_t s = C[m * 16 + n];
            for (int k = 0; k < Kq; ++k)
                for (int i = 0; i < 4; ++i) {
                    const uint8_t a = A[m * 64 + 4 * k + i], b = B[k * 64 + 4 * n + i];
                    s += (sa ? int64_t(int8_t(a)) : int64_t(a)) * (sb ? int64_t(int8_t(b)) : int64_t(b));
                }
            C[m * 16 + n] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(s)));
        }
}

TEST(AmxEmulator, DotProductsMatchPlainLoops) {
    Rng rng(0xa3c5);
    struct Shape {
        int M, Kq, N;
    };
    for (const Shape sh : {Shape{16, 16, 16}, Shape{16, 8, 16}, Shape{16, 4, 16}, Shape{13, 8, 16}, Shape{16, 8, 10}, Shape{1, 16, 1}, Shape{7, 3, 5}})
        for (int op = 0; op < 4; ++op) {
            SCOPED_TRACE("M=" + std::to_string(sh.M) + " Kq=" + std::to_string(sh.Kq) + " N=" + std::to_string(sh.N) + " op " + std::to_string(op));
            // random bytes everywhere (also past the configured rows / bytes: loads must ignore them)
            std::vector<uint8_t> A(16 * 64), B(16 * 64);
            std::vector<int32_t> C0(16 * 16);
            for (auto& v : A) v = static_cast<uint8_t>(rng.next());
            for (auto& v : B) v = static_cast<uint8_t>(rng.next());
            for (auto& v : C0) v = static_cast<int32_t>(rng.next());
            amx::TileConfig cfg;
            cfg.rows[0] = sh.M, cfg.colsb[0] = 4 * sh.N;
            cfg.rows[4] = sh.M, cfg.colsb[4] = 4 * sh.Kq;
            cfg.rows[6] = sh.Kq, cfg.colsb[6] = 4 * sh.N;
            amx::EmuTiles t;
            t.config(cfg);
            t.load<0>(C0.data(), 64);
            t.load<4>(A.data(), 64);
            t.load<6>(B.data(), 64);
            const bool sa = op == 0 || op == 2, sb = op == 1 || op == 2;
            if (op == 0) t.dpbsud<0, 4, 6>();
            if (op == 1) t.dpbusd<0, 4, 6>();
            if (op == 2) t.dpbssd<0, 4, 6>();
            if (op == 3) t.dpbuud<0, 4, 6>();
            std::vector<int32_t> want = C0, got(16 * 16, 0x5a5a5a5a);
            dp_loop(sa, sb, A.data(), B.data(), want.data(), sh.M, sh.Kq, sh.N);
            t.store<0>(got.data(), 64);
            for (int m = 0; m < 16; ++m)
                for (int n = 0; n < 16; ++n) {
                    if (m < sh.M && n < sh.N) {
                        ASSERT_EQ(want[m * 16 + n], got[m * 16 + n]) << "m=" << m << " n=" << n;
                    } else {
                        ASSERT_EQ(0x5a5a5a5a, got[m * 16 + n]) << "store wrote past the configured shape";
                    }
                }
            // the register itself: zero past rows(C) and colsb(C)
            const uint8_t* reg = t.bytes(0);
            for (int m = 0; m < 16; ++m)
                for (int b = 0; b < 64; ++b)
                    if (m >= sh.M || b >= 4 * sh.N) {
                        ASSERT_EQ(0, reg[m * 64 + b]) << "m=" << m << " byte " << b;
                    }
            t.zero<0>();
            for (int b = 0; b < 1024; ++b) ASSERT_EQ(0, t.bytes(0)[b]);
            t.release();
        }
}

TEST(AmxEmulator, LoadsZeroPastTheShapeAndBadShapesAreErrors) {
    amx::EmuTiles t;
    std::vector<uint8_t> src(16 * 100, 0xff);
    EXPECT_THROW(t.load<4>(src.data(), 100), Error);  // unconfigured
    amx::TileConfig cfg;
    cfg.rows[4] = 5, cfg.colsb[4] = 12;
    cfg.rows[0] = 5, cfg.colsb[0] = 64;
    cfg.rows[6] = 4, cfg.colsb[6] = 64;  // colsb(A) / 4 = 3 != rows(B)
    t.config(cfg);
    t.load<4>(src.data(), 100);
    for (int m = 0; m < 16; ++m)
        for (int b = 0; b < 64; ++b) ASSERT_EQ((m < 5 && b < 12) ? 0xff : 0, t.bytes(4)[m * 64 + b]) << m << " " << b;
    EXPECT_THROW((t.dpbsud<0, 4, 6>()), Error);
    EXPECT_THROW(t.load<1>(src.data(), 64), Error);  // tile 1 not configured
    amx::TileConfig bad;
    bad.rows[0] = 17, bad.colsb[0] = 64;
    EXPECT_THROW(t.config(bad), Error);
}

// ---------------------------------------------------------------- the kernel

constexpr DType kTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q3_K, DType::Q2_K, DType::Q5_0, DType::MXFP4};
bool simd_here() { return kernels::isa_supported(Isa::Avx512) && panel::panel_gemv_usable(); }

using testutil::PanelCase;
const auto make_case = testutil::make_panel_case;
const auto args = testutil::panel_case_args;

using GemmFn = void (*)(const panel::PanelMatrix&, const kernels::MatmulArgs&);

// fn against panel_gemm_avx512 and the scalar kernel, bit for bit, on every shape of the brief.
void expect_bit_exact(GemmFn fn, const char* what, bool many) {
    Rng rng(0xa3c6);
    const kernels::CpuKernels scalar(Isa::Scalar);
    int cases = 0;
    std::string per_type;
    for (DType t : kTypes) {
        const int cases0 = cases;
        for (int64_t K : {256, 2048, 96, 2880, 32, 64})
            for (int64_t m : {1, 15, 16, 17, 40, 100})
                for (int xcase = 0; xcase < 2; ++xcase) {
                    if (xcase == 1 && m != 17) continue;  // activations all at +-max: one shape per K
                    if (m == 100 && K != 256 && K != 2048) continue;  // 4-7 row blocks: the pipelined loops' longer schedules
                    if (K % 256 != 0 && panel::panel_k_step(t) != 32) continue;  // Q8_0, Q4_0: any K % 32 == 0 (a short last super-block)
                    if (!many && K == 2880 && m != 40) continue;
                    if (!many && K == 2048 && m != 40) continue;
                    const int64_t N = 70;
                    SCOPED_TRACE(std::string(what) + " " + dtype_name(t) + " K=" + std::to_string(K) + " m=" + std::to_string(m) + " x case " + std::to_string(xcase));
                    const PanelCase c = make_case(rng, t, N, K, m, xcase);
                    const panel::PanelMatrix pm{t, c.P.data(), N, K};
                    // whole, from a later panel with a tail, one partial panel, one panel pair + tail
                    for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, N}, {16, N - 1}, {48, 53}, {32, 69}}) {
                        SCOPED_TRACE("columns " + std::to_string(n0) + ".." + std::to_string(n1));
                        std::vector<float> ys, yv, ye, yu;
                        scalar.matmul(t, "w")(args(c, ys, n0, n1, true));
                        panel::panel_gemm_avx512(pm, args(c, yv, n0, n1, true));
                        fn(pm, args(c, ye, n0, n1, true));
                        fn(pm, args(c, yu, n0, n1, false));  // quantizes x itself
                        ASSERT_EQ(0, std::memcmp(ys.data(), yv.data(), ys.size() * sizeof(float))) << "VNNI panel GEMM vs scalar path";
                        for (size_t i = 0; i < ys.size(); ++i) {
                            ASSERT_EQ(0, std::memcmp(&yv[i], &ye[i], sizeof(float)))
                                << "row " << i / (n1 - n0) << " column " << n0 + int64_t(i % (n1 - n0)) << ": " << yv[i] << " vs " << ye[i];
                            ASSERT_EQ(0, std::memcmp(&yv[i], &yu[i], sizeof(float))) << "unprepared, i=" << i;
                        }
                        ++cases;
                    }
                }
        per_type += std::string(per_type.empty() ? "" : ", ") + dtype_name(t) + " " + std::to_string(cases - cases0);
    }
    std::printf("%s: %d shapes bit-identical to the VNNI panel GEMM and the scalar path (%s)\n", what, cases, per_type.c_str());
}

TEST(PanelAmx, EmulatedEqualsVnniAndScalarBitForBit) {
    if (!simd_here()) {
        std::cout << "note: no AVX-512 VNNI here: the panel GEMMs (VNNI and AMX) are never used on this CPU; nothing to compare" << std::endl;
        GTEST_SKIP();
    }
    expect_bit_exact(panel::panel_gemm_amx_emulated, "AMX kernel on the tile emulator", true);
    // The next-panel prefetch (AmxGemmOptions) requests addresses only: off, the same bits.
    expect_bit_exact([](const panel::PanelMatrix& w, const kernels::MatmulArgs& a) { panel::panel_gemm_amx_emulated(w, a, {false}); },
                     "AMX kernel on the tile emulator, no next-panel prefetch", false);
}

TEST(PanelAmx, RealTilesEqualVnniAndScalarBitForBit) {
    if (!kernels::amx_usable()) {
        std::cout << "[ absent ] real-AMX path not tested on this machine: " << kernels::amx_absent_reason()
                  << " (the emulated kernel is tested above)" << std::endl;
        GTEST_SKIP();
    }
    ASSERT_TRUE(simd_here()) << "a CPU with AMX has AVX-512 VNNI";
    std::cout << "real AMX tiles present: testing panel_gemm_amx" << std::endl;
    expect_bit_exact(panel::panel_gemm_amx, "AMX kernel on real tiles", true);
    expect_bit_exact([](const panel::PanelMatrix& w, const kernels::MatmulArgs& a) { panel::panel_gemm_amx(w, a, {false}); },
                     "AMX kernel on real tiles, no next-panel prefetch", false);
}

TEST(PanelAmx, BadCallsAreOneClearError) {
    if (!simd_here()) GTEST_SKIP() << "no AVX-512 VNNI here: the panel GEMMs are never called";
    Rng rng(0xa3c7);
    const PanelCase c = make_case(rng, DType::Q8_0, 32, 512, 3, 0);
    const panel::PanelMatrix pm{DType::Q8_0, c.P.data(), 32, 512};
    const auto expect_error = [&](const kernels::MatmulArgs& a, const panel::PanelMatrix& w, const char* what) {
        try {
            panel::panel_gemm_amx_emulated(w, a);
            ADD_FAILURE() << "no error for " << what;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("[kernels]"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    };
    std::vector<float> y;
    expect_error(args(c, y, 8, 32, true), pm, "multiple of 16");
    expect_error(args(c, y, 0, 33, true), pm, "must lie in the matrix");
    kernels::MatmulArgs a = args(c, y, 0, 32, true);
    a.K = 256;
    expect_error(a, pm, "K = 256");
    panel::PanelMatrix none = pm;
    none.type = DType::Q4_1;  // no panel layout, so no AMX kernel either
    expect_error(args(c, y, 0, 32, true), none, dtype_name(DType::Q4_1));
    EXPECT_FALSE(panel::panel_amx_supported(DType::Q4_1));
    EXPECT_FALSE(panel::panel_amx_supported(DType::IQ4_XS));
    for (DType t : kTypes) EXPECT_TRUE(panel::panel_amx_supported(t)) << dtype_name(t);
}

// ---------------------------------------------------------------- selection

TEST(PanelAmx, ForceIsaAmx) {
    const char* old = std::getenv("MOE_FORCE_ISA");
    const std::string saved = old ? old : "";
    setenv("MOE_FORCE_ISA", "amx", 1);
    if (kernels::amx_usable()) {
        const kernels::CpuKernels k = kernels::CpuKernels::from_env();
        EXPECT_TRUE(k.amx());
        EXPECT_EQ(k.isa(), Isa::Avx512);
        EXPECT_TRUE(k.matmul(DType::Q8_0, "w").amx);
    } else {
        std::cout << "[ absent ] AMX not usable here (" << kernels::amx_absent_reason() << "): MOE_FORCE_ISA=amx must be one clear error" << std::endl;
        try {
            kernels::CpuKernels::from_env();
            ADD_FAILURE() << "MOE_FORCE_ISA=amx accepted without AMX";
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find("[kernels]"), std::string::npos) << msg;
            EXPECT_NE(msg.find("MOE_FORCE_ISA=amx"), std::string::npos) << msg;
            EXPECT_NE(msg.find(kernels::amx_absent_reason()), std::string::npos) << msg;
        }
        EXPECT_THROW(kernels::CpuKernels(Isa::Avx512, true), Error);
    }
    if (kernels::isa_supported(Isa::Avx512)) {
        setenv("MOE_FORCE_ISA", "avx512", 1);
        const kernels::CpuKernels k = kernels::CpuKernels::from_env();
        EXPECT_FALSE(k.amx());
        EXPECT_FALSE(k.matmul(DType::Q8_0, "w").amx);
    }
    EXPECT_THROW(kernels::CpuKernels(Isa::Scalar, true), Error);
    unsetenv("MOE_FORCE_ISA");
    const kernels::CpuKernels d = kernels::CpuKernels::from_env();
    EXPECT_EQ(d.amx(), d.isa() == Isa::Avx512 && kernels::amx_usable());
    // the default puts only the panel_amx_default types on tiles; MOE_FORCE_ISA=amx every AMX type
    for (DType t : kTypes) EXPECT_EQ(d.matmul(t, "w").amx, d.amx() && kernels::panel::panel_amx_default(t)) << dtype_name(t);
    EXPECT_TRUE(kernels::panel::panel_amx_default(DType::Q4_K));
    EXPECT_TRUE(kernels::panel::panel_amx_default(DType::Q5_K));
    EXPECT_TRUE(kernels::panel::panel_amx_default(DType::Q6_K));
    EXPECT_TRUE(kernels::panel::panel_amx_default(DType::Q8_0));
    EXPECT_TRUE(kernels::panel::panel_amx_default(DType::Q4_0));
    EXPECT_TRUE(kernels::panel::panel_amx_default(DType::Q5_0));
    EXPECT_TRUE(kernels::panel::panel_amx_default(DType::MXFP4));
    for (DType t : {DType::Q3_K, DType::Q2_K})
        EXPECT_FALSE(kernels::panel::panel_amx_default(t)) << dtype_name(t);  // not measured faster
    if (kernels::amx_usable()) {
        setenv("MOE_FORCE_ISA", "amx", 1);
        const kernels::CpuKernels f = kernels::CpuKernels::from_env();
        for (DType t : kTypes) EXPECT_TRUE(f.matmul(t, "w").amx) << dtype_name(t);
        unsetenv("MOE_FORCE_ISA");
    }
    if (old) setenv("MOE_FORCE_ISA", saved.c_str(), 1);
    EXPECT_EQ(kernels::amx_usable(), kernels::amx_absent_reason()[0] == '\0');
}

}  // namespace
}  // namespace moe
