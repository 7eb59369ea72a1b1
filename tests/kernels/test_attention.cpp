// Causal GQA attention: reference and fast paths vs an fp64 oracle, f32/f16 caches, MQA/GQA/MHA,
// awkward head dims, sequences longer than one tile, positions not starting at 0; prefill vs decode
// and thread-count independence bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "dense_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/ref/attention.h"

using namespace moe;

namespace {

constexpr double kU = 1.0 / (1 << 24);

struct Case {
    int64_t n_head, n_head_kv, dk, dv;
    int64_t p0, T;  // query tokens at positions p0 .. p0+T-1; cache holds p0+T rows
    DType kv;
    float q_scale;  // multiplies q (large values make the max subtraction matter)
    float scale;    // 0 = 1/sqrt(dk)
};

struct Data {
    std::vector<float> q, k, v;       // k, v as the exact values the kernels see (f16-rounded for F16)
    std::vector<uint16_t> k16, v16;   // f16 copies
    std::vector<int32_t> pos;
    const void* kp() const { return k16.empty() ? static_cast<const void*>(k.data()) : k16.data(); }
    const void* vp() const { return v16.empty() ? static_cast<const void*>(v.data()) : v16.data(); }
};

Data make_data(Rng& rng, const Case& c) {
    Data d;
    const int64_t n_kv = c.p0 + c.T;
    d.q = test::random_vec(rng, static_cast<size_t>(c.T * c.n_head * c.dk));
    for (auto& x : d.q) x *= c.q_scale;
    d.k = test::random_vec(rng, static_cast<size_t>(n_kv * c.n_head_kv * c.dk));
    d.v = test::random_vec(rng, static_cast<size_t>(n_kv * c.n_head_kv * c.dv));
    if (c.kv == DType::F16) {
        d.k = test::round_f16(d.k);
        d.v = test::round_f16(d.v);
        d.k16 = test::to_f16(d.k);
        d.v16 = test::to_f16(d.v);
    }
    for (int64_t t = 0; t < c.T; ++t) d.pos.push_back(static_cast<int32_t>(c.p0 + t));
    return d;
}

AttentionSpec spec_of(const Case& c) {
    AttentionSpec s;
    s.n_head = c.n_head;
    s.n_head_kv = c.n_head_kv;
    s.head_dim_k = c.dk;
    s.head_dim_v = c.dv;
    s.scale = c.scale;
    s.kv_type = c.kv;
    return s;
}

AttentionArgs args_of(const Case& c, const Data& d, float* out, int64_t t0 = 0, int64_t nt = -1, int64_t n_kv = -1) {
    AttentionArgs a;
    a.q = d.q.data() + t0 * c.n_head * c.dk;
    a.k = d.kp();
    a.v = d.vp();
    a.pos = d.pos.data() + t0;
    a.n_tokens = nt < 0 ? c.T : nt;
    a.n_kv = n_kv < 0 ? c.p0 + c.T : n_kv;
    a.out = out;
    return a;
}

// fp64 oracle; also returns the per-output error bound (see the derivation inside).
void oracle(const Case& c, const Data& d, std::vector<double>& out, std::vector<double>& tol) {
    const double scale = c.scale != 0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.dk));
    const int64_t group = c.n_head / c.n_head_kv;
    out.assign(static_cast<size_t>(c.T * c.n_head * c.dv), 0.0);
    tol.assign(static_cast<size_t>(c.T * c.n_head), 0.0);
    for (int64_t t = 0; t < c.T; ++t)
        for (int64_t h = 0; h < c.n_head; ++h) {
            const int64_t g = h / group, n = d.pos[static_cast<size_t>(t)] + 1;
            const float* q = d.q.data() + (t * c.n_head + h) * c.dk;
            std::vector<double> s(static_cast<size_t>(n));
            double mx = -INFINITY, S = 0, vmax = 0;
            for (int64_t j = 0; j < n; ++j) {
                double dot = 0, dabs = 0;
                for (int64_t i = 0; i < c.dk; ++i) {
                    const double kv = d.k[static_cast<size_t>((j * c.n_head_kv + g) * c.dk + i)];
                    dot += q[i] * kv;
                    dabs += std::fabs(q[i] * kv);
                }
                s[static_cast<size_t>(j)] = dot * scale;
                mx = std::max(mx, s[static_cast<size_t>(j)]);
                S = std::max(S, dabs * scale);
                for (int64_t i = 0; i < c.dv; ++i)
                    vmax = std::max(vmax, std::fabs(static_cast<double>(d.v[static_cast<size_t>((j * c.n_head_kv + g) * c.dv + i)])));
            }
            double sum = 0;
            for (auto& x : s) sum += (x = std::exp(x - mx));
            for (int64_t j = 0; j < n; ++j)
                for (int64_t i = 0; i < c.dv; ++i)
                    out[static_cast<size_t>((t * c.n_head + h) * c.dv + i)] +=
                        s[static_cast<size_t>(j)] / sum * d.v[static_cast<size_t>((j * c.n_head_kv + g) * c.dv + i)];
            // Error bound, f32 arithmetic with unit roundoff u:
            //  - each score: a dk-term dot product (sequential or 16-lane FMA) then * scale:
            //    |ds| <= (dk + 1) u S, S = max_j scale * sum_i |q_i k_ji|;
            //  - softmax weights: d ln w_j = ds_j - sum_k w_k ds_k, so relative <= 2 max|ds|, plus exp
            //    (2u), the running sum of n terms (n u), per-tile rescaling (<= n/64 + 1 u) and the
            //    final reciprocal (2u);
            //  - output sum_j w_j v_j of n terms: n u max|v|.
            // |d out| <= max|v| u (2 (dk + 1) S + 2n + n/64 + 8); we allow twice that.
            tol[static_cast<size_t>(t * c.n_head + h)] =
                2 * vmax * kU * (2.0 * (c.dk + 1) * S + 2.0 * n + n / 64.0 + 8);
        }
}

std::vector<Case> cases() {
    std::vector<Case> v;
    for (DType kv : {DType::F32, DType::F16}) {
        v.push_back({4, 4, 64, 64, 0, 1, kv, 1, 0});        // MHA, T = 1 at position 0
        v.push_back({8, 2, 80, 80, 0, 70, kv, 1, 0});       // GQA, prefill longer than one tile
        v.push_back({6, 1, 128, 128, 37, 5, kv, 1, 0});     // MQA, positions not starting at 0
        v.push_back({4, 2, 72, 40, 130, 3, kv, 1, 0.05f});  // head dims with 16-lane tails, dk != dv, given scale
        v.push_back({2, 2, 64, 64, 200, 1, kv, 8, 0});      // decode after 200 cached rows, peaked softmax
        v.push_back({4, 1, 16, 8, 5, 2, kv, 30, 0});        // tiny dims, very large scores
        v.push_back({3, 3, 96, 72, 10, 150, kv, 1, 0});     // MHA prefill: blocks of 8 tokens, ragged last block, dv tail
        v.push_back({6, 2, 48, 48, 0, 77, kv, 1, 0});       // GQA group 3: row groups of 4 + 2 mixing tokens and heads
        // prefill blocks of up to 128 rows (one thread) sharing each staged tile: MHA over several
        // tiles from position 0, GQA group 4 (blocks of 32 tokens x 4 heads) after cached rows
        v.push_back({4, 4, 128, 128, 0, 300, kv, 1, 0});
        v.push_back({8, 2, 64, 64, 100, 200, kv, 1, 0});
        // decode at depth (>= 1024 keys: the split passes on 2 and 4 threads): OLMoE-shaped heads
        // across the threshold, GQA with a ragged last tile, group 6 (chunks of 4 + 2) with dim tails
        v.push_back({16, 16, 128, 128, 1023, 2, kv, 1, 0});
        v.push_back({8, 4, 64, 64, 1100, 3, kv, 1, 0});
        v.push_back({12, 2, 48, 40, 1030, 2, kv, 1, 0});
    }
    return v;
}

std::string name(const Case& c) {
    return "H=" + std::to_string(c.n_head) + " Hkv=" + std::to_string(c.n_head_kv) + " dk=" + std::to_string(c.dk) +
           " dv=" + std::to_string(c.dv) + " p0=" + std::to_string(c.p0) + " T=" + std::to_string(c.T) + " kv=" +
           dtype_name(c.kv);
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& tol,
                  const Case& c, const std::string& what) {
    for (size_t i = 0; i < got.size(); ++i) {
        const double t = tol[i / static_cast<size_t>(c.dv)];
        ASSERT_LE(std::fabs(got[i] - want[i]), t) << what << " " << name(c) << " i=" << i << " got " << got[i]
                                                  << " want " << want[i];
    }
}

}  // namespace

TEST(Attention, ReferenceAndFastPathsMatchFp64) {
    Rng rng(0xa77e);
    ThreadPool pool(3);
    for (const Case& c : cases()) {
        const Data d = make_data(rng, c);
        std::vector<double> want, tol;
        oracle(c, d, want, tol);
        const AttentionSpec s = spec_of(c);
        std::vector<float> out(want.size(), -7.0f);
        ref::attention(s, args_of(c, d, out.data()));
        expect_close(out, want, tol, c, "ref");
        for (kernels::Isa isa : test::dense_isas()) {
            std::vector<float> o(want.size(), -7.0f);
            cpu::attention(s, args_of(c, d, o.data()), &pool, isa);
            expect_close(o, want, tol, c, kernels::isa_name(isa));
        }
    }
}

// A token's output is the same bits whether computed in a batched prefill, alone as a decode step
// (with the cache holding only rows 0..pos), or with a different thread count.
TEST(Attention, PrefillEqualsDecodeBitExactly) {
    Rng rng(0xdec0de);
    ThreadPool pool1(1), pool2(2), pool4(4);
    for (const Case& c : cases()) {
        const Data d = make_data(rng, c);
        const AttentionSpec s = spec_of(c);
        const size_t per_tok = static_cast<size_t>(c.n_head * c.dv);
        std::vector<float> prefill(per_tok * static_cast<size_t>(c.T));
        // reference
        ref::attention(s, args_of(c, d, prefill.data()));
        for (int64_t t = 0; t < c.T; ++t) {
            std::vector<float> one(per_tok);
            ref::attention(s, args_of(c, d, one.data(), t, 1, c.p0 + t + 1));
            for (size_t i = 0; i < per_tok; ++i) ASSERT_EQ(one[i], prefill[t * per_tok + i]) << "ref " << name(c);
        }
        for (kernels::Isa isa : test::dense_isas()) {
            cpu::attention(s, args_of(c, d, prefill.data()), &pool4, isa);
            std::vector<float> single(prefill.size());
            cpu::attention(s, args_of(c, d, single.data()), &pool1, isa);
            ASSERT_EQ(single, prefill) << "thread count changed the bits, " << kernels::isa_name(isa) << " " << name(c);
            // decode on 2 and 4 threads: the AVX-512 path's split passes (one pair, two pairs)
            for (ThreadPool* pool : {&pool2, &pool4})
                for (int64_t t = 0; t < c.T; ++t) {
                    std::vector<float> one(per_tok);
                    cpu::attention(s, args_of(c, d, one.data(), t, 1, c.p0 + t + 1), pool, isa);
                    for (size_t i = 0; i < per_tok; ++i)
                        ASSERT_EQ(one[i], prefill[t * per_tok + i])
                            << kernels::isa_name(isa) << " " << name(c) << " t=" << t << " threads " << pool->size();
                }
        }
    }
}

// Causality: changing cache rows after a query's position must not change its output, and changing
// one at or before it must.
TEST(Attention, IsCausal) {
    Rng rng(0xca5a1);
    const Case c{4, 2, 64, 64, 0, 100, DType::F32, 1, 0};
    Data d = make_data(rng, c);
    const AttentionSpec s = spec_of(c);
    for (kernels::Isa isa : test::dense_isas()) {
        std::vector<float> base(static_cast<size_t>(c.T * c.n_head * c.dv)), after(base.size());
        cpu::attention(s, args_of(c, d, base.data()), nullptr, isa);
        Data e = d;
        const int64_t j = 60;  // perturb key/value row 60 of kv head 1
        for (int64_t i = 0; i < c.dk; ++i) e.k[static_cast<size_t>((j * c.n_head_kv + 1) * c.dk + i)] += 0.5f;
        cpu::attention(s, args_of(c, e, after.data()), nullptr, isa);
        for (int64_t t = 0; t < c.T; ++t)
            for (int64_t h = 0; h < c.n_head; ++h) {
                const size_t o = static_cast<size_t>((t * c.n_head + h) * c.dv);
                const bool same = std::equal(base.begin() + o, base.begin() + o + c.dv, after.begin() + o);
                // heads 2, 3 read kv head 1 (group of 2); they change from token 60 on
                EXPECT_EQ(same, t < j || h < 2) << "t=" << t << " h=" << h;
            }
    }
}
