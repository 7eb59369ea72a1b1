// cpu::head_rows_product (MLA's absorbed k_b / v_b read in the file's type): both forms against an
// fp64 product of the dequantized rows, on fresh random weights of several types and awkward
// shapes (rows not a multiple of the chunk, heads inside a larger row block), on every ISA path;
// each output independent of the batch and the thread count (prefill = decode bit for bit); the
// columns form identical across paths (same fmas); nothing written outside the outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "core/rng.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dense_isa.h"
#include "kernels/cpu/dequant_row.h"
#include "kernels/cpu/head_rows.h"
#include "kernels/cpu/head_rows_fused.h"
#include "kernels/ref/dequant_row.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quant_random.h"
#include "dense_test_util.h"

namespace moe {
namespace {

uint64_t seed() {
    static const uint64_t s = std::random_device{}();
    return s;
}

struct Case {
    DType type;
    int64_t H, head_rows, first, rows, K;
    bool columns;
};

struct Data {
    std::vector<uint8_t> w;       // H * head_rows rows of the type
    std::vector<double> wd;       // the same, dequantized
    size_t row_bytes = 0;
};

Data make_weights(Rng& rng, const Case& c) {
    Data d;
    d.row_bytes = row_bytes(c.type, static_cast<uint64_t>(c.K));
    const int64_t n_rows = c.H * c.head_rows;
    d.w.resize(d.row_bytes * static_cast<size_t>(n_rows));
    d.wd.resize(static_cast<size_t>(n_rows * c.K));
    std::vector<float> x(static_cast<size_t>(c.K)), y(static_cast<size_t>(c.K));
    for (int64_t r = 0; r < n_rows; ++r) {
        for (auto& v : x) v = rng.uniform(-1.0f, 1.0f) * rng.uniform(0.1f, 2.0f);
        uint8_t* row = d.w.data() + d.row_bytes * static_cast<size_t>(r);
        EXPECT_TRUE(ref::quantize_row(c.type, x.data(), row, c.K)) << dtype_name(c.type);
        ref::dequant_row(c.type, row, y.data(), c.K);
        for (int64_t k = 0; k < c.K; ++k) d.wd[static_cast<size_t>(r * c.K + k)] = y[static_cast<size_t>(k)];
    }
    return d;
}

// Outputs of all m rows; activations/outputs padded per head (xs, ys larger than needed) and per
// row, with sentinels in the padding.
struct Product {
    std::vector<float> y;
    int64_t ldy, ys;
};

constexpr float kSentinel = 12345.0f;

// Whether this build and CPU run head_rows_fused.h (the AVX-512 path with FMA).
bool head_fused_expected() {
    return kernels::isa_supported(kernels::Isa::Avx512) && cpu::dense_use_avx512(kernels::Isa::Avx512);
}

Product run(ThreadPool& pool, kernels::Isa isa, const cpu::HeadRows& w, const std::vector<float>& x, int64_t ldx,
        int64_t xs, int64_t m, int64_t t0 = 0) {
    const int64_t n_out = w.columns ? w.K : w.rows;
    Product r{{}, w.H * (n_out + 3) + 5, n_out + 3};
    r.y.assign(static_cast<size_t>(m * r.ldy), kSentinel);
    const kernels::CpuKernels k(isa);
    cpu::head_rows_product(pool, k.matmul(DType::F32, "test"), w, {x.data() + t0 * ldx, ldx, xs, r.y.data(), r.ldy, r.ys}, m, isa);
    return r;
}

TEST(HeadRows, BothFormsMatchFp64OnEveryPathAndIgnoreTheBatch) {
    std::printf("[ head rows ] seed %llu\n", static_cast<unsigned long long>(seed()));
    Rng rng(seed());
    const Case cases[] = {
        {DType::F32, 3, 7, 2, 5, 96, true},    {DType::F32, 3, 7, 2, 5, 96, false},
        {DType::F16, 2, 40, 0, 40, 512, true}, {DType::Q8_0, 4, 9, 3, 6, 64, true},
        {DType::Q8_0, 4, 9, 3, 6, 64, false},  {DType::Q4_K, 2, 50, 17, 33, 512, true},
        {DType::Q4_K, 2, 50, 10, 37, 512, false}, {DType::Q6_K, 3, 20, 4, 16, 256, true},
        {DType::Q6_K, 3, 20, 4, 16, 256, false},  {DType::Q5_K, 2, 12, 1, 11, 256, true},
        {DType::Q4_0, 2, 12, 1, 11, 128, true},   {DType::Q4_0, 2, 12, 1, 11, 128, false},
        {DType::BF16, 1, 300, 0, 300, 32, true},  // 300 rows of 32: 256-row chunks, then 44
        // The fused types at m = 1 (head_rows_fused.h): Q8_0 at K 512 (eight-block column passes),
        // 288 (one pass and a one-block tail), 64 above (tails only); Q5_K both forms.
        {DType::Q8_0, 2, 30, 5, 21, 512, true},   {DType::Q8_0, 2, 30, 5, 21, 512, false},
        {DType::Q8_0, 3, 11, 0, 11, 288, true},   {DType::Q8_0, 3, 11, 0, 11, 288, false},
        {DType::Q5_K, 2, 40, 7, 29, 512, true},   {DType::Q5_K, 2, 40, 7, 29, 512, false},
        {DType::Q5_K, 2, 12, 1, 11, 256, false},
    };
    ThreadPool pool1(1), pool2(2), pool3(3);
    for (const Case& c : cases) {
        SCOPED_TRACE(std::string(dtype_name(c.type)) + (c.columns ? " columns" : " rows") + " K " + std::to_string(c.K));
        const Data d = make_weights(rng, c);
        cpu::HeadRows w;
        w.data = d.w.data();
        w.type = c.type;
        w.row_bytes = d.row_bytes;
        w.head_rows = c.head_rows;
        w.first = c.first;
        w.rows = c.rows;
        w.K = c.K;
        w.H = c.H;
        w.columns = c.columns;
        const int64_t n_in = c.columns ? c.rows : c.K, n_out = c.columns ? c.K : c.rows;
        const int64_t m = 5, xs = n_in + 2, ldx = c.H * xs + 1;
        std::vector<float> x(static_cast<size_t>(m * ldx));
        for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);

        // fp64 reference and the bound: a chain of n fmas errs by at most n ulps of its terms' sum.
        std::vector<double> ref(static_cast<size_t>(m * c.H * n_out)), mag(ref.size());
        for (int64_t t = 0; t < m; ++t)
            for (int64_t h = 0; h < c.H; ++h)
                for (int64_t o = 0; o < c.rows; ++o)
                    for (int64_t k = 0; k < c.K; ++k) {
                        const double wv = d.wd[static_cast<size_t>((h * c.head_rows + c.first + o) * c.K + k)];
                        const double xv = x[static_cast<size_t>(t * ldx + h * xs + (c.columns ? o : k))];
                        const size_t i = static_cast<size_t>((t * c.H + h) * n_out + (c.columns ? k : o));
                        ref[i] += wv * xv;
                        mag[i] += std::fabs(wv * xv);
                    }
        std::vector<float> first_columns;  // the columns form's bits on the first path
        for (kernels::Isa isa : test::dense_isas()) {
            SCOPED_TRACE(kernels::isa_name(isa));
            const Product all = run(pool2, isa, w, x, ldx, xs, m);
            for (int64_t t = 0; t < m; ++t)
                for (int64_t h = 0; h < c.H; ++h) {
                    for (int64_t o = 0; o < n_out; ++o) {
                        const size_t i = static_cast<size_t>((t * c.H + h) * n_out + o);
                        const float got = all.y[static_cast<size_t>(t * all.ldy + h * all.ys + o)];
                        ASSERT_LE(std::fabs(got - ref[i]), (static_cast<double>(n_in) + 2) * 0x1p-24 * mag[i] + 1e-30)
                            << "t " << t << " h " << h << " o " << o;
                    }
                    for (int64_t p = n_out; p < all.ys; ++p)
                        ASSERT_EQ(all.y[static_cast<size_t>(t * all.ldy + h * all.ys + p)], kSentinel) << "wrote past a head";
                }
            // One row at a time, on 1 and 3 threads: the same bits.
            for (int64_t t = 0; t < m; ++t)
                for (ThreadPool* p : {&pool1, &pool3}) {
                    const Product one = run(*p, isa, w, x, ldx, xs, 1, t);
                    for (int64_t h = 0; h < c.H; ++h)
                        for (int64_t o = 0; o < n_out; ++o)
                            ASSERT_EQ(one.y[static_cast<size_t>(h * one.ys + o)],
                                      all.y[static_cast<size_t>(t * all.ldy + h * all.ys + o)])
                                << "row " << t << " alone on " << p->size() << " threads";
                }
            if (c.columns) {
                if (first_columns.empty()) first_columns = all.y;
                else ASSERT_EQ(first_columns, all.y) << "the columns form differs across paths";
            }
        }
    }
}

// The rows form's per-output sequence in scalar code (head_rows_fused.h): 16 lanes, lane i an fma
// chain over values 16 g + i for g ascending, then hsum's fixed tree.
float rows_scalar(const float* w, const float* x, int64_t K) {
    float a[16] = {};
    for (int64_t k = 0; k < K; k += 16)
        for (int i = 0; i < 16; ++i) a[i] = std::fma(w[k + i], x[k + i], a[i]);
    float h[8], q[4];
    for (int i = 0; i < 8; ++i) h[i] = a[i] + a[i + 8];
    for (int i = 0; i < 4; ++i) q[i] = h[i] + h[i + 4];
    return (q[0] + q[2]) + (q[1] + q[3]);
}

// The fused kernels alone, on random blocks (every bit pattern of the quant and scale fields:
// Q5_K's fifth bit of every sub-block, Q4_K / Q5_K's 6-bit scales of sub-blocks 4-7, negative Q8_0
// and Q6_K levels), against scalar code on ref::dequant_row's values: rows_one and rows_buf equal
// the scalar rows sequence, columns_one the scalar fma chain over the rows, bit for bit, and both
// stay within an fp64 bound. On an AVX-512 build and CPU every fused type must be supported here
// (so MLA decode takes the fused one-wave path for them).
TEST(HeadRows, FusedDecodersGiveDequantRowBits) {
    Rng rng(seed() ^ 0x5a5a);
    const bool avx512 = head_fused_expected();
    struct Shape {
        DType type;
        int64_t K;
    };
    const Shape shapes[] = {{DType::Q8_0, 32},  {DType::Q8_0, 96},  {DType::Q8_0, 288}, {DType::Q8_0, 512},
                            {DType::Q4_K, 256}, {DType::Q4_K, 512}, {DType::Q5_K, 256}, {DType::Q5_K, 768},
                            {DType::Q6_K, 256}, {DType::Q6_K, 512}};
    int ran = 0;
    for (const Shape& sh : shapes)
        for (int64_t n_rows : {1, 6, 13}) {
            SCOPED_TRACE(std::string(dtype_name(sh.type)) + " K " + std::to_string(sh.K) + " rows " + std::to_string(n_rows));
            const bool fused = cpu::head_fused::supported(sh.type, sh.K, kernels::Isa::Avx512);
            ASSERT_EQ(fused, avx512);
            EXPECT_FALSE(cpu::head_fused::supported(sh.type, sh.K + 16, kernels::Isa::Avx512));
            EXPECT_FALSE(cpu::head_fused::supported(sh.type, sh.K, kernels::Isa::Avx2));
            if (!fused) continue;
            const size_t rb = row_bytes(sh.type, static_cast<uint64_t>(sh.K));
            const int64_t K = sh.K;
            std::vector<uint8_t> w(rb * static_cast<size_t>(n_rows));
            ASSERT_TRUE(ref::fill_random_blocks(sh.type, rng, w.data(), n_rows * K / dtype_info(sh.type).block, 2.0f));
            std::vector<float> buf(static_cast<size_t>(n_rows * K)), cbuf(buf.size());
            for (int64_t o = 0; o < n_rows; ++o) {
                ref::dequant_row(sh.type, w.data() + rb * static_cast<size_t>(o), buf.data() + o * K, K);
                cpu::dequant_row(sh.type, w.data() + rb * static_cast<size_t>(o), cbuf.data() + o * K, K, kernels::Isa::Avx512);
            }
            ASSERT_EQ(0, std::memcmp(buf.data(), cbuf.data(), sizeof(float) * buf.size())) << "cpu::dequant_row";
            const std::vector<float> xr = test::random_vec(rng, static_cast<size_t>(K)),
                                     xc = test::random_vec(rng, static_cast<size_t>(n_rows));
            // Rows form.
            std::vector<float> y(static_cast<size_t>(n_rows) + 1, kSentinel), yb(static_cast<size_t>(n_rows), kSentinel);
            cpu::head_fused::rows_one(sh.type, w.data(), rb, n_rows, K, xr.data(), y.data());
            cpu::head_fused::rows_buf(buf.data(), n_rows, K, xr.data(), K, yb.data(), 1, 1);
            ASSERT_EQ(y[static_cast<size_t>(n_rows)], kSentinel);
            for (int64_t o = 0; o < n_rows; ++o) {
                const float want = rows_scalar(buf.data() + o * K, xr.data(), K);
                ASSERT_EQ(y[static_cast<size_t>(o)], want) << "rows_one, row " << o;
                ASSERT_EQ(yb[static_cast<size_t>(o)], want) << "rows_buf, row " << o;
                double ref = 0, mag = 0;
                for (int64_t k = 0; k < K; ++k) {
                    ref += static_cast<double>(buf[static_cast<size_t>(o * K + k)]) * xr[static_cast<size_t>(k)];
                    mag += std::fabs(static_cast<double>(buf[static_cast<size_t>(o * K + k)]) * xr[static_cast<size_t>(k)]);
                }
                ASSERT_LE(std::fabs(want - ref), (static_cast<double>(K) / 16 + 6) * 0x1p-24 * mag + 1e-30) << "row " << o;
            }
            // Columns form.
            std::vector<float> yc(static_cast<size_t>(K) + 16, kSentinel);
            cpu::head_fused::columns_one(sh.type, w.data(), rb, n_rows, K, xc.data(), yc.data());
            for (int64_t k = 0; k < K; ++k) {
                float a = 0.0f;
                double ref = 0, mag = 0;
                for (int64_t o = 0; o < n_rows; ++o) {
                    const float wv = buf[static_cast<size_t>(o * K + k)];
                    a = std::fma(xc[static_cast<size_t>(o)], wv, a);
                    ref += static_cast<double>(wv) * xc[static_cast<size_t>(o)];
                    mag += std::fabs(static_cast<double>(wv) * xc[static_cast<size_t>(o)]);
                }
                ASSERT_EQ(yc[static_cast<size_t>(k)], a) << "columns_one, k " << k;
                ASSERT_LE(std::fabs(a - ref), (static_cast<double>(n_rows) + 2) * 0x1p-24 * mag + 1e-30) << "k " << k;
            }
            for (size_t k = static_cast<size_t>(K); k < yc.size(); ++k) ASSERT_EQ(yc[k], kSentinel) << "wrote past y";
            ++ran;
        }
    std::printf("[ head rows ] fused kernels checked on %d shapes%s\n", ran, avx512 ? "" : " (no AVX-512: none)");
}

}  // namespace
}  // namespace moe
