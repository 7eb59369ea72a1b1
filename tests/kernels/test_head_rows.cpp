// cpu::head_rows_product (MLA's absorbed k_b / v_b read in the file's type): both forms against an
// fp64 product of the dequantized rows, on fresh random weights of several types and awkward
// shapes (rows not a multiple of the chunk, heads inside a larger row block), on every ISA path;
// each output independent of the batch and the thread count (prefill = decode bit for bit); the
// columns form identical across paths (same fmas); nothing written outside the outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "core/rng.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/head_rows.h"
#include "kernels/ref/dequant_row.h"
#include "kernels/ref/quant_formats.h"
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

}  // namespace
}  // namespace moe
