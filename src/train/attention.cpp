// Causal GQA attention, forward and backward (see attention.h).
#include "train/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "train/gemm.h"

namespace moe::train {
namespace {

template <typename F>
void per_pair(ThreadPool* pool, const AttnShape& s, F&& f) {
    const int64_t n = s.B * s.Hkv;
    if (!pool || pool->size() == 1) {
        for (int64_t i = 0; i < n; ++i) f(i / s.Hkv, i % s.Hkv);
        return;
    }
    pool->parallel_for(n, 1, [&](int64_t a, int64_t b, int) {
        for (int64_t i = a; i < b; ++i) f(i / s.Hkv, i % s.Hkv);
    });
}

}  // namespace

namespace {
// C[M,N] (+)= op(A) op(B) on one thread (the caller's task), with explicit strides.
template <typename R>
void mm(int64_t M, int64_t N, int64_t K, const R* A, int64_t lda, bool ta, const R* B, int64_t ldb, bool tb, R* C,
        int64_t ldc, bool acc) {
    Gemm<R> g;
    g.M = M, g.N = N, g.K = K, g.A = A, g.lda = lda, g.trans_a = ta, g.B = B, g.ldb = ldb, g.trans_b = tb;
    g.C = C, g.ldc = ldc, g.accumulate = acc;
    gemm(nullptr, g);
}
}  // namespace

// Per (sequence, head): S = scale Q K^T as one GEMM over the full T x T block (the masked upper
// half is computed and discarded: ~2x the causal flops, but GEMM speed instead of scalar dots),
// causal softmax, out = P V.
template <typename R>
void attention_fwd(ThreadPool* pool, const AttnShape& s, const R* q, const R* k, const R* v, R* P, R* out) {
    const int64_t T = s.T, hd = s.hd, Hq = s.Hq, Hkv = s.Hkv, group = Hq / Hkv;
    const R scale = static_cast<R>(s.scale);
    per_pair(pool, s, [&](int64_t b, int64_t g) {
        const R* K = k + (b * T * Hkv + g) * hd;
        const R* V = v + (b * T * Hkv + g) * hd;
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
            R* Pb = P + ((b * Hq + h) * T) * T;
            const R* Q = q + (b * T * Hq + h) * hd;
            mm<R>(T, T, hd, Q, Hq * hd, false, K, Hkv * hd, true, Pb, T, false);
            for (int64_t i = 0; i < T; ++i) {
                R* pr = Pb + i * T;
                R m = -INFINITY;
                for (int64_t j = 0; j <= i; ++j) {
                    pr[j] *= scale;
                    m = std::max(m, pr[j]);
                }
                R sum = 0;
                for (int64_t j = 0; j <= i; ++j) {
                    pr[j] = std::exp(pr[j] - m);
                    sum += pr[j];
                }
                const R inv = R(1) / sum;
                for (int64_t j = 0; j <= i; ++j) pr[j] *= inv;
                for (int64_t j = i + 1; j < T; ++j) pr[j] = 0;
            }
            mm<R>(T, hd, T, Pb, T, false, V, Hkv * hd, false, out + (b * T * Hq + h) * hd, Hq * hd, false);
        }
    });
}

template <typename R>
void attention_bwd(ThreadPool* pool, const AttnShape& s, const R* q, const R* k, const R* v, const R* P,
                   const R* dout, R* dq, R* dk, R* dv) {
    const int64_t T = s.T, hd = s.hd, Hq = s.Hq, Hkv = s.Hkv, group = Hq / Hkv;
    const R scale = static_cast<R>(s.scale);
    per_pair(pool, s, [&](int64_t b, int64_t g) {
        std::vector<R> dS(static_cast<size_t>(T * T));
        const R* K = k + (b * T * Hkv + g) * hd;
        const R* V = v + (b * T * Hkv + g) * hd;
        R* dK = dk + (b * T * Hkv + g) * hd;
        R* dV = dv + (b * T * Hkv + g) * hd;
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
            const bool first = h == g * group;
            const R* Pb = P + ((b * Hq + h) * T) * T;
            const R* dO = dout + (b * T * Hq + h) * hd;
            const R* Q = q + (b * T * Hq + h) * hd;
            mm<R>(T, T, hd, dO, Hq * hd, false, V, Hkv * hd, true, dS.data(), T, false);  // dP = dO V^T
            for (int64_t i = 0; i < T; ++i) {
                const R* pr = Pb + i * T;
                R* d = dS.data() + i * T;
                R dot = 0;
                for (int64_t j = 0; j <= i; ++j) dot += pr[j] * d[j];
                for (int64_t j = 0; j <= i; ++j) d[j] = pr[j] * (d[j] - dot) * scale;
                for (int64_t j = i + 1; j < T; ++j) d[j] = 0;
            }
            mm<R>(T, hd, T, Pb, T, true, dO, Hq * hd, false, dV, Hkv * hd, !first);        // dV += P^T dO
            mm<R>(T, hd, T, dS.data(), T, false, K, Hkv * hd, false, dq + (b * T * Hq + h) * hd, Hq * hd, false);
            mm<R>(T, hd, T, dS.data(), T, true, Q, Hq * hd, false, dK, Hkv * hd, !first);  // dK += dS^T Q
        }
    });
}

template void attention_fwd<float>(ThreadPool*, const AttnShape&, const float*, const float*, const float*, float*,
                                   float*);
template void attention_fwd<double>(ThreadPool*, const AttnShape&, const double*, const double*, const double*,
                                    double*, double*);
template void attention_bwd<float>(ThreadPool*, const AttnShape&, const float*, const float*, const float*,
                                   const float*, const float*, float*, float*, float*);
template void attention_bwd<double>(ThreadPool*, const AttnShape&, const double*, const double*, const double*,
                                    const double*, const double*, double*, double*, double*);

}  // namespace moe::train
