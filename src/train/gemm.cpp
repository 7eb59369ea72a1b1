// Trainer GEMM (see gemm.h).
#include "train/gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace moe::train {
namespace {

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));

constexpr int64_t kMR = 8, kNR = 32, kMB = 64;  // register tile rows x cols; rows per task

inline v16 load(const float* p) { return *reinterpret_cast<const v16u*>(p); }
inline void store(float* p, v16 v) { *reinterpret_cast<v16u*>(p) = v; }

// C rows [i0, i1) of C = A . B with B row-major [K, N]; A element (i, k) at A[i * ars + k * acs].
// Column panels outside, rows inside: the K x 32 panel of B stays in L1 while the task's rows
// (at most kMB) pass over it; an 8 x 32 tile is 16 zmm accumulators.
void rows_f32(const Gemm<float>& g, const float* B, int64_t ldb, int64_t ars, int64_t acs, int64_t i0, int64_t i1) {
    const int64_t N = g.N, K = g.K, nfull = N / kNR * kNR;
    const float* A = g.A;
    for (int64_t j = 0; j < nfull; j += kNR) {
        for (int64_t i = i0; i < i1; i += kMR) {
            const int64_t mr = std::min(kMR, i1 - i);
            v16 c[kMR][2] = {};
            if (mr == kMR) {
                const float* a = A + i * ars;
                for (int64_t k = 0; k < K; ++k) {
                    const float* b = B + k * ldb + j;
                    const v16 b0 = load(b), b1 = load(b + 16);
                    const float* ak = a + k * acs;
#pragma GCC unroll 8
                    for (int64_t r = 0; r < kMR; ++r) {
                        const float x = ak[r * ars];
                        c[r][0] += x * b0;
                        c[r][1] += x * b1;
                    }
                }
            } else {
                for (int64_t k = 0; k < K; ++k) {
                    const float* b = B + k * ldb + j;
                    const v16 b0 = load(b), b1 = load(b + 16);
                    for (int64_t r = 0; r < mr; ++r) {
                        const float x = A[(i + r) * ars + k * acs];
                        c[r][0] += x * b0;
                        c[r][1] += x * b1;
                    }
                }
            }
            for (int64_t r = 0; r < mr; ++r) {
                float* cp = g.C + (i + r) * g.ldc + j;
                if (g.accumulate) {
                    store(cp, load(cp) + c[r][0]);
                    store(cp + 16, load(cp + 16) + c[r][1]);
                } else {
                    store(cp, c[r][0]);
                    store(cp + 16, c[r][1]);
                }
            }
        }
    }
    // Column tail (N not a multiple of 32): scalar, same k order.
    for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = nfull; j < N; ++j) {
            float s = 0.0f;
            for (int64_t k = 0; k < K; ++k) s += A[i * ars + k * acs] * B[k * ldb + j];
            float& cv = g.C[i * g.ldc + j];
            cv = g.accumulate ? cv + s : s;
        }
}

}  // namespace

void gemm(ThreadPool* pool, const Gemm<float>& g) {
    if (g.M == 0 || g.N == 0) return;
    if (g.K == 0) {
        if (!g.accumulate)
            for (int64_t i = 0; i < g.M; ++i) std::memset(g.C + i * g.ldc, 0, sizeof(float) * g.N);
        return;
    }
    const float* B = g.B;
    int64_t ldb = g.ldb;
    std::vector<float> bt;
    if (g.trans_b) {  // B stored [N, K] -> [K, N]
        bt.resize(static_cast<size_t>(g.K * g.N));
        for (int64_t n = 0; n < g.N; ++n)
            for (int64_t k = 0; k < g.K; ++k) bt[static_cast<size_t>(k * g.N + n)] = g.B[n * g.ldb + k];
        B = bt.data();
        ldb = g.N;
    }
    const int64_t ars = g.trans_a ? 1 : g.lda, acs = g.trans_a ? g.lda : 1;
    const int64_t nb = (g.M + kMB - 1) / kMB;
    auto task = [&](int64_t b0, int64_t b1, int) {
        for (int64_t b = b0; b < b1; ++b) rows_f32(g, B, ldb, ars, acs, b * kMB, std::min(g.M, (b + 1) * kMB));
    };
    if (!pool || pool->size() == 1 || nb == 1) task(0, nb, 0);
    else pool->parallel_for(nb, 1, task);
}

void gemm(ThreadPool*, const Gemm<double>& g) { gemm_ref(g); }

template <typename R>
void gemm_ref(const Gemm<R>& g) {
    for (int64_t i = 0; i < g.M; ++i)
        for (int64_t j = 0; j < g.N; ++j) {
            double s = 0.0;
            for (int64_t k = 0; k < g.K; ++k) {
                const R a = g.trans_a ? g.A[k * g.lda + i] : g.A[i * g.lda + k];
                const R b = g.trans_b ? g.B[j * g.ldb + k] : g.B[k * g.ldb + j];
                s += static_cast<double>(a) * static_cast<double>(b);
            }
            R& c = g.C[i * g.ldc + j];
            c = g.accumulate ? static_cast<R>(c + s) : static_cast<R>(s);
        }
}

template void gemm_ref<float>(const Gemm<float>&);
template void gemm_ref<double>(const Gemm<double>&);

}  // namespace moe::train
