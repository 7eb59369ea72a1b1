// Gradient checks: every backward op of the trainer, and the whole model, against central finite
// differences in fp64 on tiny shapes (fresh random inputs; routing held away from ties).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "train/attention.h"
#include "train/gemm.h"
#include "train/moe_ffn.h"
#include "train/net.h"
#include "train/ops.h"

using namespace moe;
using namespace moe::train;

namespace {

std::vector<double> randn(Rng& r, size_t n, double s = 1.0) {
    std::vector<double> v(n);
    for (auto& x : v) x = s * r.normal();
    return v;
}

// Relative error of analytic vs numeric gradient over all entries: |a - n| / max(1e-6, |n|_inf).
void expect_grad_close(const std::vector<double>& analytic, const std::vector<double>& numeric, double tol,
                       const char* what) {
    ASSERT_EQ(analytic.size(), numeric.size());
    double scale = 1e-8, err = 0;
    for (double v : numeric) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < analytic.size(); ++i) err = std::max(err, std::abs(analytic[i] - numeric[i]));
    EXPECT_LT(err / scale, tol) << what << ": max abs err " << err << " scale " << scale;
    EXPECT_GT(scale, 1e-6) << what << ": gradient is ~zero, the check would prove nothing";
}

// Numeric gradient of f() with respect to v (perturbed in place).
std::vector<double> numeric_grad(std::vector<double>& v, const std::function<double()>& f, double h = 1e-5) {
    std::vector<double> g(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        const double s = v[i];
        v[i] = s + h;
        const double a = f();
        v[i] = s - h;
        const double b = f();
        v[i] = s;
        g[i] = (a - b) / (2 * h);
    }
    return g;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

}  // namespace

// Loss = sum(out * wout) with fresh random wout: its gradient w.r.t. out is wout.
TEST(TrainGrad, RmsNorm) {
    Rng r(1);
    const int64_t n = 3, d = 7;
    auto x = randn(r, n * d), w = randn(r, d), wo = randn(r, n * d);
    auto f = [&]() {
        std::vector<double> y(n * d), rs(n);
        rmsnorm_fwd<double>(nullptr, n, d, 1e-6f, x.data(), w.data(), y.data(), rs.data());
        return dot(y, wo);
    };
    std::vector<double> y(n * d), rs(n), dx(n * d), dw(d, 0.0);
    rmsnorm_fwd<double>(nullptr, n, d, 1e-6f, x.data(), w.data(), y.data(), rs.data());
    rmsnorm_bwd<double>(nullptr, n, d, x.data(), w.data(), rs.data(), wo.data(), dx.data(), dw.data());
    expect_grad_close(dx, numeric_grad(x, f), 1e-7, "rmsnorm dx");
    expect_grad_close(dw, numeric_grad(w, f), 1e-7, "rmsnorm dw");
}

TEST(TrainGrad, RopeInverseIsTransposeAndMatchesEngine) {
    RopeSpec rs;
    rs.mode = RopeMode::Neox;
    rs.head_dim = rs.n_rot = 8;
    const RopeCache cache(rs, 16);
    Rng r(2);
    const int64_t n = 5, H = 2;
    std::vector<int32_t> pos = {0, 3, 7, 11, 15};
    auto x = randn(r, n * H * 8), wo = randn(r, n * H * 8);
    auto f = [&]() {
        auto y = x;
        rope<double>(nullptr, cache, y.data(), n, H, pos.data(), false);
        return dot(y, wo);
    };
    auto g = wo;
    rope<double>(nullptr, cache, g.data(), n, H, pos.data(), true);
    expect_grad_close(g, numeric_grad(x, f), 1e-8, "rope");
    // Forward equals the engine's reference RoPE.
    std::vector<float> xf(x.begin(), x.end()), xe = xf;
    rope<float>(nullptr, cache, xf.data(), n, H, pos.data(), false);
    ref::rope_apply(cache, xe.data(), n, H, pos.data());
    for (size_t i = 0; i < xf.size(); ++i) EXPECT_FLOAT_EQ(xf[i], xe[i]);
}

TEST(TrainGrad, SwiGlu) {
    Rng r(3);
    const int64_t n = 9;
    auto g = randn(r, n, 2.0), u = randn(r, n), wo = randn(r, n);
    auto f = [&]() {
        std::vector<double> a(n);
        swiglu_fwd<double>(n, g.data(), u.data(), a.data());
        return dot(a, wo);
    };
    std::vector<double> dg(n), du(n);
    swiglu_bwd<double>(n, g.data(), u.data(), wo.data(), dg.data(), du.data());
    expect_grad_close(dg, numeric_grad(g, f), 1e-8, "swiglu dg");
    expect_grad_close(du, numeric_grad(u, f), 1e-8, "swiglu du");
}

TEST(TrainGrad, CrossEntropy) {
    Rng r(4);
    const int64_t n = 4, V = 6;
    auto l = randn(r, n * V, 2.0);
    std::vector<int32_t> t = {0, 5, 2, 2};
    auto f = [&]() {
        auto c = l;
        return cross_entropy<double>(nullptr, n, V, c.data(), t.data(), false, 1.0) / n;
    };
    auto g = l;
    const double loss = cross_entropy<double>(nullptr, n, V, g.data(), t.data(), true, 1.0) / n;
    EXPECT_NEAR(loss, f(), 1e-12);
    expect_grad_close(g, numeric_grad(l, f), 1e-8, "cross-entropy");
}

TEST(TrainGrad, CausalGqaAttention) {
    Rng r(5);
    AttnShape s{2, 5, 4, 2, 3, 1.0 / std::sqrt(3.0)};
    const int64_t N = s.B * s.T;
    auto q = randn(r, N * s.Hq * s.hd), k = randn(r, N * s.Hkv * s.hd), v = randn(r, N * s.Hkv * s.hd);
    auto wo = randn(r, N * s.Hq * s.hd);
    std::vector<double> P(s.B * s.Hq * s.T * s.T), out(N * s.Hq * s.hd);
    auto f = [&]() {
        attention_fwd<double>(nullptr, s, q.data(), k.data(), v.data(), P.data(), out.data());
        return dot(out, wo);
    };
    // Causality: the first token of each sequence attends only to itself, so out = v there.
    f();
    for (int64_t h = 0; h < s.Hq; ++h)
        for (int64_t c = 0; c < s.hd; ++c)
            EXPECT_NEAR(out[h * s.hd + c], v[(h / 2) * s.hd + c], 1e-12);
    std::vector<double> dq(q.size()), dk(k.size()), dv(v.size());
    attention_bwd<double>(nullptr, s, q.data(), k.data(), v.data(), P.data(), wo.data(), dq.data(), dk.data(), dv.data());
    expect_grad_close(dq, numeric_grad(q, f), 1e-7, "attention dq");
    expect_grad_close(dk, numeric_grad(k, f), 1e-7, "attention dk");
    expect_grad_close(dv, numeric_grad(v, f), 1e-7, "attention dv");
    // The f32 path (blocked GEMM) gives the same output.
    std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), vf(v.begin(), v.end()), Pf(P.size()),
        of(out.size());
    attention_fwd<float>(nullptr, s, qf.data(), kf.data(), vf.data(), Pf.data(), of.data());
    for (size_t i = 0; i < of.size(); ++i) EXPECT_NEAR(of[i], out[i], 1e-5);
}

// Smallest gap between the k-th and (k+1)-th selection score over tokens (ties make the loss
// non-differentiable; the check needs a clear gap).
double routing_gap(const MoeSaved<double>& sv, int64_t N, int E, int k, const float* bias) {
    double gap = 1e9;
    for (int64_t t = 0; t < N; ++t) {
        std::vector<double> s(E);
        for (int e = 0; e < E; ++e) s[e] = sv.probs[t * E + e] + (bias ? bias[e] : 0.0);
        std::sort(s.rbegin(), s.rend());
        gap = std::min(gap, s[k - 1] - s[k]);
    }
    return gap;
}

TEST(TrainGrad, MoeFfnWithAuxZLossAndBias) {
    Rng r(6);
    MoeShape s{7, 5, 4, 4, 2};
    MoeLossSpec ls{0.3, 0.05};
    auto xn = randn(r, s.N * s.D), router = randn(r, s.E * s.D), gate = randn(r, s.E * s.F * s.D),
         up = randn(r, s.E * s.F * s.D), down = randn(r, s.E * s.D * s.F), wo = randn(r, s.N * s.D);
    const std::vector<float> bias = {0.05f, -0.02f, 0.0f, 0.01f};
    for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
        MoeWeightsT<double> w{router.data(), gate.data(), up.data(), down.data(), b};
        MoeSaved<double> sv;
        std::vector<double> out(s.N * s.D);
        auto f = [&]() {
            moe_fwd<double>(nullptr, s, ls, w, xn.data(), out.data(), sv);
            return dot(out, wo) + sv.aux + sv.z;
        };
        f();
        ASSERT_GT(routing_gap(sv, s.N, s.E, s.k, b), 1e-3) << "seed puts a token near a routing tie";
        ASSERT_GT(sv.aux, 0.0);
        ASSERT_GT(sv.z, 0.0);
        std::vector<double> dxn(xn.size()), gr(router.size()), gg(gate.size()), gu(up.size()), gd(down.size());
        moe_bwd<double>(nullptr, s, ls, w, xn.data(), sv, wo.data(), dxn.data(), {gr.data(), gg.data(), gu.data(), gd.data()});
        expect_grad_close(dxn, numeric_grad(xn, f), 1e-6, "moe dx");
        expect_grad_close(gr, numeric_grad(router, f), 1e-6, "moe router");
        expect_grad_close(gg, numeric_grad(gate, f), 1e-6, "moe gate");
        expect_grad_close(gu, numeric_grad(up, f), 1e-6, "moe up");
        expect_grad_close(gd, numeric_grad(down, f), 1e-6, "moe down");
    }
}

// qwen2moe variant: top-k weights not renormalised, plus a shared expert scaled by a sigmoid gate.
// Forward against a direct scalar evaluation of the formula; backward against finite differences.
TEST(TrainGrad, MoeFfnSharedExpertQwen2moe) {
    Rng r(19);
    MoeShape s{7, 5, 4, 4, 2, 3, false};
    MoeLossSpec ls{0.3, 0.05};
    auto xn = randn(r, s.N * s.D), router = randn(r, s.E * s.D), gate = randn(r, s.E * s.F * s.D),
         up = randn(r, s.E * s.F * s.D), down = randn(r, s.E * s.D * s.F), wo = randn(r, s.N * s.D);
    auto sgi = randn(r, s.D), sgate = randn(r, s.Fs * s.D), sup = randn(r, s.Fs * s.D), sdown = randn(r, s.D * s.Fs);
    // One SwiGLU FFN row: y[d] = sum_f down[d][f] silu(gate[f] . x) (up[f] . x).
    auto ffn = [&](const double* G, const double* U, const double* Dn, int64_t F, const double* x, int64_t d) {
        double y = 0;
        for (int64_t f = 0; f < F; ++f) {
            double g = 0, u = 0;
            for (int64_t c = 0; c < s.D; ++c) g += G[f * s.D + c] * x[c], u += U[f * s.D + c] * x[c];
            y += Dn[d * F + f] * g / (1 + std::exp(-g)) * u;
        }
        return y;
    };
    const std::vector<float> bias = {0.05f, -0.02f, 0.0f, 0.01f};
    for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
        MoeWeightsT<double> w{router.data(), gate.data(), up.data(), down.data(), b,
                              sgi.data(), sgate.data(), sup.data(), sdown.data()};
        MoeSaved<double> sv;
        std::vector<double> out(s.N * s.D);
        auto f = [&]() {
            moe_fwd<double>(nullptr, s, ls, w, xn.data(), out.data(), sv);
            return dot(out, wo) + sv.aux + sv.z;
        };
        f();
        ASSERT_GT(routing_gap(sv, s.N, s.E, s.k, b), 1e-3) << "seed puts a token near a routing tie";
        for (int64_t t = 0; t < s.N; ++t) {
            const double* x = xn.data() + t * s.D;
            double wsum = 0, z = 0;
            for (int64_t j = 0; j < s.k; ++j) wsum += sv.w[t * s.k + j];
            EXPECT_LT(wsum, 1.0 - 1e-6) << "qwen2moe weights are the raw probabilities, not renormalised";
            for (int64_t c = 0; c < s.D; ++c) z += sgi[c] * x[c];
            for (int64_t d = 0; d < s.D; ++d) {
                double ref = ffn(sgate.data(), sup.data(), sdown.data(), s.Fs, x, d) / (1 + std::exp(-z));
                for (int64_t j = 0; j < s.k; ++j) {
                    const int e = sv.ids[t * s.k + j];
                    ref += sv.probs[t * s.E + e] *
                           ffn(gate.data() + e * s.F * s.D, up.data() + e * s.F * s.D, down.data() + e * s.D * s.F, s.F, x, d);
                }
                EXPECT_NEAR(out[t * s.D + d], ref, 1e-12 * (1 + std::abs(ref)));
            }
        }
        std::vector<double> dxn(xn.size()), gr(router.size()), gg(gate.size()), gu(up.size()), gd(down.size()),
            gsi(sgi.size()), gsg(sgate.size()), gsu(sup.size()), gsd(sdown.size());
        moe_bwd<double>(nullptr, s, ls, w, xn.data(), sv, wo.data(), dxn.data(),
                        {gr.data(), gg.data(), gu.data(), gd.data(), gsi.data(), gsg.data(), gsu.data(), gsd.data()});
        expect_grad_close(dxn, numeric_grad(xn, f), 1e-6, "qwen2moe dx");
        expect_grad_close(gr, numeric_grad(router, f), 1e-6, "qwen2moe router");
        expect_grad_close(gg, numeric_grad(gate, f), 1e-6, "qwen2moe gate");
        expect_grad_close(gu, numeric_grad(up, f), 1e-6, "qwen2moe up");
        expect_grad_close(gd, numeric_grad(down, f), 1e-6, "qwen2moe down");
        expect_grad_close(gsi, numeric_grad(sgi, f), 1e-6, "shared gate_inp");
        expect_grad_close(gsg, numeric_grad(sgate, f), 1e-6, "shared gate");
        expect_grad_close(gsu, numeric_grad(sup, f), 1e-6, "shared up");
        expect_grad_close(gsd, numeric_grad(sdown, f), 1e-6, "shared down");
    }
}

TEST(TrainGrad, DenseFfnIsOneExpertWithWeightOne) {
    Rng r(8);
    MoeShape s{3, 4, 5, 1, 1};
    auto xn = randn(r, s.N * s.D), gate = randn(r, s.F * s.D), up = randn(r, s.F * s.D), down = randn(r, s.D * s.F);
    MoeSaved<double> sv;
    std::vector<double> out(s.N * s.D);
    moe_fwd<double>(nullptr, s, MoeLossSpec{}, MoeWeightsT<double>{nullptr, gate.data(), up.data(), down.data(), nullptr},
                    xn.data(), out.data(), sv);
    for (int64_t t = 0; t < s.N; ++t)
        for (int64_t d = 0; d < s.D; ++d) {
            double y = 0;
            for (int64_t f = 0; f < s.F; ++f) {
                double g = 0, u = 0;
                for (int64_t c = 0; c < s.D; ++c) {
                    g += gate[f * s.D + c] * xn[t * s.D + c];
                    u += up[f * s.D + c] * xn[t * s.D + c];
                }
                y += down[d * s.F + f] * g / (1 + std::exp(-g)) * u;
            }
            EXPECT_NEAR(out[t * s.D + d], y, 1e-12);
        }
}

TEST(TrainGemm, FastF32MatchesReferenceForEveryForm) {
    Rng r(9);
    ThreadPool pool(2);
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {13, 45, 7}, {70, 96, 33}, {9, 32, 130}}) {
        for (int form = 0; form < 8; ++form) {
            Gemm<float> g;
            g.M = M, g.N = N, g.K = K, g.trans_a = form & 1, g.trans_b = form & 2, g.accumulate = form & 4;
            std::vector<float> A(M * K), B(K * N), C(M * N), Cr;
            for (auto& v : A) v = r.normal();
            for (auto& v : B) v = r.normal();
            for (auto& v : C) v = r.normal();
            Cr = C;
            g.A = A.data(), g.lda = g.trans_a ? M : K, g.B = B.data(), g.ldb = g.trans_b ? K : N, g.ldc = N;
            g.C = C.data();
            gemm(&pool, g);
            g.C = Cr.data();
            gemm_ref(g);
            for (size_t i = 0; i < C.size(); ++i)
                ASSERT_NEAR(C[i], Cr[i], 1e-4 * (1 + std::abs(Cr[i]))) << "M" << M << " N" << N << " K" << K << " form " << form;
        }
    }
}

namespace {
// Whole model (2 layers, 4 experts top-2, aux + z loss) against finite differences of its total loss.
void whole_model_check(int64_t n_ff_shexp) {
    NetConfig c;
    c.n_vocab = 11;
    c.n_embd = 8;
    c.n_layer = 2;
    c.n_head = n_ff_shexp > 0 ? 2 : 4;  // qwen2moe: heads x head_dim == embd
    c.n_head_kv = n_ff_shexp > 0 ? 1 : 2;
    c.head_dim = 4;
    c.n_ff = 6;
    c.n_expert = 4;
    c.n_expert_used = 2;
    c.n_ctx = 5;
    c.n_ff_shexp = n_ff_shexp;
    Net<double> net(c);
    InitSpec is;
    is.seed = 3;
    is.std = 0.5;
    is.router_std = 1.0;
    net.init(is);
    Rng r(7);
    // Norm weights away from 1 so their gradients are exercised with generic values.
    for (const auto& p : net.layout())
        if (p.shape.size() == 1)
            for (size_t i = 0; i < p.size; ++i) net.params[p.offset + i] = 1.0 + 0.3 * r.normal();
    const int64_t B = 2, T = 5;
    std::vector<int32_t> tok(B * T), tgt(B * T);
    for (auto& t : tok) t = static_cast<int32_t>(r.below(11));
    for (auto& t : tgt) t = static_cast<int32_t>(r.below(11));
    MoeLossSpec ls;
    ls.aux = 0.1;
    ls.z = 0.01;
    std::fill(net.grads.begin(), net.grads.end(), 0.0);
    net.step(nullptr, tok.data(), tgt.data(), B, T, ls, nullptr, true);
    const std::vector<double> analytic = net.grads;
    auto f = [&]() { return net.step(nullptr, tok.data(), tgt.data(), B, T, ls, nullptr, false).total(); };
    const std::vector<double> numeric = numeric_grad(net.params, f);
    expect_grad_close(analytic, numeric, 1e-6, n_ff_shexp > 0 ? "whole qwen2moe model" : "whole model");
}
}  // namespace

TEST(TrainGrad, WholeModelMatchesFiniteDifferences) { whole_model_check(0); }

// With a shared expert (qwen2moe: no q/k norm, no renormalisation, sigmoid-gated shared expert).
TEST(TrainGrad, WholeSharedExpertModelMatchesFiniteDifferences) {
    NetConfig c;
    c.n_vocab = 11, c.n_embd = 8, c.n_head = 2, c.n_head_kv = 1, c.head_dim = 4, c.n_ff_shexp = 3;
    const auto layout = param_layout(c);
    auto has = [&](const std::string& n) {
        return std::any_of(layout.begin(), layout.end(), [&](const ParamInfo& p) { return p.name == n; });
    };
    EXPECT_TRUE(has("blk.0.ffn_gate_inp_shexp.weight") && has("blk.1.ffn_down_shexp.weight"));
    EXPECT_FALSE(has("blk.0.attn_q_norm.weight"));
    whole_model_check(3);
}

// The threaded paths of every op (rows, columns, (sequence, kv head) pairs, GEMM row blocks) give
// bitwise the same loss and gradients as one thread: fixed blocks, fixed summation order.
TEST(TrainGrad, ThreadedStepIsBitwiseSingleThreaded) {
    NetConfig c;
    c.n_vocab = 300;
    c.n_embd = 64;
    c.n_layer = 2;
    c.n_head = 4;
    c.n_head_kv = 2;
    c.head_dim = 16;
    c.n_ff = 48;
    c.n_expert = 8;
    c.n_expert_used = 2;
    c.n_ctx = 40;
    Net<float> a(c), b(c);
    InitSpec is;
    is.seed = 11;
    is.std = 0.2;
    is.router_std = 0.5;
    a.init(is);
    b.init(is);
    Rng r(12);
    const int64_t B = 3, T = 40;
    std::vector<int32_t> tok(B * T), tgt(B * T);
    for (auto& t : tok) t = static_cast<int32_t>(r.below(300));
    for (auto& t : tgt) t = static_cast<int32_t>(r.below(300));
    const MoeLossSpec ls{0.01, 0.001};
    std::vector<std::vector<float>> bias(2, std::vector<float>(8));
    for (auto& v : bias[1]) v = 0.01f * r.normal();
    ThreadPool pool(2);
    const LossParts la = a.step(nullptr, tok.data(), tgt.data(), B, T, ls, &bias, true);
    const LossParts lb = b.step(&pool, tok.data(), tgt.data(), B, T, ls, &bias, true);
    EXPECT_EQ(la.ce, lb.ce);
    EXPECT_EQ(la.aux, lb.aux);
    EXPECT_EQ(la.z, lb.z);
    EXPECT_EQ(a.grads, b.grads);
    double g2 = 0;
    for (float g : a.grads) g2 += static_cast<double>(g) * g;
    EXPECT_GT(g2, 0.0);
}
