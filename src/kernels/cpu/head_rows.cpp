#include "kernels/cpu/head_rows.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/dense_isa.h"
#include "kernels/cpu/dequant_row.h"
#include "kernels/cpu/head_rows_fused.h"

namespace moe::cpu {

namespace {

// Columns form over one chunk (rows o0.. of head h, dequantized at buf [n_rows, K]): for each t and
// k, y[k] = fma(x[o], buf[o][k], y[k]) for o ascending. Scalar, AVX2 and AVX-512 run the same fmas.
void columns_scalar(const float* buf, int64_t n_rows, int64_t K, const float* x, float* y, int64_t k0) {
    for (int64_t k = k0; k < K; ++k) {
        float a = y[k];
        for (int64_t o = 0; o < n_rows; ++o) a = std::fma(x[o], buf[o * K + k], a);
        y[k] = a;
    }
}

#if MOE_DENSE_HAS_AVX512
MOE_DENSE_AVX512_BEGIN
// Returns the first k it did not do (a multiple of 16); 64 columns per pass share each broadcast.
int64_t columns_avx512(const float* buf, int64_t n_rows, int64_t K, const float* x, float* y) {
    int64_t k = 0;
    for (; k + 64 <= K; k += 64) {
        __m512 a0 = _mm512_loadu_ps(y + k), a1 = _mm512_loadu_ps(y + k + 16), a2 = _mm512_loadu_ps(y + k + 32),
               a3 = _mm512_loadu_ps(y + k + 48);
        for (int64_t o = 0; o < n_rows; ++o) {
            const __m512 s = _mm512_set1_ps(x[o]);
            const float* w = buf + o * K + k;
            a0 = _mm512_fmadd_ps(s, _mm512_loadu_ps(w), a0);
            a1 = _mm512_fmadd_ps(s, _mm512_loadu_ps(w + 16), a1);
            a2 = _mm512_fmadd_ps(s, _mm512_loadu_ps(w + 32), a2);
            a3 = _mm512_fmadd_ps(s, _mm512_loadu_ps(w + 48), a3);
        }
        _mm512_storeu_ps(y + k, a0);
        _mm512_storeu_ps(y + k + 16, a1);
        _mm512_storeu_ps(y + k + 32, a2);
        _mm512_storeu_ps(y + k + 48, a3);
    }
    for (; k + 16 <= K; k += 16) {
        __m512 a = _mm512_loadu_ps(y + k);
        for (int64_t o = 0; o < n_rows; ++o) a = _mm512_fmadd_ps(_mm512_set1_ps(x[o]), _mm512_loadu_ps(buf + o * K + k), a);
        _mm512_storeu_ps(y + k, a);
    }
    return k;
}
MOE_DENSE_AVX512_END
#endif

// The same on 8-float vectors for CPUs without AVX-512 (32 columns per pass).
__attribute__((target("avx2,fma"))) int64_t columns_avx2(const float* buf, int64_t n_rows, int64_t K, const float* x,
                                                         float* y) {
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
        __m256 a0 = _mm256_loadu_ps(y + k), a1 = _mm256_loadu_ps(y + k + 8), a2 = _mm256_loadu_ps(y + k + 16),
               a3 = _mm256_loadu_ps(y + k + 24);
        for (int64_t o = 0; o < n_rows; ++o) {
            const __m256 s = _mm256_set1_ps(x[o]);
            const float* w = buf + o * K + k;
            a0 = _mm256_fmadd_ps(s, _mm256_loadu_ps(w), a0);
            a1 = _mm256_fmadd_ps(s, _mm256_loadu_ps(w + 8), a1);
            a2 = _mm256_fmadd_ps(s, _mm256_loadu_ps(w + 16), a2);
            a3 = _mm256_fmadd_ps(s, _mm256_loadu_ps(w + 24), a3);
        }
        _mm256_storeu_ps(y + k, a0);
        _mm256_storeu_ps(y + k + 8, a1);
        _mm256_storeu_ps(y + k + 16, a2);
        _mm256_storeu_ps(y + k + 24, a3);
    }
    for (; k + 8 <= K; k += 8) {
        __m256 a = _mm256_loadu_ps(y + k);
        for (int64_t o = 0; o < n_rows; ++o) a = _mm256_fmadd_ps(_mm256_set1_ps(x[o]), _mm256_loadu_ps(buf + o * K + k), a);
        _mm256_storeu_ps(y + k, a);
    }
    return k;
}

void columns(const float* buf, int64_t n_rows, int64_t K, const float* x, float* y, kernels::Isa isa) {
    int64_t k0 = 0;
#if MOE_DENSE_HAS_AVX512
    if (dense_use_avx512(isa)) k0 = columns_avx512(buf, n_rows, K, x, y);
    else
#endif
    if (isa != kernels::Isa::Scalar && kernels::isa_supported(kernels::Isa::Avx2)) k0 = columns_avx2(buf, n_rows, K, x, y);
    columns_scalar(buf, n_rows, K, x, y, k0);
}

}  // namespace

bool head_rows_decode_supported(const HeadRows& w, kernels::Isa isa) { return head_fused::supported(w.type, w.K, isa); }

void head_rows_decode(const HeadRows& w, const HeadIo& io, int64_t h0, int64_t h1) {
    MOE_ASSERT(h0 >= 0 && h1 <= w.H, "head rows decode of heads ", h0, "..", h1, " of ", w.H);
    for (int64_t h = h0; h < h1; ++h) {
        const uint8_t* row = w.data + static_cast<size_t>(h * w.head_rows + w.first) * w.row_bytes;
        if (w.columns) head_fused::columns_one(w.type, row, w.row_bytes, w.rows, w.K, io.x + h * io.xs, io.y + h * io.ys);
        else head_fused::rows_one(w.type, row, w.row_bytes, w.rows, w.K, io.x + h * io.xs, io.y + h * io.ys);
    }
}

void head_rows_product(ThreadPool& pool, const kernels::MatmulKernel& f32, const HeadRows& w, const HeadIo& io,
                       int64_t m, kernels::Isa isa) {
    MOE_ASSERT(w.K > 0 && w.K <= kHeadRowsBuffer && w.rows > 0 && w.H > 0, "head rows K ", w.K, " rows ", w.rows);
    const int64_t chunk = std::min(w.rows, kHeadRowsBuffer / w.K);
    const int64_t per_head = (w.rows + chunk - 1) / chunk;
    // head_fused::supported (Q8_0, Q4_K, Q5_K, Q6_K on AVX-512): decode (m = 1) reads the rows in place,
    // decoded in registers.
    const bool fused = head_fused::supported(w.type, w.K, isa);
    auto row_at = [&](int64_t h, int64_t o0) {
        return w.data + static_cast<size_t>(h * w.head_rows + w.first + o0) * w.row_bytes;
    };
    auto dequant = [&](int64_t h, int64_t o0, int64_t n_rows, float* buf) {
        const uint8_t* row = row_at(h, o0);
        for (int64_t o = 0; o < n_rows; ++o, row += w.row_bytes) dequant_row(w.type, row, buf + o * w.K, w.K, isa);
    };
    if (w.columns) {
        // One task per head: its chunks add into the same outputs, in row order.
        auto task = [&](int64_t h0, int64_t h1, int) {
            alignas(64) float buf[kHeadRowsBuffer];
            for (int64_t h = h0; h < h1; ++h) {
                if (fused && m == 1) {  // the same fmas as below, on registers instead of buf
                    head_fused::columns_one(w.type, row_at(h, 0), w.row_bytes, w.rows, w.K, io.x + h * io.xs, io.y + h * io.ys);
                    continue;
                }
                for (int64_t t = 0; t < m; ++t) std::fill_n(io.y + t * io.ldy + h * io.ys, w.K, 0.0f);
                for (int64_t o0 = 0; o0 < w.rows; o0 += chunk) {
                    const int64_t n_rows = std::min(chunk, w.rows - o0);
                    dequant(h, o0, n_rows, buf);
                    for (int64_t t = 0; t < m; ++t)
                        columns(buf, n_rows, w.K, io.x + t * io.ldx + h * io.xs + o0, io.y + t * io.ldy + h * io.ys, isa);
                }
            }
        };
        if (pool.size() == 1) task(0, w.H, 0);
        else pool.parallel_for(w.H, 1, task);
        return;
    }
    if (fused && m == 1) {  // decode: one task per head, its rows in one prefetched run
        auto task = [&](int64_t h0, int64_t h1, int) {
            for (int64_t h = h0; h < h1; ++h)
                head_fused::rows_one(w.type, row_at(h, 0), w.row_bytes, w.rows, w.K, io.x + h * io.xs, io.y + h * io.ys);
        };
        if (pool.size() == 1) task(0, w.H, 0);
        else pool.parallel_for(w.H, 1, task);
        return;
    }
    // Rows form: one task per (head, chunk of rows); every output is one dot product of the f32 kernel
    // (the fused types: rows_buf, the per-output sequence of head_fused::rows_one).
    auto task = [&](int64_t t0, int64_t t1, int) {
        alignas(64) float buf[kHeadRowsBuffer];
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t h = t / per_head, o0 = (t % per_head) * chunk, n_rows = std::min(chunk, w.rows - o0);
            dequant(h, o0, n_rows, buf);
            if (fused) {  // prefill: rows_one's sequence on the dequantized chunk
                head_fused::rows_buf(buf, n_rows, w.K, io.x + h * io.xs, io.ldx, io.y + h * io.ys + o0, io.ldy, m);
                continue;
            }
            kernels::MatmulArgs a;
            a.w = buf;
            a.w_row_stride = static_cast<size_t>(w.K) * sizeof(float);
            a.x = io.x + h * io.xs;
            a.ldx = io.ldx;
            a.y = io.y + h * io.ys + o0;
            a.ldy = io.ldy;
            a.m = m;
            a.K = w.K;
            a.n0 = 0;
            a.n1 = n_rows;
            f32(a);
        }
    };
    if (pool.size() == 1) task(0, per_head * w.H, 0);
    else pool.parallel_for(per_head * w.H, 1, task);
}

}  // namespace moe::cpu
