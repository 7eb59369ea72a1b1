// Attention sinks and the sliding window (gpt-oss): reference and fast paths on every ISA of this
// CPU, f32, f16 and q8_0 caches (the oracle reads the rounded / dequantized values), against an
// fp64 oracle written from the definition (keys
// max(0, p - window + 1) .. p; the head's sink logit in the softmax denominator), at positions far
// past the window and across key tiles; prefill equals decode bit for bit; and a sink pulls the
// output towards zero by exactly the weight it takes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/cpu/attention.h"
#include "kernels/ref/attention.h"
#include "kernels/ref/kv_q8.h"

using namespace moe;

namespace {

struct Case {
    int64_t n_head, n_head_kv, d, n_kv, T, window;
    bool sinks;
    DType kv;
};

struct Data {
    std::vector<float> q, k, v, sinks;
    std::vector<uint16_t> k16, v16;
    std::vector<uint8_t> k8, v8;  // q8_0 cache: one vector per (row, kv head)
    std::vector<int32_t> pos;
};

Data make(const Case& c, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    Data d;
    d.q.resize(static_cast<size_t>(c.T * c.n_head * c.d));
    d.k.resize(static_cast<size_t>(c.n_kv * c.n_head_kv * c.d));
    d.v.resize(d.k.size());
    for (auto& x : d.q) x = nd(rng);
    for (auto& x : d.k) x = nd(rng);
    for (auto& x : d.v) x = nd(rng);
    // Sinks of the size of typical scores, some large enough to take most of the weight.
    for (int64_t h = 0; h < c.n_head; ++h) d.sinks.push_back(2.0f * nd(rng) + (h % 3 == 0 ? 3.0f : 0.0f));
    if (c.kv == DType::F16) {  // the oracle reads the rounded values
        for (auto& x : d.k) d.k16.push_back(fp32_to_fp16(x)), x = fp16_to_fp32(d.k16.back());
        for (auto& x : d.v) d.v16.push_back(fp32_to_fp16(x)), x = fp16_to_fp32(d.v16.back());
    }
    if (c.kv == DType::Q8_0) {  // the oracle reads the dequantized values
        const int64_t vb = kv_q8_vec_bytes(c.d), n_vec = c.n_kv * c.n_head_kv;
        d.k8.resize(static_cast<size_t>(n_vec * vb));
        d.v8.resize(d.k8.size());
        for (int64_t r = 0; r < n_vec; ++r) {
            kv_q8_quantize(d.k.data() + r * c.d, c.d, d.k8.data() + r * vb);
            kv_q8_quantize(d.v.data() + r * c.d, c.d, d.v8.data() + r * vb);
            kv_q8_dequantize(d.k8.data() + r * vb, c.d, d.k.data() + r * c.d);
            kv_q8_dequantize(d.v8.data() + r * vb, c.d, d.v.data() + r * c.d);
        }
    }
    for (int64_t t = 0; t < c.T; ++t) d.pos.push_back(static_cast<int32_t>(c.n_kv - c.T + t));
    return d;
}

std::vector<double> oracle(const Case& c, const Data& d) {
    const int64_t group = c.n_head / c.n_head_kv;
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    std::vector<double> out(static_cast<size_t>(c.T * c.n_head * c.d), 0.0);
    for (int64_t t = 0; t < c.T; ++t)
        for (int64_t h = 0; h < c.n_head; ++h) {
            const int64_t g = h / group, p = d.pos[static_cast<size_t>(t)];
            const int64_t j0 = c.window > 0 ? std::max<int64_t>(0, p - c.window + 1) : 0;
            std::vector<double> s;
            double mx = c.sinks ? d.sinks[static_cast<size_t>(h)] : -INFINITY;
            for (int64_t j = j0; j <= p; ++j) {
                double dot = 0;
                for (int64_t i = 0; i < c.d; ++i)
                    dot += static_cast<double>(d.q[static_cast<size_t>((t * c.n_head + h) * c.d + i)]) *
                           d.k[static_cast<size_t>((j * c.n_head_kv + g) * c.d + i)];
                s.push_back(dot * scale);
                mx = std::max(mx, s.back());
            }
            double sum = c.sinks ? std::exp(d.sinks[static_cast<size_t>(h)] - mx) : 0.0;
            for (auto& x : s) sum += (x = std::exp(x - mx));
            for (int64_t j = j0; j <= p; ++j)
                for (int64_t i = 0; i < c.d; ++i)
                    out[static_cast<size_t>((t * c.n_head + h) * c.d + i)] +=
                        s[static_cast<size_t>(j - j0)] / sum * d.v[static_cast<size_t>((j * c.n_head_kv + g) * c.d + i)];
        }
    return out;
}

AttentionSpec spec_of(const Case& c) {
    AttentionSpec s;
    s.n_head = c.n_head;
    s.n_head_kv = c.n_head_kv;
    s.head_dim_k = s.head_dim_v = c.d;
    s.kv_type = c.kv;
    s.window = c.window;
    return s;
}

AttentionArgs args_of(const Case& c, const Data& d, std::vector<float>& out) {
    AttentionArgs a;
    a.q = d.q.data();
    a.k = c.kv == DType::F16 ? static_cast<const void*>(d.k16.data())
          : c.kv == DType::Q8_0 ? static_cast<const void*>(d.k8.data()) : d.k.data();
    a.v = c.kv == DType::F16 ? static_cast<const void*>(d.v16.data())
          : c.kv == DType::Q8_0 ? static_cast<const void*>(d.v8.data()) : d.v.data();
    a.pos = d.pos.data();
    a.n_tokens = c.T;
    a.n_kv = c.n_kv;
    a.sinks = c.sinks ? d.sinks.data() : nullptr;
    out.assign(static_cast<size_t>(c.T * c.n_head * c.d), 0.0f);
    a.out = out.data();
    return a;
}

// Each output is a convex combination of V values (|v| < ~5) with f32 weights: a few ulp of
// rounding per step over <= ~1100 keys stays far below 1e-4; a wrong window (keys outside or
// missing), a missing sink or a sink counted twice moves outputs by >= 1e-2 for these inputs.
constexpr double kTol = 1e-4;

const Case kCases[] = {
    {8, 2, 64, 200, 6, 16, true, DType::F32},   // decode/prefill tail far past the window
    {8, 2, 64, 200, 6, 16, true, DType::F16},
    {4, 4, 32, 150, 150, 7, true, DType::F32},  // prefill from position 0: inside and past the window
    {6, 1, 40, 130, 3, 0, true, DType::F32},    // sinks alone, MQA, odd head dim, past one key tile
    {4, 2, 64, 90, 90, 70, false, DType::F32},  // window alone, wider than a key tile
    {64, 8, 64, 300, 2, 128, true, DType::F32},  // gpt-oss-20b shape (64 heads / 8 kv, window 128)
    {8, 2, 64, 1100, 2, 0, true, DType::F16},    // sinks alone at depth: decode in split passes (>= 1024 keys)
    // q8_0 cache: decode / prefill tails past the window, prefill from 0 (the 32-row blocks that
    // dequantize each tile once run only without a window: sinks alone, and the window alone wider
    // than a tile with GQA 4 x 2 heads), odd head dim (padded block), gpt-oss-20b shape.
    {8, 2, 64, 200, 6, 16, true, DType::Q8_0},
    {4, 4, 32, 150, 150, 7, true, DType::Q8_0},
    {6, 1, 40, 130, 40, 0, true, DType::Q8_0},
    {8, 2, 64, 90, 90, 70, false, DType::Q8_0},
    {64, 8, 64, 300, 2, 128, true, DType::Q8_0},
    {8, 2, 64, 1100, 2, 0, true, DType::Q8_0},
};

}  // namespace

TEST(AttentionSinks, ReferenceAndFastPathsMatchFp64) {
    ThreadPool pool(2);
    for (const Case& c : kCases) {
        const Data d = make(c, static_cast<uint32_t>(c.n_kv * 7 + c.window));
        const std::vector<double> want = oracle(c, d);
        std::vector<float> out;
        auto check = [&](const char* what) {
            double worst = 0;
            for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(out[i] - want[i]));
            EXPECT_LE(worst, kTol) << what << " heads " << c.n_head << " window " << c.window << " "
                                   << dtype_name(c.kv);
        };
        AttentionSpec s = spec_of(c);
        ref::attention(s, args_of(c, d, out));
        check("ref");
        for (kernels::Isa isa : {kernels::Isa::Scalar, kernels::Isa::Avx2, kernels::Isa::Avx512}) {
            if (!kernels::isa_supported(isa)) continue;
            cpu::attention(s, args_of(c, d, out), &pool, isa);
            check(kernels::isa_name(isa));
        }
    }
}

// Every cache type, window + sinks and sinks alone (without a window, prefill runs 32-row blocks
// and, for q8_0, dequantizes each tile once, while decode converts in registers).
TEST(AttentionSinks, PrefillEqualsDecodeBitExactly) {
    ThreadPool pool(2);
    for (DType kv : {DType::F32, DType::F16, DType::Q8_0})
        for (int64_t window : {16, 0}) {
            const Case c{8, 2, 64, 100, 100, window, true, kv};
            const Data d = make(c, 5);
            for (kernels::Isa isa : {kernels::Isa::Scalar, kernels::Isa::Avx2, kernels::Isa::Avx512}) {
                if (!kernels::isa_supported(isa)) continue;
                std::vector<float> all;
                cpu::attention(spec_of(c), args_of(c, d, all), &pool, isa);
                for (int64_t t = 0; t < c.T; t += 9) {
                    std::vector<float> one;
                    AttentionArgs a = args_of({c.n_head, c.n_head_kv, c.d, t + 1, 1, c.window, true, c.kv}, d, one);
                    a.q = d.q.data() + t * c.n_head * c.d;
                    a.pos = d.pos.data() + t;
                    cpu::attention(spec_of(c), a, nullptr, isa);
                    ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * c.n_head * c.d, one.size() * sizeof(float)))
                        << kernels::isa_name(isa) << " " << dtype_name(kv) << " window " << window << " token " << t;
                }
            }
        }
}

// With identical values in every V row the output is v * (1 - sink weight): checks the sink's
// share exactly where the result is known in closed form.
TEST(AttentionSinks, SinkTakesItsShare) {
    const Case c{2, 1, 16, 10, 1, 0, true, DType::F32};
    Data d = make(c, 9);
    for (int64_t j = 0; j < c.n_kv; ++j)
        for (int64_t i = 0; i < c.d; ++i) d.v[static_cast<size_t>(j * c.d + i)] = static_cast<float>(i + 1);
    std::fill(d.k.begin(), d.k.end(), 0.0f);  // every score 0: weights exp(0) per key
    d.sinks = {0.0f, std::log(30.0f)};        // sink weight 1/11 and 30/40
    std::vector<float> out;
    cpu::attention(spec_of(c), args_of(c, d, out), nullptr);
    for (int64_t i = 0; i < c.d; ++i) {
        EXPECT_NEAR(out[static_cast<size_t>(i)], (i + 1) * 10.0 / 11.0, 1e-5);
        EXPECT_NEAR(out[static_cast<size_t>(c.d + i)], (i + 1) * 10.0 / 40.0, 1e-5);
    }
}

// A q8_0 cache gives the same bits as an f32 cache holding its dequantized values on the AVX-512
// path (the conversion is exact and the operation order is shared), with the window and sinks too.
TEST(AttentionSinks, Q8SameBitsAsF32CacheOfDequantizedValues) {
    if (!kernels::isa_supported(kernels::Isa::Avx512)) GTEST_SKIP() << "no AVX-512 on this CPU (the bit identity is the intrinsics path's)";
    ThreadPool pool(2);
    for (const Case& c : kCases) {
        if (c.kv != DType::Q8_0) continue;
        const Data d = make(c, static_cast<uint32_t>(c.n_kv * 7 + c.window));  // d.k, d.v: dequantized
        Case f = c;
        f.kv = DType::F32;
        std::vector<float> q8, f32;
        cpu::attention(spec_of(c), args_of(c, d, q8), &pool, kernels::Isa::Avx512);
        cpu::attention(spec_of(f), args_of(f, d, f32), &pool, kernels::Isa::Avx512);
        ASSERT_EQ(0, std::memcmp(q8.data(), f32.data(), q8.size() * sizeof(float)))
            << "heads " << c.n_head << " window " << c.window << " T " << c.T;
    }
}
