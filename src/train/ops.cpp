// Row-wise training ops (see ops.h).
#include "train/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace moe::train {
namespace {

template <typename F>
void rows(ThreadPool* pool, int64_t n, int64_t grain, F&& f) {
    if (!pool || pool->size() == 1 || n <= grain) {
        f(int64_t(0), n);
        return;
    }
    pool->parallel_for(n, grain, [&](int64_t a, int64_t b, int) { f(a, b); });
}

}  // namespace

template <typename R>
void rmsnorm_fwd(ThreadPool* pool, int64_t n, int64_t d, float eps, const R* x, const R* w, R* y, R* rstd) {
    rows(pool, n, 64, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const R* xr = x + r * d;
            R ss = 0;
            for (int64_t i = 0; i < d; ++i) ss += xr[i] * xr[i];
            const R s = R(1) / std::sqrt(ss / static_cast<R>(d) + static_cast<R>(eps));
            rstd[r] = s;
            R* yr = y + r * d;
            for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * s * w[i];
        }
    });
}

template <typename R>
void rmsnorm_bwd(ThreadPool* pool, int64_t n, int64_t d, const R* x, const R* w, const R* rstd, const R* dy,
                 R* dx, R* dw) {
    // y_i = x_i s w_i, s = (mean x^2 + eps)^-1/2, ds/dx_j = -s^3 x_j / d
    // dx_j = s w_j dy_j - x_j s^3 / d * sum_i dy_i w_i x_i
    rows(pool, n, 64, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const R* xr = x + r * d;
            const R* g = dy + r * d;
            const R s = rstd[r];
            R dot = 0;
            for (int64_t i = 0; i < d; ++i) dot += g[i] * w[i] * xr[i];
            const R c = dot * s * s * s / static_cast<R>(d);
            R* o = dx + r * d;
            for (int64_t i = 0; i < d; ++i) o[i] = s * w[i] * g[i] - xr[i] * c;
        }
    });
    if (!dw) return;
    // Columns split across threads; rows summed in order.
    rows(pool, d, 16, [&](int64_t c0, int64_t c1) {
        std::vector<R> acc(static_cast<size_t>(c1 - c0), R(0));
        for (int64_t r = 0; r < n; ++r) {
            const R s = rstd[r];
            for (int64_t i = c0; i < c1; ++i) acc[static_cast<size_t>(i - c0)] += dy[r * d + i] * x[r * d + i] * s;
        }
        for (int64_t i = c0; i < c1; ++i) dw[i] += acc[static_cast<size_t>(i - c0)];
    });
}

template <typename R>
void rope(ThreadPool* pool, const RopeCache& cache, R* x, int64_t n_tok, int64_t n_head, const int32_t* pos,
          bool inverse) {
    const RopeSpec& s = cache.spec();
    const int64_t np = s.n_rot / 2, hd = s.head_dim;
    rows(pool, n_tok, 64, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const float* c = cache.cos(pos[t]);
            const float* sn = cache.sin(pos[t]);
            for (int64_t h = 0; h < n_head; ++h) {
                R* row = x + (t * n_head + h) * hd;
                for (int64_t i = 0; i < np; ++i) {
                    const R x0 = row[i], x1 = row[i + np];
                    const R cs = c[i], si = inverse ? -sn[i] : sn[i];
                    row[i] = x0 * cs - x1 * si;
                    row[i + np] = x0 * si + x1 * cs;
                }
            }
        }
    });
}

template <typename R>
void swiglu_fwd(int64_t n, const R* g, const R* u, R* a) {
    for (int64_t i = 0; i < n; ++i) {
        const R sg = R(1) / (R(1) + std::exp(-g[i]));
        a[i] = g[i] * sg * u[i];
    }
}

template <typename R>
void swiglu_bwd(int64_t n, const R* g, const R* u, const R* da, R* dg, R* du) {
    for (int64_t i = 0; i < n; ++i) {
        const R sg = R(1) / (R(1) + std::exp(-g[i]));
        const R silu = g[i] * sg;
        du[i] = da[i] * silu;
        dg[i] = da[i] * u[i] * sg * (R(1) + g[i] * (R(1) - sg));
    }
}

template <typename R>
double cross_entropy(ThreadPool* pool, int64_t n, int64_t V, R* logits, const int32_t* targets, bool grad,
                     double scale) {
    std::vector<double> loss(static_cast<size_t>(n));
    rows(pool, n, 32, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            R* l = logits + r * V;
            R m = l[0];
            for (int64_t v = 1; v < V; ++v) m = std::max(m, l[v]);
            double sum = 0;
            for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(l[v] - m));
            const double lse = static_cast<double>(m) + std::log(sum);
            loss[static_cast<size_t>(r)] = lse - static_cast<double>(l[targets[r]]);
            if (grad) {
                const double k = scale / static_cast<double>(n);
                for (int64_t v = 0; v < V; ++v) l[v] = static_cast<R>(std::exp(static_cast<double>(l[v]) - lse) * k);
                l[targets[r]] -= static_cast<R>(k);
            }
        }
    });
    double s = 0;
    for (double v : loss) s += v;
    return s;
}

#define MOE_TRAIN_OPS(R)                                                                                    \
    template void rmsnorm_fwd<R>(ThreadPool*, int64_t, int64_t, float, const R*, const R*, R*, R*);           \
    template void rmsnorm_bwd<R>(ThreadPool*, int64_t, int64_t, const R*, const R*, const R*, const R*, R*, R*); \
    template void rope<R>(ThreadPool*, const RopeCache&, R*, int64_t, int64_t, const int32_t*, bool);           \
    template void swiglu_fwd<R>(int64_t, const R*, const R*, R*);                                             \
    template void swiglu_bwd<R>(int64_t, const R*, const R*, const R*, R*, R*);                               \
    template double cross_entropy<R>(ThreadPool*, int64_t, int64_t, R*, const int32_t*, bool, double);
MOE_TRAIN_OPS(float)
MOE_TRAIN_OPS(double)

}  // namespace moe::train
