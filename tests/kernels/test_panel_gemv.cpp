// The Q3_K / Q2_K / Q4_K / Q6_K / Q8_0 / Q4_0 / Q5_K / Q5_0 / MXFP4 panel layouts (kernels/cpu/qmatmul_panel_layout.h): the
// repack is a bijection on the block bytes, and the decode GEMV over the panels (scalar reference and AVX-512)
// gives exactly the bits of the engine's kernel of the type (m = 1: the AVX-512 decode GEMVs
// gemv16_q3k / gemv16_q2k / gemv16_q4k / gemv16_q6k / gemv16_q80 / gemv16<G45_K<true>> (Q5_K), Q4_0's
// and Q5_0's direct_row, gemv16_mxfp4, and the scalar path; Q5_0 and MXFP4 also at K not a multiple of 256) on random valid blocks, random and saturated activations.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/quant_random.h"
#include "kernels/ref/quantize_act.h"

namespace moe {
namespace {

using kernels::Isa;
namespace panel = kernels::panel;

constexpr DType kTypes[] = {DType::Q3_K, DType::Q2_K, DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::Q4_0, DType::Q5_K, DType::Q5_0, DType::MXFP4};
// The row lengths checked: whole 256-value super-blocks; the types of K step 32 also 1 and 3 blocks,
// V2-Lite's K = 1408 (44 blocks) and gpt-oss's 2880 (90 blocks).
std::vector<int64_t> ks(DType t) {
    if (panel::panel_k_step(t) == 32) return {256, 768, 4096, 32, 96, 1408, 2880};
    return {256, 768, 4096};
}
// Q8_0, Q4_0, Q5_0, MXFP4: panels of any K % 32 == 0 (a tail of K / 32 % 8 blocks after whole groups of 8
// for Q8_0 / Q4_0: gpt-oss 2880 = 11 x 8 + 2, V2-Lite's down 1408 = 5 x 8 + 4).
bool per_block(DType t) { return panel::panel_k_step(t) == 32; }
size_t stride_of(DType t, int64_t K) { return static_cast<size_t>(row_bytes(t, static_cast<uint64_t>(K))); }
// Bytes of 256 values of a row (Q8_0, Q4_0: 8 blocks) and blocks per 256 values.
size_t blk(DType t) {
    return t == DType::Q3_K ? panel::kQ3kBlockBytes : t == DType::Q2_K ? panel::kQ2kBlockBytes : t == DType::Q4_K ? panel::kQ4kBlockBytes
         : t == DType::Q6_K ? panel::kQ6kBlockBytes : t == DType::Q4_0 ? 8 * panel::kQ40BlockBytes : t == DType::Q5_K ? panel::kQ5kBlockBytes
         : t == DType::Q5_0 ? 8 * panel::kQ50BlockBytes : 8 * panel::kQ80BlockBytes;
}
int sb_bytes(DType t) {
    return t == DType::Q3_K ? panel::kQ3kSbPanelBytes : t == DType::Q2_K ? panel::kQ2kSbPanelBytes : t == DType::Q4_K ? panel::kQ4kSbPanelBytes
         : t == DType::Q6_K ? panel::kQ6kSbPanelBytes : t == DType::Q4_0 ? panel::kQ40SbPanelBytes : t == DType::Q5_K ? panel::kQ5kSbPanelBytes
         : t == DType::Q5_0 ? panel::kQ50SbPanelBytes : t == DType::MXFP4 ? 8 * panel::kMxfp4BlockPanelBytes : panel::kQ80SbPanelBytes;
}

std::vector<uint8_t> random_rows(Rng& rng, DType t, int64_t N, int64_t K) {
    std::vector<uint8_t> w(static_cast<size_t>(N) * stride_of(t, K));
    EXPECT_TRUE(ref::fill_random_blocks(t, rng, w.data(), N * (K / static_cast<int64_t>(dtype_info(t).block)), 1.0f));
    return w;
}

bool has_avx512() {
    for (Isa isa : kernels::supported_isas())
        if (isa == Isa::Avx512) return true;
    return false;
}

// Levels, scales and d bytes per super-block of one panel of the region-major types (the header's layouts).
constexpr int kQ2kRegions[3] = {1024, 256, 64}, kQ3kRegions[3] = {1536, 192, 32}, kQ4kRegions[3] = {2048, 192, 64},
              kQ5kRegions[3] = {2560, 192, 64}, kQ6kRegions[3] = {3072, 256, 32};

TEST(PanelGemv, RepackIsABijectionOnTheBlockBytes) {
    Rng rng(0x9a7e1);
    for (DType t : kTypes)
    for (int64_t K : ks(t)) {
        for (int64_t N : {16, 37, 64}) {
            // every byte random (hmask, qs, scales and d are all plain bit fields to the repack; Q8_0: any
            // byte, NaN d included)
            const size_t stride = stride_of(t, K);
            std::vector<uint8_t> w(static_cast<size_t>(N) * stride);
            for (auto& b : w) b = static_cast<uint8_t>(rng.next());
            std::vector<uint8_t> P(panel::panel_matrix_bytes(t, N, K), 0xCD);
            panel::repack_matrix(t, w.data(), stride, N, K, P.data());
            const int sbb = sb_bytes(t);
            ASSERT_EQ(P.size(), static_cast<size_t>((N + 15) / 16 * K * sbb / 256));
            std::vector<uint8_t> back(w.size(), 0x5A);
            panel::unpack_matrix(t, P.data(), N, K, back.data(), stride);
            ASSERT_EQ(0, std::memcmp(w.data(), back.data(), w.size())) << dtype_name(t) << " K=" << K << " N=" << N;
            // the matrix holds each panel's repack_panel bytes: in place (panel-major), or its levels,
            // scales and d moved into the three regions (region-major: the K-quants)
            const size_t pb = panel::panel_bytes(t, K);
            const int64_t np = (N + 15) / 16;
            std::vector<uint8_t> one(pb), got(pb);
            for (int64_t p = 0; p < np; ++p) {
                panel::repack_panel(t, w.data() + static_cast<size_t>(16 * p) * stride, stride, K, static_cast<int>(std::min<int64_t>(16, N - 16 * p)), one.data());
                const uint8_t* g = panel::panel_gather(t, K, P.data(), np, p, got.data());
                ASSERT_EQ(0, std::memcmp(one.data(), g, pb)) << dtype_name(t) << " K=" << K << " N=" << N << " panel " << p;
                const panel::PanelParts pp = panel::panel_parts(t, K, P.data(), np, p);
                if (panel::panel_region_major(t)) {
                    // per super-block: levels, scales, d bytes of one panel (the header's layout)
                    const size_t nsb = static_cast<size_t>(K / 256);
                    const int* r = t == DType::Q2_K ? kQ2kRegions : t == DType::Q3_K ? kQ3kRegions : t == DType::Q4_K ? kQ4kRegions
                                 : t == DType::Q5_K ? kQ5kRegions : t == DType::Q6_K ? kQ6kRegions : nullptr;
                    ASSERT_TRUE(r) << dtype_name(t) << ": region sizes of a new region-major type";
                    const size_t L = nsb * static_cast<size_t>(r[0]), S = nsb * static_cast<size_t>(r[1]), D = nsb * static_cast<size_t>(r[2]);
                    ASSERT_EQ(L + S + D, pb);
                    ASSERT_EQ(pp.lev, P.data() + p * L);
                    ASSERT_EQ(pp.sc, P.data() + np * L + p * S);
                    ASSERT_EQ(pp.d, P.data() + np * (L + S) + p * D);
                } else {
                    ASSERT_EQ(pp.lev, P.data() + p * pb);
                    ASSERT_EQ(g, pp.lev);
                }
            }
        }
    }
}

// Q8_0 / Q4_0 panels are laid out block by block as the header says (levels [K/32][512 or 256],
// then d [K/32][16] f16), for K % 256 != 0 as for K % 256 == 0, where this is byte for byte the
// earlier layout of 256-value super-blocks of 8 blocks.
TEST(PanelGemv, Q80Q40LayoutIsPerBlock) {
    Rng rng(0x51c3);
    for (DType t : {DType::Q8_0, DType::Q4_0})
        for (int64_t K : {96, 512}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " K=" + std::to_string(K));
            const bool q8 = t == DType::Q8_0;
            const int bb = q8 ? panel::kQ80BlockBytes : panel::kQ40BlockBytes, lev = q8 ? 512 : 256;
            const int64_t nb = K / 32;
            const size_t stride = stride_of(t, K);
            std::vector<uint8_t> w(16 * stride), P(panel::panel_bytes(t, K));
            for (auto& b : w) b = static_cast<uint8_t>(rng.next());
            panel::repack_panel(t, w.data(), stride, K, 16, P.data());
            ASSERT_EQ(P.size(), static_cast<size_t>(nb * (lev + 32)));
            for (int c = 0; c < 16; ++c)
                for (int64_t b = 0; b < nb; ++b) {
                    const uint8_t* B = w.data() + c * stride + b * bb;
                    ASSERT_EQ(P[nb * lev + 32 * b + 2 * c], B[0]);
                    ASSERT_EQ(P[nb * lev + 32 * b + 2 * c + 1], B[1]);
                    for (int k = 0; k < 32; ++k) {
                        if (q8) {
                            ASSERT_EQ(P[512 * b + 64 * (k / 4) + 4 * c + k % 4], B[2 + k] ^ 0x80) << "c=" << c << " b=" << b << " k=" << k;
                        } else {
                            const int level = k < 16 ? B[2 + k] & 0xF : B[2 + k - 16] >> 4;
                            const int got = (P[256 * b + 64 * (k / 8) + 4 * c + k % 4] >> (4 * ((k % 8) / 4))) & 0xF;
                            ASSERT_EQ(got, level) << "c=" << c << " b=" << b << " k=" << k;
                        }
                    }
                }
        }
}

// The AVX-512 repack (repack_matrix's fast path for whole Q8_0 / Q4_K / Q6_K / MXFP4 panels) writes exactly the
// scalar repack_panel's bytes, on random bytes, with tight and padded row strides; it declines
// (writing nothing) what it does not cover.
TEST(PanelGemv, Avx512RepackEqualsTheScalarRepack) {
    if (!panel::panel_gemv_usable()) {
        std::printf("[ SKIPPED-PATH ] AVX-512 repack: this CPU lacks AVX-512 VNNI/GFNI; the scalar repack is the only path\n");
        return;
    }
    Rng rng(0x4e9a3);
    for (DType t : {DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::MXFP4})
        for (int64_t K : {256, 2048, 2816, 32, 96, 2880})
            for (size_t pad : {size_t{0}, size_t{7}}) {
                if ((K % 256 != 0 && !per_block(t)) || (t == DType::MXFP4 && K % 256 == 0)) continue;
                const size_t stride = stride_of(t, K) + pad;
                std::vector<uint8_t> w(16 * stride);
                for (auto& b : w) b = static_cast<uint8_t>(rng.next());
                std::vector<uint8_t> fast(panel::panel_bytes(t, K), 0xCD), slow(fast.size(), 0x3C);
                ASSERT_TRUE(panel::repack_panel_avx512(t, w.data(), stride, K, 16, fast.data()));
                panel::repack_panel(t, w.data(), stride, K, 16, slow.data());
                ASSERT_EQ(0, std::memcmp(fast.data(), slow.data(), fast.size())) << dtype_name(t) << " K=" << K << " pad=" << pad;
            }
    std::vector<uint8_t> w(16 * 8 * 34 * 2), out(panel::panel_bytes(DType::Q8_0, 512), 0xCD);
    const std::vector<uint8_t> before = out;
    EXPECT_FALSE(panel::repack_panel_avx512(DType::Q8_0, w.data(), 8 * 34 * 2, 512, 15, out.data()));  // a tail panel
    EXPECT_FALSE(panel::repack_panel_avx512(DType::Q3_K, w.data(), 110, 256, 16, out.data()));         // not covered
    EXPECT_FALSE(panel::repack_panel_avx512(DType::Q8_0, w.data(), 8 * 34 * 2, 48, 16, out.data()));   // not whole blocks
    EXPECT_FALSE(panel::repack_panel_avx512(DType::Q8_0, w.data(), size_t{1} << 28, 512, 16, out.data()));  // offsets past int32
    EXPECT_EQ(before, out);
}

// y of the engine's kernel of type t (isa) for one activation row, prepared once (Q8_K; Q8_0: kActQ8_0).
std::vector<float> engine_gemv(Isa isa, DType t, const std::vector<uint8_t>& w, int64_t N, int64_t K, const std::vector<float>& x,
                               const std::vector<unsigned char>& xq) {
    const kernels::CpuKernels kc(isa);
    const kernels::MatmulKernel& k = kc.matmul(t, "t");
    std::vector<float> y(N, -1.0f);
    kernels::MatmulArgs a;
    a.w = w.data();
    a.w_row_stride = stride_of(t, K);
    a.x = x.data();
    a.ldx = K;
    a.y = y.data();
    a.ldy = N;
    a.m = 1;
    a.K = K;
    a.n0 = 0;
    a.n1 = N;
    a.xq = xq.data();
    a.xq_stride = xq.size();
    k(a);
    return y;
}

TEST(PanelGemv, EqualsTheEngineKernelBitForBit) {
    Rng rng(0x9a7e2);
    const bool simd = has_avx512() && panel::panel_gemv_usable();
    if (!simd) std::printf("note: no AVX-512 VNNI + GFNI here: only the scalar panel GEMV is checked (against the scalar path)\n");
    for (DType t : kTypes)
    for (int64_t K : ks(t)) {
        // 80: halves of 2 + 2 panels, then one; 117: halves of 3 + 3 panels, a whole and a partial one
        for (int64_t N : {16, 37, 64, 80, 117}) {
            const std::vector<uint8_t> w = random_rows(rng, t, N, K);
            std::vector<uint8_t> P(panel::panel_matrix_bytes(t, N, K));
            panel::repack_matrix(t, w.data(), stride_of(t, K), N, K, P.data());
            const panel::PanelMatrix pm{t, P.data(), N, K};
            for (int xcase = 0; xcase < 3; ++xcase) {
                SCOPED_TRACE(std::string(dtype_name(t)) + " K=" + std::to_string(K) + " N=" + std::to_string(N) + " x case " + std::to_string(xcase));
                std::vector<float> x(K);
                // random normal; then every activation at +-max (the Q8_K values +-127: the granule
                // sums at their int16 bound side; Q8_0: |sum| 32 x 127 x 128 per block)
                for (auto& v : x) v = xcase == 0 ? rng.normal() : xcase == 1 ? 1.0f : (rng.next() % 2 ? 1.0f : -1.0f);
                std::vector<unsigned char> xq(ref::act_q8_row_bytes(K));
                ref::quantize_act_q8(x.data(), K, xq.data(), kernels::act_quant(t));  // Q8_K; Q8_0: per 32
                const ref::ActQ8Row xr = ref::act_q8_row(xq.data(), K);
                const std::vector<float> ys = engine_gemv(Isa::Scalar, t, w, N, K, x, xq);
                std::vector<float> yr(N, -2.0f);
                panel::panel_gemv_ref(pm, xr, 0, N, yr.data());
                ASSERT_EQ(0, std::memcmp(ys.data(), yr.data(), N * sizeof(float))) << "scalar panel GEMV vs scalar path";
                if (!simd) continue;
                const std::vector<float> ye = engine_gemv(Isa::Avx512, t, w, N, K, x, xq);
                ASSERT_EQ(0, std::memcmp(ys.data(), ye.data(), N * sizeof(float))) << "engine AVX-512 vs scalar path";
                std::vector<float> yp(N, -3.0f);
                panel::panel_gemv_avx512(pm, xr, 0, N, yp.data());
                for (int64_t n = 0; n < N; ++n) ASSERT_EQ(0, std::memcmp(&ye[n], &yp[n], sizeof(float))) << "n=" << n << " " << ye[n] << " vs " << yp[n];
                // a sub-range starting at a later panel, ending inside the matrix
                if (N > 16) {
                    std::vector<float> ysub(N - 17, -4.0f);
                    panel::panel_gemv_avx512(pm, xr, 16, N - 1, ysub.data());
                    ASSERT_EQ(0, std::memcmp(ye.data() + 16, ysub.data(), ysub.size() * sizeof(float))) << "rows [16, N-1)";
                }
            }
        }
    }
}

// panel_gemv_pair_avx512 (two matrices at once: an expert's gate and up, two experts' down): each
// output equals the matrix's own panel_gemv_avx512 bits (hence the scalar path's), with one shared
// activation row and with two, over whole matrices and sub-ranges ending in a partial panel;
// other types and two shapes are one clear error.
TEST(PanelGemv, PairEqualsEachMatrixAlone) {
    if (!(has_avx512() && panel::panel_gemv_usable())) {
        std::printf("note: no AVX-512 VNNI + GFNI here: the paired panel GEMV is not used, nothing to check\n");
        return;
    }
    Rng rng(0x9a1f5);
    for (DType t : {DType::Q4_K, DType::Q6_K}) {
        ASSERT_TRUE(panel::panel_gemv_pair_supported(t));
        for (int64_t K : {256, 1024})
            for (int64_t N : {16, 53, 96}) {
                SCOPED_TRACE(std::string(dtype_name(t)) + " K=" + std::to_string(K) + " N=" + std::to_string(N));
                std::vector<uint8_t> P[2];
                panel::PanelMatrix pm[2];
                std::vector<unsigned char> xq[2];
                ref::ActQ8Row xr[2];
                for (int j = 0; j < 2; ++j) {
                    const std::vector<uint8_t> w = random_rows(rng, t, N, K);
                    P[j].resize(panel::panel_matrix_bytes(t, N, K));
                    panel::repack_matrix(t, w.data(), stride_of(t, K), N, K, P[j].data());
                    pm[j] = {t, P[j].data(), N, K};
                    std::vector<float> x(K);
                    for (auto& v : x) v = rng.normal();
                    xq[j].resize(ref::act_q8_row_bytes(K));
                    ref::quantize_act_q8(x.data(), K, xq[j].data(), kernels::act_quant(t));
                    xr[j] = ref::act_q8_row(xq[j].data(), K);
                }
                for (bool shared : {true, false})
                    for (const auto& [n0, n1] : {std::pair<int64_t, int64_t>{0, N}, {16, N}, {0, N - 5}}) {
                        if (n1 <= n0) continue;
                        SCOPED_TRACE(std::string(shared ? "one x" : "two x") + " rows " + std::to_string(n0) + ".." + std::to_string(n1));
                        const ref::ActQ8Row* xs[2] = {&xr[0], shared ? &xr[0] : &xr[1]};
                        std::vector<float> want[2], got[2];
                        for (int j = 0; j < 2; ++j) {
                            want[j].assign(static_cast<size_t>(n1 - n0), -1.0f);
                            got[j].assign(static_cast<size_t>(n1 - n0 + 1), -2.0f);  // one past: untouched
                            panel::panel_gemv_avx512(pm[j], *xs[j], n0, n1, want[j].data());
                        }
                        float* const ys[2] = {got[0].data(), got[1].data()};
                        panel::panel_gemv_pair_avx512(pm, xs, n0, n1, ys);
                        for (int j = 0; j < 2; ++j) {
                            ASSERT_EQ(0, std::memcmp(want[j].data(), got[j].data(), want[j].size() * sizeof(float))) << "matrix " << j;
                            EXPECT_EQ(got[j].back(), -2.0f) << "matrix " << j << ": wrote past its rows";
                        }
                        // the second matrix's output depends on its own row (a swapped row would pass the shared case only)
                        if (!shared) {
                            std::vector<float> mine(static_cast<size_t>(n1 - n0));
                            panel::panel_gemv_avx512(pm[1], xr[0], n0, n1, mine.data());
                            EXPECT_NE(0, std::memcmp(mine.data(), got[1].data(), mine.size() * sizeof(float)));
                        }
                    }
            }
    }
    // not pairable: another type, two shapes, a bad range
    EXPECT_FALSE(panel::panel_gemv_pair_supported(DType::Q8_0));
    std::vector<uint8_t> a(panel::panel_matrix_bytes(DType::Q4_K, 32, 256)), b(panel::panel_matrix_bytes(DType::Q4_K, 32, 512)),
        c(panel::panel_matrix_bytes(DType::Q8_0, 32, 256));
    std::vector<unsigned char> xq(ref::act_q8_row_bytes(512), 0);
    const ref::ActQ8Row xr = ref::act_q8_row(xq.data(), 256);
    const ref::ActQ8Row* xs[2] = {&xr, &xr};
    std::vector<float> y0(32), y1(32);
    float* const ys[2] = {y0.data(), y1.data()};
    const panel::PanelMatrix shapes[2] = {{DType::Q4_K, a.data(), 32, 256}, {DType::Q4_K, b.data(), 32, 512}};
    const panel::PanelMatrix types[2] = {{DType::Q8_0, c.data(), 32, 256}, {DType::Q8_0, c.data(), 32, 256}};
    const panel::PanelMatrix ok[2] = {{DType::Q4_K, a.data(), 32, 256}, {DType::Q4_K, a.data(), 32, 256}};
    EXPECT_THROW(panel::panel_gemv_pair_avx512(shapes, xs, 0, 32, ys), Error);
    EXPECT_THROW(panel::panel_gemv_pair_avx512(types, xs, 0, 32, ys), Error);
    EXPECT_THROW(panel::panel_gemv_pair_avx512(ok, xs, 8, 32, ys), Error);
    EXPECT_THROW(panel::panel_gemv_pair_avx512(ok, xs, 0, 33, ys), Error);
}

TEST(PanelGemv, BadShapesAreOneClearError) {
    const DType t = DType::Q3_K;
    const size_t kBlk = blk(t);
    EXPECT_THROW(panel::panel_bytes(t, 300), Error);
    EXPECT_THROW(panel::panel_bytes(t, 0), Error);
    EXPECT_THROW(panel::panel_bytes(DType::Q5_1, 256), Error);
    EXPECT_THROW(panel::panel_bytes(DType::IQ4_XS, 256), Error);
    EXPECT_THROW(panel::panel_bytes(DType::Q4_0, 48), Error);  // Q8_0 / Q4_0: whole blocks of 32
    EXPECT_THROW(panel::panel_bytes(DType::Q8_0, 2888), Error);
    EXPECT_THROW(panel::panel_bytes(DType::Q5_K, 2880), Error);  // the K-quants: whole super-blocks
    EXPECT_EQ(panel::panel_bytes(DType::Q8_0, 2880), size_t{90 * 544});
    EXPECT_EQ(panel::panel_bytes(DType::Q4_0, 32), size_t{288});
    std::vector<uint8_t> w(kBlk * 17), P(panel::panel_matrix_bytes(t, 17, 256));
    EXPECT_THROW(panel::repack_panel(t, w.data(), kBlk, 256, 17, P.data()), Error);
    panel::repack_matrix(t, w.data(), kBlk, 17, 256, P.data());
    const panel::PanelMatrix pm{t, P.data(), 17, 256};
    std::vector<unsigned char> xq(ref::act_q8_row_bytes(256), 0);
    std::vector<float> y(32);
    EXPECT_THROW(panel::panel_gemv_ref(pm, ref::act_q8_row(xq.data(), 256), 1, 17, y.data()), Error);
    EXPECT_THROW(panel::panel_gemv_ref(pm, ref::act_q8_row(xq.data(), 256), 0, 18, y.data()), Error);
    // Q4_K likewise
    const DType t4 = DType::Q4_K;
    EXPECT_THROW(panel::panel_bytes(t4, 384), Error);
    std::vector<uint8_t> w4(panel::kQ4kBlockBytes * 17), P4(panel::panel_matrix_bytes(t4, 17, 256));
    EXPECT_THROW(panel::repack_panel(t4, w4.data(), panel::kQ4kBlockBytes, 256, 17, P4.data()), Error);
    EXPECT_THROW(panel::repack_panel(t4, w4.data(), panel::kQ4kBlockBytes, 256, 0, P4.data()), Error);
    panel::repack_matrix(t4, w4.data(), panel::kQ4kBlockBytes, 17, 256, P4.data());
    const panel::PanelMatrix pm4{t4, P4.data(), 17, 256};
    EXPECT_THROW(panel::panel_gemv_ref(pm4, ref::act_q8_row(xq.data(), 256), 8, 17, y.data()), Error);
    EXPECT_THROW(panel::panel_gemv_ref(pm4, ref::act_q8_row(xq.data(), 256), 16, 18, y.data()), Error);
    if (panel::panel_gemv_usable()) {
        EXPECT_THROW(panel::panel_gemv_avx512(pm4, ref::act_q8_row(xq.data(), 256), 8, 17, y.data()), Error);
        EXPECT_THROW(panel::panel_gemv_avx512(pm4, ref::act_q8_row(xq.data(), 256), 0, 18, y.data()), Error);
    }
    // Q6_K likewise
    const DType t6 = DType::Q6_K;
    EXPECT_THROW(panel::panel_bytes(t6, 128), Error);
    std::vector<uint8_t> w6(panel::kQ6kBlockBytes * 17), P6(panel::panel_matrix_bytes(t6, 17, 256));
    EXPECT_THROW(panel::repack_panel(t6, w6.data(), panel::kQ6kBlockBytes, 256, 17, P6.data()), Error);
    EXPECT_THROW(panel::unpack_panel(t6, P6.data(), 256, 0, w6.data(), panel::kQ6kBlockBytes), Error);
    panel::repack_matrix(t6, w6.data(), panel::kQ6kBlockBytes, 17, 256, P6.data());
    const panel::PanelMatrix pm6{t6, P6.data(), 17, 256};
    EXPECT_THROW(panel::panel_gemv_ref(pm6, ref::act_q8_row(xq.data(), 256), 4, 17, y.data()), Error);
    EXPECT_THROW(panel::panel_gemv_ref(pm6, ref::act_q8_row(xq.data(), 256), 16, 18, y.data()), Error);
    if (panel::panel_gemv_usable()) {
        EXPECT_THROW(panel::panel_gemv_avx512(pm6, ref::act_q8_row(xq.data(), 256), 4, 17, y.data()), Error);
        EXPECT_THROW(panel::panel_gemv_avx512(pm6, ref::act_q8_row(xq.data(), 256), 0, 18, y.data()), Error);
    }
    // Q8_0, Q4_0 and Q5_K likewise
    for (DType t8 : {DType::Q8_0, DType::Q4_0, DType::Q5_K}) {
        SCOPED_TRACE(dtype_name(t8));
        const size_t kB8 = blk(t8);
        const int64_t bad = per_block(t8) ? 400 : 384;  // not a multiple of the type's panel_k_step
        EXPECT_THROW(panel::panel_bytes(t8, per_block(t8) ? 16 : 32), Error);
        EXPECT_THROW(panel::panel_bytes(t8, bad), Error);
        std::vector<uint8_t> w8(kB8 * 17), P8(panel::panel_matrix_bytes(t8, 17, 256));
        EXPECT_THROW(panel::repack_panel(t8, w8.data(), kB8, 256, 17, P8.data()), Error);
        EXPECT_THROW(panel::unpack_panel(t8, P8.data(), 256, 0, w8.data(), kB8), Error);
        EXPECT_THROW(panel::unpack_panel(t8, P8.data(), bad, 16, w8.data(), kB8), Error);
        panel::repack_matrix(t8, w8.data(), kB8, 17, 256, P8.data());
        const panel::PanelMatrix pm8{t8, P8.data(), 17, 256};
        EXPECT_THROW(panel::panel_gemv_ref(pm8, ref::act_q8_row(xq.data(), 256), 4, 17, y.data()), Error);
        EXPECT_THROW(panel::panel_gemv_ref(pm8, ref::act_q8_row(xq.data(), 256), 16, 18, y.data()), Error);
        if (panel::panel_gemv_usable()) {
            EXPECT_THROW(panel::panel_gemv_avx512(pm8, ref::act_q8_row(xq.data(), 256), 4, 17, y.data()), Error);
            EXPECT_THROW(panel::panel_gemv_avx512(pm8, ref::act_q8_row(xq.data(), 256), 0, 18, y.data()), Error);
        }
    }
    // Q5_0 (K step 32) likewise
    {
        const DType t5 = DType::Q5_0;
        EXPECT_THROW(panel::panel_bytes(t5, 48), Error);
        EXPECT_THROW(panel::panel_bytes(t5, 0), Error);
        EXPECT_EQ(panel::panel_bytes(t5, 1408), 44u * 352u);
        std::vector<uint8_t> w5(stride_of(t5, 96) * 17), P5(panel::panel_matrix_bytes(t5, 17, 96));
        EXPECT_THROW(panel::repack_panel(t5, w5.data(), stride_of(t5, 96), 96, 17, P5.data()), Error);
        EXPECT_THROW(panel::repack_panel(t5, w5.data(), stride_of(t5, 96), 80, 16, P5.data()), Error);
        EXPECT_THROW(panel::unpack_panel(t5, P5.data(), 96, 0, w5.data(), stride_of(t5, 96)), Error);
        EXPECT_THROW(panel::unpack_panel(t5, P5.data(), 100, 16, w5.data(), stride_of(t5, 96)), Error);
        panel::repack_matrix(t5, w5.data(), stride_of(t5, 96), 17, 96, P5.data());
        const panel::PanelMatrix pm5{t5, P5.data(), 17, 96};
        std::vector<unsigned char> xq5(ref::act_q8_row_bytes(96), 0);
        EXPECT_THROW(panel::panel_gemv_ref(pm5, ref::act_q8_row(xq5.data(), 96), 4, 17, y.data()), Error);
        EXPECT_THROW(panel::panel_gemv_ref(pm5, ref::act_q8_row(xq5.data(), 96), 16, 18, y.data()), Error);
        if (panel::panel_gemv_usable()) {
            EXPECT_THROW(panel::panel_gemv_avx512(pm5, ref::act_q8_row(xq5.data(), 96), 4, 17, y.data()), Error);
            EXPECT_THROW(panel::panel_gemv_avx512(pm5, ref::act_q8_row(xq5.data(), 96), 0, 18, y.data()), Error);
        }
        try {
            panel::panel_bytes(t5, 48);
            ADD_FAILURE() << "no error for K = 48";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
        }
    }
    // MXFP4: whole blocks of 32 (K = 2880 fine), the same range checks
    {
        const DType tm = DType::MXFP4;
        EXPECT_EQ(panel::panel_k_step(tm), 32);
        EXPECT_EQ(panel::panel_bytes(tm, 2880), size_t{90 * 272});
        EXPECT_THROW(panel::panel_bytes(tm, 48), Error);
        EXPECT_THROW(panel::panel_bytes(tm, 0), Error);
        std::vector<uint8_t> wm(17 * 2 * 17), Pm(panel::panel_matrix_bytes(tm, 17, 64));
        EXPECT_THROW(panel::repack_panel(tm, wm.data(), 34, 64, 17, Pm.data()), Error);
        EXPECT_THROW(panel::unpack_panel(tm, Pm.data(), 64, 0, wm.data(), 34), Error);
        EXPECT_THROW(panel::unpack_panel(tm, Pm.data(), 40, 16, wm.data(), 34), Error);
        panel::repack_matrix(tm, wm.data(), 34, 17, 64, Pm.data());
        const panel::PanelMatrix pmm{tm, Pm.data(), 17, 64};
        std::vector<unsigned char> xq64(ref::act_q8_row_bytes(64), 0);
        EXPECT_THROW(panel::panel_gemv_ref(pmm, ref::act_q8_row(xq64.data(), 64), 4, 17, y.data()), Error);
        EXPECT_THROW(panel::panel_gemv_ref(pmm, ref::act_q8_row(xq64.data(), 64), 16, 18, y.data()), Error);
        if (panel::panel_gemv_usable()) {
            EXPECT_THROW(panel::panel_gemv_avx512(pmm, ref::act_q8_row(xq64.data(), 64), 4, 17, y.data()), Error);
            EXPECT_THROW(panel::panel_gemv_avx512(pmm, ref::act_q8_row(xq64.data(), 64), 0, 18, y.data()), Error);
        }
    }
    try {
        panel::panel_bytes(t, 300);
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("[kernels]"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("multiple of 256"), std::string::npos);
    }
}

}  // namespace
}  // namespace moe
