// The prefill GEMM over the Q4_K / Q3_K / Q2_K / Q6_K / Q8_0 / Q4_0 / Q5_K / Q5_0 / MXFP4 panel layouts (kernels/cpu/qmatmul_panel_gemm.h): on random valid
// blocks and fresh activations (random normal, and all at +-max), for batch sizes around the
// kernel's 4-row blocks, column ranges starting at later panels and panels at 64-byte aligned or
// misaligned addresses (Q8_0 reads aligned quads in place, copies the others), Q8_0 / Q4_0 also at K %
// 256 != 0 (K = 32, 96, 1408, 2880), it gives exactly the bits of
// the scalar path (the reference chain, qmatmul_generic.cpp) and of the engine's AVX-512 block
// kernel, with or without prepared activations; bad calls are one clear error.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
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

constexpr DType kTypes[] = {DType::Q4_K, DType::Q3_K, DType::Q2_K, DType::Q6_K, DType::Q8_0, DType::Q4_0, DType::Q5_K, DType::Q5_0, DType::MXFP4};
// Whole super-blocks; the types whose panels step by 32-value blocks (Q8_0, Q4_0, Q5_0, MXFP4) also 1 and 3
// blocks, V2-Lite's K = 1408 and gpt-oss's 2880 (a tail of K / 32 % 8 blocks after whole groups of 8).
std::vector<int64_t> ks(DType t) {
    if (panel::panel_k_step(t) == 32) return {256, 1024, 2048, 32, 96, 1408, 2880};
    return {256, 1024, 2048};
}
bool simd_here() {
    bool avx512 = false;
    for (Isa isa : kernels::supported_isas()) avx512 |= isa == Isa::Avx512;
    return avx512 && panel::panel_gemv_usable();
}

using testutil::PanelCase;
const auto make_case = testutil::make_panel_case;
const auto args = testutil::panel_case_args;

TEST(PanelGemm, EqualsTheBlockKernelsBitForBit) {
    if (!simd_here()) {
        std::printf("note: no AVX-512 VNNI + GFNI here: the panel GEMM is not used on this CPU (repack_expert_panels makes no panels); nothing to compare\n");
        GTEST_SKIP();
    }
    Rng rng(0x9e33a1);
    const kernels::CpuKernels scalar(Isa::Scalar), fast(Isa::Avx512);
    for (DType t : kTypes)
    for (int64_t K : ks(t))
        for (int64_t N : {16, 48, 70})
            for (int64_t m : {3, 4, 7, 17, 64})
                for (int xcase = 0; xcase < 2; ++xcase) {
                    if (xcase == 1 && m > 4) continue;  // the saturated case needs one shape per K, N
                    // Q8_0 / Q4_0 panels take any K % 32 == 0 (K = 96: an odd block count, so a
                    // panel is not a multiple of 64 bytes and Q8_0's quads are copied, not read in place)
                    if (K % 256 != 0 && panel::panel_k_step(t) != 32) continue;
                    SCOPED_TRACE(std::string(dtype_name(t)) + " K=" + std::to_string(K) + " N=" + std::to_string(N) + " m=" + std::to_string(m) + " x case " + std::to_string(xcase));
                    const PanelCase c = make_case(rng, t, N, K, m, xcase);
                    const panel::PanelMatrix pm{t, c.P.data(), N, K};
                    // the panels again at a 64-byte aligned address and 16 bytes past one
                    const size_t span = (c.P.size() + 63) / 64 * 64 + 64;
                    std::vector<uint8_t> buf(2 * span + 64);
                    uint8_t* al = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
                    uint8_t* mis = al + span + 16;
                    std::memcpy(al, c.P.data(), c.P.size());
                    std::memcpy(mis, c.P.data(), c.P.size());
                    const panel::PanelMatrix pa{t, al, N, K}, pu{t, mis, N, K};
                    for (int64_t n0 : {int64_t{0}, int64_t{16}}) {
                        if (n0 >= N) continue;
                        const int64_t n1 = n0 == 0 ? N : N - 1;
                        std::vector<float> ys, yb, yp, yq, ya, yu;
                        scalar.matmul(t, "w")(args(c, ys, n0, n1, true));
                        fast.matmul(t, "w")(args(c, yb, n0, n1, true));
                        ASSERT_EQ(0, std::memcmp(ys.data(), yb.data(), ys.size() * sizeof(float))) << "block kernel vs scalar path";
                        panel::panel_gemm_avx512(pm, args(c, yp, n0, n1, true));
                        panel::panel_gemm_avx512(pm, args(c, yq, n0, n1, false));  // quantizes x itself
                        panel::panel_gemm_avx512(pa, args(c, ya, n0, n1, true));
                        panel::panel_gemm_avx512(pu, args(c, yu, n0, n1, true));
                        for (size_t i = 0; i < ys.size(); ++i) {
                            ASSERT_EQ(0, std::memcmp(&ys[i], &yp[i], sizeof(float))) << "i=" << i << " " << ys[i] << " vs " << yp[i];
                            ASSERT_EQ(0, std::memcmp(&ys[i], &yq[i], sizeof(float))) << "unprepared, i=" << i;
                            ASSERT_EQ(0, std::memcmp(&ys[i], &ya[i], sizeof(float))) << "aligned panels, i=" << i;
                            ASSERT_EQ(0, std::memcmp(&ys[i], &yu[i], sizeof(float))) << "misaligned panels, i=" << i;
                        }
                    }
                }
}

// panel_matmul, the engine's entry: a call of more than 256 rows runs as parts of ~128 rows
// (multiples of 32), and on an AMX machine a call with fewer rows than the type's
// panel_amx_min_rows takes the VNNI GEMM. Neither may change a bit: against the scalar path over the
// whole call, with and without prepared rows, on VNNI and (where the CPU has them) on tiles.
TEST(PanelGemm, PanelMatmulPartsAndSmallCallsKeepTheBits) {
    for (int64_t m : {1, 31, 256})
        EXPECT_EQ(panel::panel_gemm_row_chunk(m), m);
    for (int64_t m : {257, 300, 512, 1000, 4096}) {
        const int64_t c = panel::panel_gemm_row_chunk(m), parts = (m + c - 1) / c;
        EXPECT_EQ(c % 32, 0) << m;
        EXPECT_GE(c, 96) << m;
        EXPECT_LE(c, 128) << m;
        EXPECT_LE(parts, (m + 95) / 96) << m;  // parts of at least 96 rows but the last
    }
    if (!simd_here()) GTEST_SKIP() << "no AVX-512 VNNI + GFNI here: panel_matmul is never called";
    if (!kernels::amx_usable()) std::printf("[ absent ] AMX not usable here (%s): only the VNNI path is checked\n", kernels::amx_absent_reason());
    Rng rng(0x9e33a3);
    const kernels::CpuKernels scalar(Isa::Scalar);
    for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q5_K, DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::MXFP4})
        for (int64_t m : {int64_t{5}, panel::panel_amx_min_rows(t) - 1, int64_t{300}}) {
            if (m < 3) continue;
            SCOPED_TRACE(std::string(dtype_name(t)) + " m=" + std::to_string(m));
            const int64_t N = 48, K = 256;
            const PanelCase c = make_case(rng, t, N, K, m, 0);
            const panel::PanelMatrix pm{t, c.P.data(), N, K};
            std::vector<float> ys, yv, yu, ya;
            scalar.matmul(t, "w")(args(c, ys, 16, N, true));
            ASSERT_TRUE(panel::panel_matmul(pm, args(c, yv, 16, N, true), true, false));
            ASSERT_TRUE(panel::panel_matmul(pm, args(c, yu, 16, N, false), true, false));  // quantizes each part's x itself
            ASSERT_EQ(0, std::memcmp(ys.data(), yv.data(), ys.size() * sizeof(float))) << "VNNI, prepared rows";
            ASSERT_EQ(0, std::memcmp(ys.data(), yu.data(), ys.size() * sizeof(float))) << "VNNI, unprepared rows";
            if (kernels::amx_usable()) {
                ASSERT_TRUE(panel::panel_matmul(pm, args(c, ya, 16, N, true), true, true));
                ASSERT_EQ(0, std::memcmp(ys.data(), ya.data(), ys.size() * sizeof(float))) << "AMX";
            }
        }
}

// Q4_K's super-block chain runs as two f32 FMA halves (PanelQ4K::kF32Halves), exact while each
// half's partial sums stay below 2^24. At the bound: every level 15, every scale and min 63 and
// activations near +max (levels 114..127, so the sums are odd, not just multiples of a power of
// two) give granule sums near 32 x 15 x 127 and super-block sums near 29 M, past 2^24, where one f32
// chain over all 8 granules would round. The bits must still be the scalar path's.
TEST(PanelGemm, Q4KChainIsExactAtItsLargestSums) {
    if (!simd_here()) GTEST_SKIP() << "no AVX-512 VNNI + GFNI here: the panel GEMM is never called";
    Rng rng(0x9e33a7);
    const kernels::CpuKernels scalar(Isa::Scalar);
    const int64_t N = 32, K = 2048;
    for (int64_t m : {8, 64}) {  // the nibbles read in place, and split once per panel (SplitNibbles)
        SCOPED_TRACE("m=" + std::to_string(m));
        PanelCase c = make_case(rng, DType::Q4_K, N, K, m, 0);
        for (int64_t b = 0; b < N * K / 256; ++b) {  // d = 1 (fp16 0x3C00), dmin = 0, scales / mins 63, levels 15
            uint8_t* blk = c.w.data() + b * 144;
            blk[0] = 0x00, blk[1] = 0x3C, blk[2] = 0x00, blk[3] = 0x00;
            std::memset(blk + 4, 0xFF, 140);
        }
        kernels::panel::repack_matrix(DType::Q4_K, c.w.data(), c.row_stride(), N, K, c.P.data());
        for (auto& v : c.x) v = 1.0f - 0.1f * static_cast<float>(rng.next() % 1000) / 1000.0f;
        kernels::quantize_act_rows(Isa::Scalar, kernels::act_quant(DType::Q4_K), c.x.data(), K, m, K, c.xq.data(), c.xq_stride);
        std::vector<float> ys, yp;
        scalar.matmul(DType::Q4_K, "w")(args(c, ys, 0, N, true));
        panel::panel_gemm_avx512(panel::PanelMatrix{DType::Q4_K, c.P.data(), N, K}, args(c, yp, 0, N, true));
        for (size_t i = 0; i < ys.size(); ++i)
            ASSERT_EQ(0, std::memcmp(&ys[i], &yp[i], sizeof(float))) << "i=" << i << " " << ys[i] << " vs " << yp[i];
    }
}

TEST(PanelGemm, BadCallsAreOneClearError) {
    if (!simd_here()) GTEST_SKIP() << "no AVX-512 VNNI + GFNI here: the panel GEMM is never called";
    Rng rng(0x9e33a2);
    const PanelCase c = make_case(rng, DType::Q4_K, 32, 512, 3, 0);
    const panel::PanelMatrix pm{DType::Q4_K, c.P.data(), 32, 512};
    const auto expect_error = [&](const kernels::MatmulArgs& a, const panel::PanelMatrix& w, const char* what) {
        try {
            panel::panel_gemm_avx512(w, a);
            ADD_FAILURE() << "no error for " << what;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("[kernels]"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    };
    std::vector<float> y;
    expect_error(args(c, y, 8, 32, true), pm, "multiple of 16");     // a range not at a panel start
    expect_error(args(c, y, 0, 33, true), pm, "must lie in the matrix");
    kernels::MatmulArgs a = args(c, y, 0, 32, true);
    a.K = 256;
    expect_error(a, pm, "K = 256");
    panel::PanelMatrix q5 = pm;
    q5.type = DType::Q5_1;
    expect_error(args(c, y, 0, 32, true), q5, "q5_1");
    // Q4_0 / Q5_K / Q5_0 / MXFP4: the same range and K checks
    for (DType t : {DType::Q4_0, DType::Q5_K, DType::Q5_0, DType::MXFP4}) {
        SCOPED_TRACE(dtype_name(t));
        const PanelCase c4 = make_case(rng, t, 32, 512, 3, 0);
        const panel::PanelMatrix p4{t, c4.P.data(), 32, 512};
        expect_error(args(c4, y, 8, 32, true), p4, "multiple of 16");
        expect_error(args(c4, y, 0, 33, true), p4, "must lie in the matrix");
        kernels::MatmulArgs a4 = args(c4, y, 0, 32, true);
        a4.K = 256;
        expect_error(a4, p4, "K = 256");
    }
}

}  // namespace
}  // namespace moe
