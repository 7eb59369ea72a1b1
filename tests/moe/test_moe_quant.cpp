// The MoE block with quantized / half-precision expert weights (every int8-kernel type, F16, BF16,
// routed and shared experts) on every ISA path, against the fp64 reference run on the
// dequantized weights (so weight quantization error is not part of the comparison, only what the
// kernels add).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "core/rng.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quant_random.h"
#include "moe_test_util.h"

using namespace moe;
using namespace moe::test;

namespace {

// Quantize `rows` rows of length K of src into bytes; write the dequantized values back into src
// (the reference then sees exactly the weights the kernels read). Types without a quantizer here
// (the IQ family, Q2_K, Q3_K, the legacy fallbacks, ...) get random valid blocks of the row's
// amplitude instead (ref::fill_random_blocks).
std::vector<uint8_t> quantize_inplace(DType t, std::vector<float>& src, int64_t K) {
    const int64_t rows = static_cast<int64_t>(src.size()) / K;
    const uint64_t rb = row_bytes(t, static_cast<uint64_t>(K));
    std::vector<uint8_t> q(rb * static_cast<uint64_t>(rows));
    Rng rng(0x7a11 + static_cast<uint64_t>(t));
    for (int64_t r = 0; r < rows; ++r) {
        if (ref::can_quantize(t)) {
            EXPECT_TRUE(ref::quantize_row(t, src.data() + r * K, q.data() + r * rb, K));
        } else {
            float amax = 0;
            for (int64_t i = 0; i < K; ++i) amax = std::max(amax, std::fabs(src[r * K + i]));
            EXPECT_TRUE(ref::fill_random_blocks(t, rng, q.data() + r * rb, K / dtype_info(t).block, amax));
        }
        ref::dequantize_row(t, q.data() + r * rb, src.data() + r * K, K);
    }
    return q;
}

// NMSE threshold of the int8 kernels against the reference: the activations (x into gate/up, h
// into down) are quantized per 32 values with step d = amax/127, an error of variance d^2/12 per
// value. With amax/rms <= 6 in a group (x is Gaussian; h after SwiGLU is heavier-tailed), that is a
// relative error variance rho <= 36 / (12 * 127^2) = 1.9e-4 per quantized vector, carried 1:1 into
// random-weight dot products. Two quantized stages, SwiGLU's gain (< 2.5 in variance for these
// magnitudes): NMSE <= 2 * 2.5 * 1.9e-4 ~ 1e-3. A wrong decode gives NMSE ~ 1.
constexpr double kInt8Nmse = 1e-3;

struct Case {
    DType t;
    Variant v;
    int64_t T;
};

class MoeQuant : public testing::TestWithParam<Case> {};

TEST_P(MoeQuant, MatchesFp64ReferenceOnDequantizedWeights) {
    const Case c = GetParam();
    const bool kq = dtype_info(c.t).block == 256;
    const int64_t D = kq ? 256 : 96, F = kq ? 512 : 160;
    const int E = 8, k = 2;
    MoeSpec spec = make_spec(c.v, E, k, D, F);
    if (spec.n_shared > 0) spec.n_ff_shared = 2 * F;  // whole blocks (the preset's F + 8 is not)
    TestModel m = make_model(spec, 0x9e7 + static_cast<uint64_t>(c.t) * 31 + static_cast<uint64_t>(c.T));
    const auto gate = quantize_inplace(c.t, m.gate, D);
    const auto up = quantize_inplace(c.t, m.up, D);
    const auto down = quantize_inplace(c.t, m.down, F);
    std::vector<uint8_t> gs, us, ds;
    const int64_t Fs = spec.n_ff_shared;
    if (spec.n_shared > 0) {
        gs = quantize_inplace(c.t, m.gate_sh, D);
        us = quantize_inplace(c.t, m.up_sh, D);
        ds = quantize_inplace(c.t, m.down_sh, Fs);
    }
    const MoeWeights wref = m.views(2);  // f32 = dequantized weights
    MoeWeights wq = wref;
    auto v = [&](const TensorView& like, std::initializer_list<int64_t> shape, const std::vector<uint8_t>& b) {
        return make_view(like.name, c.t, shape, const_cast<uint8_t*>(b.data()));
    };
    wq.gate_exps = v(wref.gate_exps, {D, F, E}, gate);
    wq.up_exps = v(wref.up_exps, {D, F, E}, up);
    wq.down_exps = v(wref.down_exps, {F, D, E}, down);
    if (spec.n_shared > 0) {
        wq.gate_shexp = v(wref.gate_shexp, {D, Fs}, gs);
        wq.up_shexp = v(wref.up_shexp, {D, Fs}, us);
        wq.down_shexp = v(wref.down_shexp, {Fs, D}, ds);
    }
    const std::vector<float> x = random_x(c.T, D, 0x51 + static_cast<uint64_t>(c.T));
    const RefOutput ref = moe_reference(spec, wref, x.data(), c.T);
    std::vector<char> use(static_cast<size_t>(c.T), 1);
    for (int64_t t = 0; t < c.T; ++t) use[static_cast<size_t>(t)] = ref.margin[static_cast<size_t>(t)] >= 1e-4;

    const bool int8 = c.t != DType::F16 && c.t != DType::BF16;
    const double thr = int8 ? kInt8Nmse : nmse_threshold(D, F, k);
    ThreadPool pool(2);
    std::vector<float> first;
    for (kernels::Isa isa : kernels::supported_isas()) {
        SCOPED_TRACE(kernels::isa_name(isa));
        const kernels::CpuKernels kern(isa);
        MoeBlock block(spec, wq, kern, c.T, pool.size());
        std::vector<float> y(static_cast<size_t>(c.T * D), std::nanf(""));
        block.forward(pool, x.data(), c.T, y.data());
        const double e = nmse(y.data(), ref.y.data(), c.T, D, use);
        EXPECT_LT(e, thr) << dtype_name(c.t) << " T=" << c.T;
        if (std::getenv("MOE_TEST_VERBOSE")) std::printf("%s %s T=%lld nmse %.3g (threshold %.3g)\n", dtype_name(c.t), kernels::isa_name(isa), static_cast<long long>(c.T), e, thr);
        EXPECT_GT(e, 0.0);  // the comparison sees the kernels' own rounding (not a copy of the reference)
        // Token-by-token decode gives the same bits as the batch (determinism contract).
        if (c.T > 1) {
            MoeBlock one(spec, wq, kern, 1, pool.size());
            std::vector<float> y1(static_cast<size_t>(D));
            for (int64_t t = 0; t < c.T; t += 3) {
                one.forward(pool, x.data() + t * D, 1, y1.data());
                for (int64_t d = 0; d < D; ++d) ASSERT_EQ(y1[d], y[t * D + d]) << "token " << t << " d " << d;
            }
        }
    }
}

std::vector<Case> cases() {
    std::vector<Case> v;
    for (DType t : {DType::Q8_0, DType::Q4_K, DType::Q4_0, DType::Q5_K, DType::Q6_K, DType::F16, DType::BF16})
        for (int64_t T : {1, 7, 40}) v.push_back({t, Variant::SoftmaxNorm, T});
    for (DType t : {DType::Q8_0, DType::Q4_K}) v.push_back({t, Variant::Qwen2Shared, 9});
    // Every further weight type (issue 17), one case each: with 9 tokens over 8 routed experts most
    // experts see m <= 2 (the decode GEMV), the shared expert m = 9 (the batched GEMM), and the
    // token-by-token run checks the bits against the batch.
    for (DType t : {DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS,
                    DType::IQ3_S, DType::IQ3_XXS, DType::IQ2_S, DType::IQ2_XS, DType::IQ2_XXS, DType::IQ1_M, DType::IQ1_S,
                    DType::TQ1_0, DType::TQ2_0, DType::MXFP4}) {
        v.push_back({t, Variant::Qwen2Shared, 9});
    }
    return v;
}

INSTANTIATE_TEST_SUITE_P(Types, MoeQuant, testing::ValuesIn(cases()), [](const testing::TestParamInfo<Case>& i) {
    return std::string(dtype_name(i.param.t)) + "_" + variant_name(i.param.v) + "_T" + std::to_string(i.param.T);
});

}  // namespace

namespace {
// --repack-experts: the routed Q2_K / Q3_K / Q4_K / Q6_K / Q8_0 / Q4_0 / Q5_K / Q5_0 / MXFP4 stacks also held as the panel GEMV's layout
// (MoeBlock::repack_experts). Decode calls (m <= 2 rows per expert) then read the panels; the
// output must keep the bits of the block path, batched and token by token.
TEST(MoeQuantPanels, RepackedExpertsGiveTheSameBits) {
    if (!kernels::qmm_has_avx512(DType::Q3_K))
        GTEST_SKIP() << "no AVX-512 VNNI path on this CPU: the panels are used only beside it";
    // Q4_K gate/up with Q6_K down as the Q4_K_M files have them: all three get panels; with Q5_0 down
    // as DeepSeek-V2-Lite's Q4_K_M has it (there F = 1408: here F = 352, 11 Q5_0 blocks, K % 256 != 0)
    const std::pair<DType, DType> cases[] = {{DType::Q2_K, DType::Q2_K}, {DType::Q3_K, DType::Q3_K}, {DType::Q4_K, DType::Q4_K},
                                             {DType::Q4_K, DType::Q6_K}, {DType::Q6_K, DType::Q6_K}, {DType::Q8_0, DType::Q8_0},
                                             {DType::Q4_0, DType::Q4_0}, {DType::Q5_K, DType::Q5_K}, {DType::Q5_K, DType::Q6_K},
                                             {DType::Q5_0, DType::Q5_0}, {DType::Q4_K, DType::Q5_0},
                                             {DType::MXFP4, DType::MXFP4}};
    for (const auto& [t, td] : cases) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " down " + dtype_name(td));
        // Q5_0 down with Q4_K gate/up: F = 352 (11 blocks, K % 256 != 0); types whose panels step by 32-value
        // blocks (Q8_0, Q4_0, Q5_0, MXFP4) on both sides: D = 352 (11 blocks: 8 + a tail of 3), F = 224 (7 blocks < 256)
        const bool per_block = kernels::panel::panel_k_step(t) == 32 && kernels::panel::panel_k_step(td) == 32;
        const int64_t D = per_block ? 352 : 512, F = per_block ? 224 : td == DType::Q5_0 ? 352 : 256, T = 9;
        const int E = 8, k = 2;
        MoeSpec spec = make_spec(Variant::Qwen2Shared, E, k, D, F);
        spec.n_ff_shared = 2 * F;
        TestModel m = make_model(spec, 0x3a11 + static_cast<uint64_t>(t));
        const auto gate = quantize_inplace(t, m.gate, D);
        const auto up = quantize_inplace(t, m.up, D);
        const auto down = quantize_inplace(td, m.down, F);
        MoeWeights w = m.views(2);
        auto v = [&](const TensorView& like, std::initializer_list<int64_t> shape, const std::vector<uint8_t>& b) {
            return make_view(like.name, t, shape, const_cast<uint8_t*>(b.data()));
        };
        w.gate_exps = v(w.gate_exps, {D, F, E}, gate);
        w.up_exps = v(w.up_exps, {D, F, E}, up);
        w.down_exps = make_view(w.down_exps.name, td, {F, D, E}, const_cast<uint8_t*>(down.data()));
        const std::vector<float> x = random_x(T, D, 0x77 + static_cast<uint64_t>(t));
        ThreadPool pool(2);
        const kernels::CpuKernels kern(kernels::Isa::Avx512);
        MoeBlock plain(spec, w, kern, T, pool.size()), panel(spec, w, kern, T, pool.size());
        const size_t bytes = panel.repack_experts();
        if (!kernels::panel::panel_gemv_usable()) {
            EXPECT_EQ(bytes, 0u) << "panels made on a CPU without the panel GEMV";
            GTEST_SKIP() << "this CPU lacks GFNI: the panel GEMV is not used (repack_experts made none)";
        }
        // every routed stack repacked: E experts x ceil(N / 16) panels of the type's bytes
        ASSERT_TRUE(kernels::panel::panel_supported(td));
        EXPECT_EQ(bytes, (kernels::panel::panel_matrix_bytes(t, F, D) * 2 + kernels::panel::panel_matrix_bytes(td, D, F)) * E);
        std::vector<float> y0(static_cast<size_t>(T * D)), y1(static_cast<size_t>(T * D)), yt(static_cast<size_t>(D));
        plain.forward(pool, x.data(), T, y0.data());
        panel.forward(pool, x.data(), T, y1.data());
        ASSERT_EQ(0, std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float))) << "batch of " << T;
        // the decode calls really read the panels: flipping the first 64 level bytes of every
        // panel of gate (all 16 columns) changes the one-token output
        const ExpertMatrix& g = panel.routed_ffn().gate;
        ASSERT_NE(g.panels, nullptr);
        auto* p = const_cast<uint8_t*>(g.panels);
        const size_t one_panel = kernels::panel::panel_bytes(t, D);
        const auto flip = [&] {
            for (int e = 0; e < E; ++e)
                for (int64_t pi = 0; pi < F / 16; ++pi)
                    for (size_t b = 0; b < 64; ++b) p[e * g.panel_bytes + static_cast<size_t>(pi) * one_panel + b] ^= 0xFF;
        };
        flip();
        panel.forward(pool, x.data(), 1, y1.data());  // one token: m = 1 for both its experts
        EXPECT_NE(0, std::memcmp(y0.data(), y1.data(), D * sizeof(float))) << "corrupted panels went unused";
        flip();
        MoeBlock one(spec, w, kern, 1, pool.size());
        one.repack_experts();
        for (int64_t i = 0; i < T; ++i) {
            one.forward(pool, x.data() + i * D, 1, yt.data());
            ASSERT_EQ(0, std::memcmp(yt.data(), y0.data() + i * D, D * sizeof(float))) << "token " << i;
        }
    }
}
}  // namespace

namespace {
// Decode over repacked Q4_K / Q6_K experts runs matrices in pairs (moe/experts.cpp: an expert's
// gate and up, two ready experts' down over the same columns; panel_matmul_pair): one token routed
// to all 8 experts (one row each, so down pairs form on 1, 2 and 3 threads), beside a shared expert
// of another shape (never paired with a routed one). The output must keep the bits of the block
// path; a pair that fed one expert's h row to the other's down would change them.
TEST(MoeQuantPanels, DecodePairsKeepTheBits) {
    if (!kernels::qmm_has_avx512(DType::Q4_K) || !kernels::panel::panel_gemv_usable())
        GTEST_SKIP() << "no AVX-512 VNNI + GFNI on this CPU: repack_experts makes no panels here";
    const std::pair<DType, DType> cases[] = {{DType::Q4_K, DType::Q6_K}, {DType::Q4_K, DType::Q4_K}, {DType::Q6_K, DType::Q6_K}};
    for (const auto& [t, td] : cases) {
        const int64_t D = 512, F = 256;
        const int E = 8, k = 8;
        MoeSpec spec = make_spec(Variant::Qwen2Shared, E, k, D, F);
        spec.n_ff_shared = 2 * F;
        TestModel m = make_model(spec, 0x9a17 + static_cast<uint64_t>(t) + 7 * static_cast<uint64_t>(td));
        const auto gate = quantize_inplace(t, m.gate, D);
        const auto up = quantize_inplace(t, m.up, D);
        const auto down = quantize_inplace(td, m.down, F);
        MoeWeights w = m.views(2);
        w.gate_exps = make_view(w.gate_exps.name, t, {D, F, E}, const_cast<uint8_t*>(gate.data()));
        w.up_exps = make_view(w.up_exps.name, t, {D, F, E}, const_cast<uint8_t*>(up.data()));
        w.down_exps = make_view(w.down_exps.name, td, {F, D, E}, const_cast<uint8_t*>(down.data()));
        const int64_t T = 3;
        const std::vector<float> x = random_x(T, D, 0x5a + static_cast<uint64_t>(t));
        const kernels::CpuKernels kern(kernels::Isa::Avx512);
        for (int threads : {1, 2, 3}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + " down " + dtype_name(td) + ", " + std::to_string(threads) + " threads");
            ThreadPool pool(threads);
            MoeBlock plain(spec, w, kern, 1, pool.size()), panel(spec, w, kern, 1, pool.size());
            ASSERT_GT(panel.repack_experts(), 0u);
            std::vector<float> y0(static_cast<size_t>(D)), y1(static_cast<size_t>(D));
            for (int64_t i = 0; i < T; ++i) {
                plain.forward(pool, x.data() + i * D, 1, y0.data());
                panel.forward(pool, x.data() + i * D, 1, y1.data());
                ASSERT_EQ(0, std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float))) << "token " << i;
            }
        }
    }
}
}  // namespace

namespace {
// --repack-experts on a type with a panel GEMM (Q2_K, Q3_K, Q4_K, Q6_K, Q8_0, Q4_0, Q5_K, Q5_0, MXFP4): every call, batched (m > 2 rows
// per expert) or decode-sized, reads the panels, with the bits of the block path; so the blocks are
// never read again (Model then releases their pages): corrupting them after the repack changes
// nothing, corrupting the panels changes the batched output.
TEST(MoeQuantPanels, BatchedCallsReadThePanelsAndNeverTheBlocks) {
    if (!kernels::qmm_has_avx512(DType::Q4_K) || !kernels::panel::panel_gemv_usable())
        GTEST_SKIP() << "no AVX-512 VNNI + GFNI on this CPU: repack_experts makes no panels here";
    for (DType t : {DType::Q4_K, DType::Q3_K, DType::Q2_K, DType::Q6_K, DType::Q8_0, DType::Q4_0, DType::Q5_K, DType::Q5_0, DType::MXFP4}) {
        SCOPED_TRACE(dtype_name(t));
        // 64 tokens x top-2 of 8: ~16 rows per expert; Q8_0 / Q4_0 / Q5_0 / MXFP4 at K % 256 != 0 (D = 352, F = 224, F_s = 448)
        const bool per_block = kernels::panel::panel_k_step(t) == 32;
        const int64_t D = per_block ? 352 : 512, F = per_block ? 224 : 256, T = 64;
        const int E = 8, k = 2;
        MoeSpec spec = make_spec(Variant::Qwen2Shared, E, k, D, F);
        spec.n_ff_shared = 2 * F;
        TestModel m = make_model(spec, 0x5b21 + static_cast<uint64_t>(t));
        auto gate = quantize_inplace(t, m.gate, D);
        auto up = quantize_inplace(t, m.up, D);
        auto down = quantize_inplace(t, m.down, F);
        // the shared expert (F_s = 2F) at the same type: repacked as a stack of one
        const int64_t Fs = spec.n_ff_shared;
        auto gate_sh = quantize_inplace(t, m.gate_sh, D);
        auto up_sh = quantize_inplace(t, m.up_sh, D);
        auto down_sh = quantize_inplace(t, m.down_sh, Fs);
        MoeWeights w = m.views(2);
        auto v = [&](const TensorView& like, std::initializer_list<int64_t> shape, std::vector<uint8_t>& b) {
            return make_view(like.name, t, shape, b.data());
        };
        w.gate_exps = v(w.gate_exps, {D, F, E}, gate);
        w.up_exps = v(w.up_exps, {D, F, E}, up);
        w.down_exps = v(w.down_exps, {F, D, E}, down);
        w.gate_shexp = v(w.gate_shexp, {D, Fs}, gate_sh);
        w.up_shexp = v(w.up_shexp, {D, Fs}, up_sh);
        w.down_shexp = v(w.down_shexp, {Fs, D}, down_sh);
        const std::vector<float> x = random_x(T, D, 0x99 + static_cast<uint64_t>(t));
        ThreadPool pool(2);
        const kernels::CpuKernels kern(kernels::Isa::Avx512);
        MoeBlock plain(spec, w, kern, T, pool.size()), panel(spec, w, kern, T, pool.size());
        ASSERT_GT(panel.repack_experts(), 0u);
        for (const ExpertFfn* f : {&panel.routed_ffn(), &panel.shared_ffn()})
            for (const ExpertMatrix* x3 : {&f->gate, &f->up, &f->down}) {
                EXPECT_NE(x3->panels, nullptr);
                EXPECT_TRUE(x3->panels_serve_all);
            }
        std::vector<float> y0(static_cast<size_t>(T * D)), y1(y0.size());
        plain.forward(pool, x.data(), T, y0.data());
        // the blocks corrupted after the repack: the panel block must not notice
        for (auto* b : {&gate, &up, &down, &gate_sh, &up_sh, &down_sh})
            for (size_t i = 0; i < b->size(); i += 7) (*b)[i] ^= 0x5A;
        panel.forward(pool, x.data(), T, y1.data());
        ASSERT_EQ(0, std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float))) << "batch of " << T;
        panel.forward(pool, x.data(), 1, y1.data());
        ASSERT_EQ(0, std::memcmp(y0.data(), y1.data(), D * sizeof(float))) << "one token";
        // ... while corrupting the down panels' first level bytes changes the batched output
        const ExpertMatrix& d = panel.routed_ffn().down;
        auto* p = const_cast<uint8_t*>(d.panels);
        for (int e = 0; e < E; ++e)
            for (size_t b = 0; b < 64; ++b) p[e * d.panel_bytes + b] ^= 0xFF;
        panel.forward(pool, x.data(), T, y1.data());
        EXPECT_NE(0, std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float))) << "corrupted panels went unused";
        for (int e = 0; e < E; ++e)
            for (size_t b = 0; b < 64; ++b) p[e * d.panel_bytes + b] ^= 0xFF;  // restored: equal again
        panel.forward(pool, x.data(), T, y1.data());
        ASSERT_EQ(0, std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float))) << "restored routed panels";
        // the shared expert's down panel too, for the batch and for one token
        auto* ps = const_cast<uint8_t*>(panel.shared_ffn().down.panels);
        for (size_t b = 0; b < 64; ++b) ps[b] ^= 0xFF;
        panel.forward(pool, x.data(), T, y1.data());
        EXPECT_NE(0, std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float))) << "corrupted shared panels went unused (batch)";
        panel.forward(pool, x.data(), 1, y1.data());
        EXPECT_NE(0, std::memcmp(y0.data(), y1.data(), D * sizeof(float))) << "corrupted shared panels went unused (one token)";
    }
}
}  // namespace
