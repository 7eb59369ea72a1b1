// Attention over a Q8_0 KV cache (kernels/ref/kv_q8.h, kernels/cpu/attention.cpp) on fresh random
// inputs with per-vector magnitudes from 0.01 to 4, head dims that are not multiples of 32 or 16
// (padded blocks), MHA / GQA / MQA, MLA's latent layout (V inside the K rows), sequences crossing
// key tiles and positions not starting at 0:
//  - the quantizer's error per element is at most ~d/2 of its block (d = max|x| / 127);
//  - reference and fast paths (every ISA of this CPU) within the fp64 oracle's bound computed on
//    the dequantized values;
//  - the reference and the AVX-512 path give the same bits as over an f32 cache holding the
//    dequantized values (the dequantization in registers is exact), so the q8 kernel inherits the
//    f32 kernel's tested properties; prefill equals decode and the thread count does not change
//    the bits (every path);
//  - the output stays close to attention over the unquantized values (NMSE < 1e-3);
//  - the cache writer's fast quantizer (cpu::kv_q8_quantize_rows) gives the reference's bytes.
// On the AVX-512 path blocks of more than 4 query rows (prefill) dequantize each key tile once,
// smaller ones (decode) convert in registers: prefill = decode compares the two.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "dense_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_q8_quant.h"
#include "kernels/ref/attention.h"
#include "kernels/ref/kv_q8.h"

using namespace moe;

namespace {

constexpr double kU = 1.0 / (1 << 24);

struct Case {
    int64_t n_head, n_head_kv, dk, dv;
    int64_t p0, T;
    float q_scale;
    bool mla;  // V = the first dv elements of each K row (n_head_kv 1)
};

struct Data {
    std::vector<float> q, k, v;        // unquantized (f32 cache layout)
    std::vector<float> kd, vd;         // dequantized q8 values (f32 cache layout)
    std::vector<uint8_t> k8, v8;       // q8 cache
    std::vector<int32_t> pos;
};

// Random vectors with a random magnitude per vector (block scales spread over ~9 binades).
std::vector<float> random_rows(Rng& rng, int64_t rows, int64_t d) {
    std::vector<float> x = test::random_vec(rng, static_cast<size_t>(rows * d));
    for (int64_t r = 0; r < rows; ++r) {
        const float m = std::exp2(rng.uniform(-6.6f, 2.0f));
        for (int64_t i = 0; i < d; ++i) x[static_cast<size_t>(r * d + i)] *= m;
    }
    return x;
}

void quantize_rows(const std::vector<float>& x, int64_t rows, int64_t d, std::vector<uint8_t>& q8, std::vector<float>& deq) {
    const int64_t vb = kv_q8_vec_bytes(d);
    q8.assign(static_cast<size_t>(rows * vb), 0xAB);
    deq.assign(x.size(), 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
        kv_q8_quantize(x.data() + r * d, d, q8.data() + r * vb);
        kv_q8_dequantize(q8.data() + r * vb, d, deq.data() + r * d);
    }
}

Data make_data(Rng& rng, const Case& c) {
    Data d;
    const int64_t n_kv = c.p0 + c.T;
    d.q = test::random_vec(rng, static_cast<size_t>(c.T * c.n_head * c.dk));
    for (auto& x : d.q) x *= c.q_scale;
    d.k = random_rows(rng, n_kv * c.n_head_kv, c.dk);
    quantize_rows(d.k, n_kv * c.n_head_kv, c.dk, d.k8, d.kd);
    if (!c.mla) {
        d.v = random_rows(rng, n_kv * c.n_head_kv, c.dv);
        quantize_rows(d.v, n_kv * c.n_head_kv, c.dv, d.v8, d.vd);
    }
    for (int64_t t = 0; t < c.T; ++t) d.pos.push_back(static_cast<int32_t>(c.p0 + t));
    return d;
}

AttentionSpec spec_of(const Case& c, DType kv) {
    AttentionSpec s;
    s.n_head = c.n_head;
    s.n_head_kv = c.n_head_kv;
    s.head_dim_k = c.dk;
    s.head_dim_v = c.dv;
    s.kv_type = kv;
    if (c.mla) s.v_row_stride = c.dk;
    return s;
}

// which: 0 = q8 cache, 1 = f32 cache of the dequantized values, 2 = f32 cache of the originals.
AttentionArgs args_of(const Case& c, const Data& d, int which, float* out, int64_t t0 = 0, int64_t nt = -1,
                      int64_t n_kv = -1) {
    AttentionArgs a;
    a.q = d.q.data() + t0 * c.n_head * c.dk;
    const void* k = which == 0 ? static_cast<const void*>(d.k8.data()) : which == 1 ? d.kd.data() : d.k.data();
    const void* v = which == 0 ? static_cast<const void*>(d.v8.data()) : which == 1 ? d.vd.data() : d.v.data();
    a.k = k;
    a.v = c.mla ? k : v;
    a.pos = d.pos.data() + t0;
    a.n_tokens = nt < 0 ? c.T : nt;
    a.n_kv = n_kv < 0 ? c.p0 + c.T : n_kv;
    a.out = out;
    return a;
}

// fp64 attention over the dequantized values with test_attention.cpp's error bound per (token, head).
void oracle(const Case& c, const Data& d, std::vector<double>& out, std::vector<double>& tol) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.dk));
    const int64_t group = c.n_head / c.n_head_kv;
    const int64_t vstride = c.mla ? c.dk : c.n_head_kv * c.dv;
    const std::vector<float>& V = c.mla ? d.kd : d.vd;
    out.assign(static_cast<size_t>(c.T * c.n_head * c.dv), 0.0);
    tol.assign(static_cast<size_t>(c.T * c.n_head), 0.0);
    for (int64_t t = 0; t < c.T; ++t)
        for (int64_t h = 0; h < c.n_head; ++h) {
            const int64_t g = h / group, n = d.pos[static_cast<size_t>(t)] + 1;
            const float* q = d.q.data() + (t * c.n_head + h) * c.dk;
            std::vector<double> s(static_cast<size_t>(n));
            double mx = -INFINITY, S = 0, vmax = 0;
            auto vat = [&](int64_t j, int64_t i) { return static_cast<double>(V[static_cast<size_t>(j * vstride + g * c.dv + i)]); };
            for (int64_t j = 0; j < n; ++j) {
                double dot = 0, dabs = 0;
                for (int64_t i = 0; i < c.dk; ++i) {
                    const double kv = d.kd[static_cast<size_t>((j * c.n_head_kv + g) * c.dk + i)];
                    dot += q[i] * kv;
                    dabs += std::fabs(q[i] * kv);
                }
                s[static_cast<size_t>(j)] = dot * scale;
                mx = std::max(mx, s[static_cast<size_t>(j)]);
                S = std::max(S, dabs * scale);
                for (int64_t i = 0; i < c.dv; ++i) vmax = std::max(vmax, std::fabs(vat(j, i)));
            }
            double sum = 0;
            for (auto& x : s) sum += (x = std::exp(x - mx));
            for (int64_t j = 0; j < n; ++j)
                for (int64_t i = 0; i < c.dv; ++i)
                    out[static_cast<size_t>((t * c.n_head + h) * c.dv + i)] += s[static_cast<size_t>(j)] / sum * vat(j, i);
            tol[static_cast<size_t>(t * c.n_head + h)] = 2 * vmax * kU * (2.0 * (c.dk + 1) * S + 2.0 * n + n / 64.0 + 8);
        }
}

std::vector<Case> cases() {
    return {
        {4, 4, 64, 64, 0, 1, 1, false},       // MHA, T = 1 at position 0
        {8, 2, 80, 80, 0, 70, 1, false},      // GQA, 2.5 blocks per head, prefill longer than one tile
        {6, 1, 128, 128, 37, 5, 1, false},    // MQA, positions not starting at 0
        {4, 2, 72, 40, 130, 3, 1, false},     // dk != dv, 16-lane tails inside padded blocks
        {2, 2, 64, 64, 200, 1, 8, false},     // decode after 200 rows, peaked softmax
        {4, 1, 16, 8, 5, 2, 30, false},       // head dims below one block
        {3, 3, 96, 72, 10, 150, 1, false},    // MHA prefill: blocks of 8 tokens, ragged last block
        {16, 16, 128, 128, 300, 9, 1, false}, // OLMoE-shaped heads after 300 rows
        {4, 4, 128, 128, 0, 300, 1, false},   // prefill blocks of up to 128 rows over several tiles
        {16, 16, 128, 128, 1100, 2, 1, false}, // decode at depth: the split passes (>= 1024 keys)
        {12, 2, 72, 40, 1030, 2, 1, false},   // the same with GQA chunks of 4 + 2 and dim tails
        {4, 1, 576, 512, 20, 3, 1, true},     // MLA latent cache: V = first 512 of each 576 K row
        {2, 1, 52, 20, 66, 2, 1, true},       // MLA-style with tails
        {2, 1, 576, 512, 5, 40, 1, true},     // MLA prefill (blocks of > 4 rows: per-tile dequantization)
    };
}

std::string name(const Case& c) {
    return "H=" + std::to_string(c.n_head) + " Hkv=" + std::to_string(c.n_head_kv) + " dk=" + std::to_string(c.dk) +
           " dv=" + std::to_string(c.dv) + " p0=" + std::to_string(c.p0) + " T=" + std::to_string(c.T) +
           (c.mla ? " mla" : "");
}

}  // namespace

TEST(AttentionQ8, QuantizerErrorIsWithinHalfAStep) {
    Rng rng(0x9801);
    for (int64_t d : {1, 8, 31, 32, 33, 80, 128, 576}) {
        const std::vector<float> x = random_rows(rng, 5, d);
        std::vector<uint8_t> q8;
        std::vector<float> deq;
        quantize_rows(x, 5, d, q8, deq);
        for (int64_t r = 0; r < 5; ++r)
            for (int64_t b = 0; b * 32 < d; ++b) {
                const int64_t e = std::min<int64_t>(32, d - b * 32);
                float amax = 0;
                for (int64_t i = 0; i < e; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(r * d + b * 32 + i)]));
                const double step = amax / 127.0;
                for (int64_t i = 0; i < e; ++i) {
                    const size_t k = static_cast<size_t>(r * d + b * 32 + i);
                    // round(x / d) * fp16(d): half a step plus 127 x the scale's fp16 rounding (2^-11 relative)
                    ASSERT_LE(std::fabs(deq[k] - x[k]), step * (0.5 + 127.0 / 2048.0) + 1e-12) << "d=" << d << " i=" << k;
                }
            }
        // padding of the last block is zero
        if (d % 32) {
            const uint8_t* last = q8.data() + kv_q8_vec_bytes(d) - kKvQ8BlockBytes;
            for (int64_t i = d % 32; i < 32; ++i) ASSERT_EQ(last[2 + i], 0) << "d=" << d;
        }
    }
}

TEST(AttentionQ8, ReferenceAndFastPathsMatchFp64) {
    Rng rng(0x9802);
    ThreadPool pool(3);
    for (const Case& c : cases()) {
        const Data d = make_data(rng, c);
        std::vector<double> want, tol;
        oracle(c, d, want, tol);
        const AttentionSpec s = spec_of(c, DType::Q8_0);
        auto check = [&](const std::vector<float>& got, const char* what) {
            for (size_t i = 0; i < got.size(); ++i)
                ASSERT_LE(std::fabs(got[i] - want[i]), tol[i / static_cast<size_t>(c.dv)])
                    << what << " " << name(c) << " i=" << i << " got " << got[i] << " want " << want[i];
        };
        std::vector<float> out(want.size(), -7.0f);
        ref::attention(s, args_of(c, d, 0, out.data()));
        check(out, "ref");
        for (kernels::Isa isa : test::dense_isas()) {
            std::vector<float> o(want.size(), -7.0f);
            cpu::attention(s, args_of(c, d, 0, o.data()), &pool, isa);
            check(o, kernels::isa_name(isa));
        }
    }
}

TEST(AttentionQ8, SameBitsAsF32CacheOfDequantizedValues) {
    Rng rng(0x9803);
    ThreadPool pool(2);
    for (const Case& c : cases()) {
        const Data d = make_data(rng, c);
        const size_t n = static_cast<size_t>(c.T * c.n_head * c.dv);
        std::vector<float> a(n, -7.0f), b(n, -9.0f);
        ref::attention(spec_of(c, DType::Q8_0), args_of(c, d, 0, a.data()));
        ref::attention(spec_of(c, DType::F32), args_of(c, d, 1, b.data()));
        ASSERT_EQ(a, b) << "ref " << name(c);
        for (kernels::Isa isa : test::dense_isas()) {
            // Only the intrinsics path: the scalar loops are compiled C++ in which GCC chooses FMA
            // contraction per loop, so two scalar kernels may differ in the last bit (the scalar q8
            // path is held to the fp64 bound above).
            if (!cpu::dense_use_avx512(isa)) continue;
            std::fill(a.begin(), a.end(), -7.0f);
            std::fill(b.begin(), b.end(), -9.0f);
            cpu::attention(spec_of(c, DType::Q8_0), args_of(c, d, 0, a.data()), &pool, isa);
            cpu::attention(spec_of(c, DType::F32), args_of(c, d, 1, b.data()), &pool, isa);
            ASSERT_EQ(a, b) << kernels::isa_name(isa) << " " << name(c);
        }
    }
}

TEST(AttentionQ8, PrefillEqualsDecodeAndThreadCountBitExactly) {
    Rng rng(0x9804);
    ThreadPool pool1(1), pool4(4);
    for (const Case& c : cases()) {
        const Data d = make_data(rng, c);
        const AttentionSpec s = spec_of(c, DType::Q8_0);
        const size_t per_tok = static_cast<size_t>(c.n_head * c.dv);
        for (kernels::Isa isa : test::dense_isas()) {
            std::vector<float> prefill(per_tok * static_cast<size_t>(c.T)), single(prefill.size());
            cpu::attention(s, args_of(c, d, 0, prefill.data()), &pool4, isa);
            cpu::attention(s, args_of(c, d, 0, single.data()), &pool1, isa);
            ASSERT_EQ(single, prefill) << "thread count changed the bits, " << kernels::isa_name(isa) << " " << name(c);
            for (int64_t t = 0; t < c.T; ++t) {
                std::vector<float> one(per_tok);
                cpu::attention(s, args_of(c, d, 0, one.data(), t, 1, c.p0 + t + 1), &pool4, isa);
                for (size_t i = 0; i < per_tok; ++i)
                    ASSERT_EQ(one[i], prefill[t * per_tok + i]) << kernels::isa_name(isa) << " " << name(c) << " t=" << t;
            }
        }
    }
}

TEST(AttentionQ8, CloseToUnquantizedCache) {
    Rng rng(0x9805);
    for (const Case& c : cases()) {
        if (c.mla) continue;  // (the f32 MLA layout needs V inside K; covered by the bit tests above)
        const Data d = make_data(rng, c);
        const size_t n = static_cast<size_t>(c.T * c.n_head * c.dv);
        std::vector<float> q8(n), f32(n);
        cpu::attention(spec_of(c, DType::Q8_0), args_of(c, d, 0, q8.data()), nullptr);
        cpu::attention(spec_of(c, DType::F32), args_of(c, d, 2, f32.data()), nullptr);
        double num = 0, den = 0;
        for (size_t i = 0; i < n; ++i) {
            num += (static_cast<double>(q8[i]) - f32[i]) * (static_cast<double>(q8[i]) - f32[i]);
            den += static_cast<double>(f32[i]) * f32[i];
        }
        EXPECT_GT(num, 0.0) << name(c);  // it is quantized
        EXPECT_LT(num / den, 1e-3) << name(c);
    }
}

// cpu::kv_q8_quantize_rows (KvCache::write) against the reference quantizer, byte for byte, on every
// path: random vectors over ~9 binades, padded tails, zero blocks, and exact rounding ties (values
// whose scaled magnitude is k + 0.5, where std::round goes away from zero).
TEST(AttentionQ8, FastQuantizerGivesReferenceBytes) {
    Rng rng(0x9806);
    for (int64_t d : {1, 8, 16, 17, 31, 32, 33, 48, 80, 128, 576}) {
        const int64_t n = 7, vb = kv_q8_vec_bytes(d);
        std::vector<float> x = random_rows(rng, n, d);
        for (int64_t i = 0; i < d; ++i) x[static_cast<size_t>(d + i)] = 0.0f;  // row 1: all zero
        // row 2: max 127 (scale 1) and halves: ties at +-(k + 0.5)
        for (int64_t i = 0; i < d; ++i)
            x[static_cast<size_t>(2 * d + i)] = i % 32 == 0 ? 127.0f : (i % 2 ? -1.0f : 1.0f) * (static_cast<float>(i % 29) + 0.5f);
        std::vector<uint8_t> want(static_cast<size_t>(n * vb)), got(want.size());
        for (int64_t r = 0; r < n; ++r) kv_q8_quantize(x.data() + r * d, d, want.data() + r * vb);
        for (kernels::Isa isa : test::dense_isas()) {
            std::fill(got.begin(), got.end(), 0xCD);
            cpu::kv_q8_quantize_rows(x.data(), n, d, got.data(), vb, isa);
            ASSERT_EQ(want, got) << "d=" << d << " " << kernels::isa_name(isa);
        }
    }
}
