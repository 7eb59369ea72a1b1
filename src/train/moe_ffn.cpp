// MoE FFN training forward/backward (see moe_ffn.h).
#include "train/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "train/gemm.h"
#include "train/ops.h"

namespace moe::train {
namespace {

template <typename R>
void mm(ThreadPool* pool, int64_t M, int64_t N, int64_t K, const R* A, int64_t lda, bool ta, const R* B,
        int64_t ldb, bool tb, R* C, bool acc) {
    Gemm<R> g;
    g.M = M, g.N = N, g.K = K, g.A = A, g.lda = lda, g.trans_a = ta, g.B = B, g.ldb = ldb, g.trans_b = tb;
    g.C = C, g.ldc = N, g.accumulate = acc;
    gemm(pool, g);
}

template <typename F>
void rows(ThreadPool* pool, int64_t n, int64_t grain, F&& f) {
    if (!pool || pool->size() == 1 || n <= grain) return f(int64_t(0), n);
    pool->parallel_for(n, grain, [&](int64_t a, int64_t b, int) { f(a, b); });
}

// Shared expert (qwen2moe): out[t] += sg[t] * sY[t], sg = sigmoid(g . xn[t]), sY = SwiGLU FFN of
// width Fs over all N rows.
template <typename R>
void shared_fwd(ThreadPool* pool, const MoeShape& s, const MoeWeightsT<R>& w, const R* xn, R* out, MoeSaved<R>& sv) {
    const int64_t N = s.N, D = s.D, Fs = s.Fs;
    sv.sG.resize(static_cast<size_t>(N * Fs));
    sv.sU.resize(static_cast<size_t>(N * Fs));
    sv.sA.resize(static_cast<size_t>(N * Fs));
    sv.sY.resize(static_cast<size_t>(N * D));
    sv.sg.resize(static_cast<size_t>(N));
    mm<R>(pool, N, Fs, D, xn, D, false, w.sh_gate, D, true, sv.sG.data(), false);
    mm<R>(pool, N, Fs, D, xn, D, false, w.sh_up, D, true, sv.sU.data(), false);
    swiglu_fwd<R>(N * Fs, sv.sG.data(), sv.sU.data(), sv.sA.data());
    mm<R>(pool, N, D, Fs, sv.sA.data(), Fs, false, w.sh_down, Fs, true, sv.sY.data(), false);
    rows(pool, N, 64, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const R* x = xn + t * D;
            R z = 0;
            for (int64_t c = 0; c < D; ++c) z += w.sh_gate_inp[c] * x[c];
            const R g = R(1) / (R(1) + std::exp(-z));
            sv.sg[static_cast<size_t>(t)] = g;
            const R* y = sv.sY.data() + t * D;
            R* o = out + t * D;
            for (int64_t c = 0; c < D; ++c) o[c] += g * y[c];
        }
    });
}

// dxn += the shared expert's input gradient; its parameter gradients accumulated.
template <typename R>
void shared_bwd(ThreadPool* pool, const MoeShape& s, const MoeWeightsT<R>& w, const R* xn, const MoeSaved<R>& sv,
                const R* dout, R* dxn, const MoeGradsT<R>& g) {
    const int64_t N = s.N, D = s.D, Fs = s.Fs;
    std::vector<R> dY(static_cast<size_t>(N * D)), dz(static_cast<size_t>(N));
    rows(pool, N, 64, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const R gt = sv.sg[static_cast<size_t>(t)];
            const R* go = dout + t * D;
            const R* y = sv.sY.data() + t * D;
            R* dy = dY.data() + t * D;
            R d = 0;
            for (int64_t c = 0; c < D; ++c) {
                d += go[c] * y[c];
                dy[c] = gt * go[c];
            }
            dz[static_cast<size_t>(t)] = d * gt * (R(1) - gt);  // sigmoid' = g (1 - g)
        }
    });
    std::vector<R> dA(static_cast<size_t>(N * Fs)), dG(static_cast<size_t>(N * Fs)), dU(static_cast<size_t>(N * Fs));
    mm<R>(pool, N, Fs, D, dY.data(), D, false, w.sh_down, Fs, false, dA.data(), false);       // dA = dY Wd
    mm<R>(pool, D, Fs, N, dY.data(), D, true, sv.sA.data(), Fs, false, g.sh_down, true);     // dWd += dY^T A
    swiglu_bwd<R>(N * Fs, sv.sG.data(), sv.sU.data(), dA.data(), dG.data(), dU.data());
    mm<R>(pool, N, D, Fs, dG.data(), Fs, false, w.sh_gate, D, false, dxn, true);  // dxn += dG Wg + dU Wu
    mm<R>(pool, N, D, Fs, dU.data(), Fs, false, w.sh_up, D, false, dxn, true);
    mm<R>(pool, Fs, D, N, dG.data(), Fs, true, xn, D, false, g.sh_gate, true);    // dWg += dG^T xn
    mm<R>(pool, Fs, D, N, dU.data(), Fs, true, xn, D, false, g.sh_up, true);
    // Gate vector: dg += sum_t dz_t xn_t (fixed token order); dxn_t += dz_t g.
    for (int64_t t = 0; t < N; ++t) {
        const R d = dz[static_cast<size_t>(t)];
        const R* x = xn + t * D;
        for (int64_t c = 0; c < D; ++c) g.sh_gate_inp[c] += d * x[c];
    }
    rows(pool, N, 64, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const R d = dz[static_cast<size_t>(t)];
            R* o = dxn + t * D;
            for (int64_t c = 0; c < D; ++c) o[c] += d * w.sh_gate_inp[c];
        }
    });
}

}  // namespace

template <typename R>
void moe_fwd(ThreadPool* pool, const MoeShape& s, const MoeLossSpec& ls, const MoeWeightsT<R>& w, const R* xn,
             R* out, MoeSaved<R>& sv) {
    const int64_t N = s.N, D = s.D, F = s.F, E = s.E, k = s.k;
    sv.ids.assign(static_cast<size_t>(N * k), 0);
    sv.w.assign(static_cast<size_t>(N * k), R(1));
    sv.aux = sv.z = 0;
    if (E > 1) {
        sv.probs.resize(static_cast<size_t>(N * E));
        sv.lse.resize(static_cast<size_t>(N));
        mm<R>(pool, N, E, D, xn, D, false, w.router, D, true, sv.probs.data(), false);
        rows(pool, N, 64, [&](int64_t t0, int64_t t1) {
            std::vector<R> sel(static_cast<size_t>(E));
            std::vector<int32_t> idx(static_cast<size_t>(E));
            for (int64_t t = t0; t < t1; ++t) {
                R* p = sv.probs.data() + t * E;
                R m = p[0];
                for (int64_t e = 1; e < E; ++e) m = std::max(m, p[e]);
                R sum = 0;
                for (int64_t e = 0; e < E; ++e) {
                    p[e] = std::exp(p[e] - m);
                    sum += p[e];
                }
                sv.lse[static_cast<size_t>(t)] = m + std::log(sum);
                for (int64_t e = 0; e < E; ++e) {
                    p[e] /= sum;
                    sel[static_cast<size_t>(e)] = p[e] + (w.sel_bias ? static_cast<R>(w.sel_bias[e]) : R(0));
                }
                for (int64_t e = 0; e < E; ++e) idx[static_cast<size_t>(e)] = static_cast<int32_t>(e);
                std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
                    return sel[a] > sel[b] || (sel[a] == sel[b] && a < b);
                });
                R ws = 0;
                for (int64_t j = 0; j < k; ++j) ws += p[idx[static_cast<size_t>(j)]];
                if (!s.norm_w) ws = 1;
                for (int64_t j = 0; j < k; ++j) {
                    sv.ids[static_cast<size_t>(t * k + j)] = idx[static_cast<size_t>(j)];
                    sv.w[static_cast<size_t>(t * k + j)] = p[idx[static_cast<size_t>(j)]] / ws;
                }
            }
        });
    }
    // Group slots per expert (counting sort keeps token order inside an expert).
    sv.counts.assign(static_cast<size_t>(E), 0);
    for (int32_t e : sv.ids) ++sv.counts[static_cast<size_t>(e)];
    sv.off.assign(static_cast<size_t>(E + 1), 0);
    for (int64_t e = 0; e < E; ++e) sv.off[static_cast<size_t>(e + 1)] = sv.off[static_cast<size_t>(e)] + sv.counts[static_cast<size_t>(e)];
    sv.slot.resize(static_cast<size_t>(N * k));
    sv.inv.resize(static_cast<size_t>(N * k));
    {
        std::vector<int64_t> fill(sv.off.begin(), sv.off.end() - 1);
        for (int64_t sl = 0; sl < N * k; ++sl) {
            const int64_t a = fill[static_cast<size_t>(sv.ids[static_cast<size_t>(sl)])]++;
            sv.slot[static_cast<size_t>(a)] = static_cast<int32_t>(sl);
            sv.inv[static_cast<size_t>(sl)] = static_cast<int32_t>(a);
        }
    }
    const int64_t NA = N * k;
    sv.X.resize(static_cast<size_t>(NA * D));
    sv.G.resize(static_cast<size_t>(NA * F));
    sv.U.resize(static_cast<size_t>(NA * F));
    sv.A.resize(static_cast<size_t>(NA * F));
    sv.Y.resize(static_cast<size_t>(NA * D));
    rows(pool, NA, 256, [&](int64_t a0, int64_t a1) {
        for (int64_t a = a0; a < a1; ++a)
            std::memcpy(sv.X.data() + a * D, xn + (sv.slot[static_cast<size_t>(a)] / k) * D, sizeof(R) * D);
    });
    for (int64_t e = 0; e < E; ++e) {
        const int64_t a0 = sv.off[static_cast<size_t>(e)], n = sv.counts[static_cast<size_t>(e)];
        if (n == 0) continue;
        const R* X = sv.X.data() + a0 * D;
        R *G = sv.G.data() + a0 * F, *U = sv.U.data() + a0 * F, *A = sv.A.data() + a0 * F;
        mm<R>(pool, n, F, D, X, D, false, w.gate + e * F * D, D, true, G, false);
        mm<R>(pool, n, F, D, X, D, false, w.up + e * F * D, D, true, U, false);
        swiglu_fwd<R>(n * F, G, U, A);
        mm<R>(pool, n, D, F, A, F, false, w.down + e * D * F, F, true, sv.Y.data() + a0 * D, false);
    }
    rows(pool, N, 64, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            R* o = out + t * D;
            for (int64_t c = 0; c < D; ++c) o[c] = 0;
            for (int64_t j = 0; j < k; ++j) {
                const R wt = sv.w[static_cast<size_t>(t * k + j)];
                const R* y = sv.Y.data() + static_cast<int64_t>(sv.inv[static_cast<size_t>(t * k + j)]) * D;
                for (int64_t c = 0; c < D; ++c) o[c] += wt * y[c];
            }
        }
    });
    if (s.Fs > 0) shared_fwd(pool, s, w, xn, out, sv);
    if (E > 1) {
        if (ls.aux != 0) {
            double a = 0;
            for (int64_t e = 0; e < E; ++e) {
                double P = 0;
                for (int64_t t = 0; t < N; ++t) P += static_cast<double>(sv.probs[static_cast<size_t>(t * E + e)]);
                a += static_cast<double>(sv.counts[static_cast<size_t>(e)]) / static_cast<double>(NA) * (P / N);
            }
            sv.aux = ls.aux * static_cast<double>(E) * a;
        }
        if (ls.z != 0) {
            double z = 0;
            for (int64_t t = 0; t < N; ++t) z += static_cast<double>(sv.lse[static_cast<size_t>(t)]) * sv.lse[static_cast<size_t>(t)];
            sv.z = ls.z * z / static_cast<double>(N);
        }
    }
}

template <typename R>
void moe_bwd(ThreadPool* pool, const MoeShape& s, const MoeLossSpec& ls, const MoeWeightsT<R>& w, const R* xn,
             const MoeSaved<R>& sv, const R* dout, R* dxn, const MoeGradsT<R>& g) {
    const int64_t N = s.N, D = s.D, F = s.F, E = s.E, k = s.k, NA = N * k;
    std::vector<R> dY(static_cast<size_t>(NA * D)), dw(static_cast<size_t>(NA));
    rows(pool, NA, 256, [&](int64_t a0, int64_t a1) {
        for (int64_t a = a0; a < a1; ++a) {
            const int64_t sl = sv.slot[static_cast<size_t>(a)], t = sl / k;
            const R* go = dout + t * D;
            const R* y = sv.Y.data() + a * D;
            R* dy = dY.data() + a * D;
            const R wt = sv.w[static_cast<size_t>(sl)];
            R d = 0;
            for (int64_t c = 0; c < D; ++c) {
                d += go[c] * y[c];
                dy[c] = wt * go[c];
            }
            dw[static_cast<size_t>(sl)] = d;
        }
    });
    std::vector<R> dA(static_cast<size_t>(NA * F)), dG(static_cast<size_t>(NA * F)), dU(static_cast<size_t>(NA * F)),
        dX(static_cast<size_t>(NA * D));
    for (int64_t e = 0; e < E; ++e) {
        const int64_t a0 = sv.off[static_cast<size_t>(e)], n = sv.counts[static_cast<size_t>(e)];
        if (n == 0) continue;
        const R* X = sv.X.data() + a0 * D;
        const R* dy = dY.data() + a0 * D;
        R *da = dA.data() + a0 * F, *dg = dG.data() + a0 * F, *du = dU.data() + a0 * F;
        mm<R>(pool, n, F, D, dy, D, false, w.down + e * D * F, F, false, da, false);              // dA = dY Wd
        mm<R>(pool, D, F, n, dy, D, true, sv.A.data() + a0 * F, F, false, g.down + e * D * F, true);  // dWd += dY^T A
        swiglu_bwd<R>(n * F, sv.G.data() + a0 * F, sv.U.data() + a0 * F, da, dg, du);
        R* dx = dX.data() + a0 * D;
        mm<R>(pool, n, D, F, dg, F, false, w.gate + e * F * D, D, false, dx, false);  // dX = dG Wg + dU Wu
        mm<R>(pool, n, D, F, du, F, false, w.up + e * F * D, D, false, dx, true);
        mm<R>(pool, F, D, n, dg, F, true, X, D, false, g.gate + e * F * D, true);     // dWg += dG^T X
        mm<R>(pool, F, D, n, du, F, true, X, D, false, g.up + e * F * D, true);
    }
    rows(pool, N, 64, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            R* o = dxn + t * D;
            for (int64_t c = 0; c < D; ++c) o[c] = 0;
            for (int64_t j = 0; j < k; ++j) {
                const R* dx = dX.data() + static_cast<int64_t>(sv.inv[static_cast<size_t>(t * k + j)]) * D;
                for (int64_t c = 0; c < D; ++c) o[c] += dx[c];
            }
        }
    });
    if (s.Fs > 0) shared_bwd(pool, s, w, xn, sv, dout, dxn, g);
    if (E == 1) return;
    // Router: w_j = p_j / S (S = sum of selected p) -> dp_j = (dw_j - sum_l dw_l w_l) / S;
    // aux: dP_i/dp[t,i] = 1/N; z: d lse^2 / dlogit = 2 lse p. Then softmax backward.
    std::vector<R> dlog(static_cast<size_t>(N * E));
    std::vector<double> fshare(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) fshare[static_cast<size_t>(e)] = static_cast<double>(sv.counts[static_cast<size_t>(e)]) / static_cast<double>(NA);
    rows(pool, N, 64, [&](int64_t t0, int64_t t1) {
        std::vector<R> dp(static_cast<size_t>(E));
        for (int64_t t = t0; t < t1; ++t) {
            const R* p = sv.probs.data() + t * E;
            const int32_t* ids = sv.ids.data() + t * k;
            const R* wt = sv.w.data() + t * k;
            const R* dwt = dw.data() + t * k;
            R S = 0, dot = 0;
            for (int64_t j = 0; j < k; ++j) {
                S += p[ids[j]];
                dot += dwt[j] * wt[j];
            }
            for (int64_t e = 0; e < E; ++e)
                dp[static_cast<size_t>(e)] = static_cast<R>(ls.aux * static_cast<double>(E) * fshare[static_cast<size_t>(e)] / static_cast<double>(N));
            if (s.norm_w)
                for (int64_t j = 0; j < k; ++j) dp[static_cast<size_t>(ids[j])] += (dwt[j] - dot) / S;
            else
                for (int64_t j = 0; j < k; ++j) dp[static_cast<size_t>(ids[j])] += dwt[j];
            R pd = 0;
            for (int64_t e = 0; e < E; ++e) pd += p[e] * dp[static_cast<size_t>(e)];
            const R zc = static_cast<R>(2.0 * ls.z * static_cast<double>(sv.lse[static_cast<size_t>(t)]) / static_cast<double>(N));
            R* dl = dlog.data() + t * E;
            for (int64_t e = 0; e < E; ++e) dl[e] = p[e] * (dp[static_cast<size_t>(e)] - pd) + zc * p[e];
        }
    });
    mm<R>(pool, E, D, N, dlog.data(), E, true, xn, D, false, g.router, true);  // dWr += dlog^T xn
    mm<R>(pool, N, D, E, dlog.data(), E, false, w.router, D, false, dxn, true);  // dxn += dlog Wr
}

template void moe_fwd<float>(ThreadPool*, const MoeShape&, const MoeLossSpec&, const MoeWeightsT<float>&,
                             const float*, float*, MoeSaved<float>&);
template void moe_fwd<double>(ThreadPool*, const MoeShape&, const MoeLossSpec&, const MoeWeightsT<double>&,
                              const double*, double*, MoeSaved<double>&);
template void moe_bwd<float>(ThreadPool*, const MoeShape&, const MoeLossSpec&, const MoeWeightsT<float>&,
                             const float*, const MoeSaved<float>&, const float*, float*, const MoeGradsT<float>&);
template void moe_bwd<double>(ThreadPool*, const MoeShape&, const MoeLossSpec&, const MoeWeightsT<double>&,
                              const double*, const MoeSaved<double>&, const double*, double*,
                              const MoeGradsT<double>&);

}  // namespace moe::train
