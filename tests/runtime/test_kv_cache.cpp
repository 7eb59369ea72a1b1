// KV cache: sizes, layout, f16 rounding, sequence independence, context overflow error, and the
// op-level prefill-vs-decode check (RoPE + cache + attention give the same bits token by token).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstring>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "kernels/cpu/attention.h"
#include "kernels/ref/attention.h"
#include "kernels/ref/rope.h"
#include "runtime/kv_cache.h"
#include "kernels/ref/kv_q8.h"

using namespace moe;

namespace {
std::vector<float> rnd(Rng& r, size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = r.uniform(-1.0f, 1.0f);
    return v;
}
KvCacheSpec spec(int64_t layers, int64_t ctx, int64_t seqs, int64_t hkv, int64_t dk, int64_t dv, DType t) {
    return KvCacheSpec{layers, ctx, seqs, hkv, dk, dv, t, {}, 0};
}
}  // namespace

TEST(KvCache, BytesLayoutAndRoundTrip) {
    Rng rng(0xcac4e);
    for (DType t : {DType::F32, DType::F16}) {
        const KvCacheSpec s = spec(3, 10, 2, 2, 8, 6, t);
        KvCache c(s);
        const uint64_t e = t == DType::F16 ? 2 : 4;
        // per (layer, seq): K 10*2*8 and V 10*2*6 elements, each padded to 64 bytes
        auto pad = [](uint64_t b) { return (b + 63) / 64 * 64; };
        EXPECT_EQ(c.bytes(), 3u * 2u * (pad(160 * e) + pad(120 * e)));
        EXPECT_EQ(KvCache::bytes_for(s), c.bytes());
        EXPECT_EQ(c.length(0), 0);
        // write 4 rows of layer 1, seq 1 at position 0, then 3 more at position 4
        const auto k = rnd(rng, 7 * 2 * 8), v = rnd(rng, 7 * 2 * 6);
        EXPECT_EQ(c.begin_append(1, 4), 0);
        c.write(1, 1, 0, 4, k.data(), v.data());
        c.commit(1, 4);
        EXPECT_EQ(c.begin_append(1, 3), 4);
        c.write(1, 1, 4, 3, k.data() + 4 * 16, v.data() + 4 * 12);
        c.commit(1, 3);
        EXPECT_EQ(c.length(1), 7);
        EXPECT_EQ(c.length(0), 0);
        for (int64_t i = 0; i < 7 * 16; ++i) {
            const float want = t == DType::F16 ? fp16_to_fp32(fp32_to_fp16(k[i])) : k[i];
            const float got = t == DType::F16 ? fp16_to_fp32(static_cast<const uint16_t*>(c.k(1, 1))[i])
                                              : static_cast<const float*>(c.k(1, 1))[i];
            ASSERT_EQ(got, want) << i;
        }
        for (int64_t i = 0; i < 7 * 12; ++i) {
            const float want = t == DType::F16 ? fp16_to_fp32(fp32_to_fp16(v[i])) : v[i];
            const float got = t == DType::F16 ? fp16_to_fp32(static_cast<const uint16_t*>(c.v(1, 1))[i])
                                              : static_cast<const float*>(c.v(1, 1))[i];
            ASSERT_EQ(got, want) << i;
        }
        // buffers of different (layer, seq) do not overlap and are 64-byte aligned
        std::vector<const void*> ptrs;
        for (int64_t l = 0; l < 3; ++l)
            for (int64_t q = 0; q < 2; ++q) {
                EXPECT_EQ(reinterpret_cast<uintptr_t>(c.k(l, q)) % 64, 0u);
                EXPECT_EQ(reinterpret_cast<uintptr_t>(c.v(l, q)) % 64, 0u);
                EXPECT_GE(static_cast<const char*>(c.v(l, q)) - static_cast<const char*>(c.k(l, q)),
                          static_cast<ptrdiff_t>(160 * e));
                ptrs.push_back(c.k(l, q));
            }
        for (size_t i = 1; i < ptrs.size(); ++i)
            EXPECT_GE(static_cast<const char*>(ptrs[i]) - static_cast<const char*>(ptrs[i - 1]),
                      static_cast<ptrdiff_t>(160 * e + 120 * e));
        c.truncate(1, 2);
        EXPECT_EQ(c.length(1), 2);
        EXPECT_EQ(c.begin_append(1, 1), 2);
        c.clear(1);
        EXPECT_EQ(c.length(1), 0);
        c.commit(0, 5);
        c.clear_all();
        EXPECT_EQ(c.length(0), 0);
    }
}

TEST(KvCache, ContextOverflowIsAClearError) {
    KvCache c(spec(1, 16, 2, 1, 4, 4, DType::F16));
    try {
        c.begin_append(0, 17);
        FAIL();
    } catch (const moe::Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("[kv_cache] prompt of 17 tokens exceeds the context of 16; use --ctx"), std::string::npos) << m;
    }
    EXPECT_EQ(c.begin_append(0, 16), 0);  // exactly full is fine
    c.commit(0, 10);
    try {
        c.begin_append(0, 7);
        FAIL();
    } catch (const moe::Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("prompt of 17 tokens (10 cached + 7 new) exceeds the context of 16; use --ctx"), std::string::npos)
            << m;
    }
    EXPECT_EQ(c.begin_append(0, 6), 10);
    EXPECT_EQ(c.begin_append(1, 16), 0);  // the other sequence is independent
}

TEST(KvCache, InvalidSpecsAreErrors) {
    EXPECT_THROW(KvCache(spec(1, 0, 1, 1, 4, 4, DType::F32)), moe::Error);
    EXPECT_THROW(KvCache(spec(1, 8, 0, 1, 4, 4, DType::F32)), moe::Error);
    EXPECT_THROW(KvCache(spec(1, 8, 1, 0, 4, 4, DType::F32)), moe::Error);
    EXPECT_THROW(KvCache(spec(1, 8, 1, 1, 4, 4, DType::Q4_0)), moe::Error);
    // sizes that overflow 64 bits are refused before any allocation
    EXPECT_THROW(KvCache::bytes_for(spec(1 << 20, int64_t{1} << 40, 1 << 20, 8, 128, 128, DType::F32)), moe::Error);
    // an impossible (but representable) size fails to allocate with a clear error, not a crash
    try {
        KvCache c(spec(1024, int64_t{1} << 30, 64, 8, 128, 128, DType::F16));
        FAIL() << "allocated " << c.bytes();
    } catch (const moe::Error& e) {
        EXPECT_NE(std::string(e.what()).find("use a smaller --ctx"), std::string::npos) << e.what();
    }
}

// The cache's pages are touched (zeroed) at creation: decode then writes a new row per layer and
// token without a page fault (one fault per new 4 KiB page before, ~15 us each in a VM). Writing
// half of a 128 MiB f32 cache row by row took 16384 faults when it was left to fault lazily.
TEST(KvCache, ResidentAndZeroedAtCreation) {
    Rng rng(0x7a9e);
    const KvCacheSpec s = spec(4, 2048, 1, 16, 128, 128, DType::F32);  // 4 x 2048 x 16 KiB = 128 MiB
    KvCache c(s);
    ASSERT_GE(c.bytes(), uint64_t{128} << 20);
    const auto k = rnd(rng, 16 * 128), v = rnd(rng, 16 * 128);
    rusage before{}, after{};
    getrusage(RUSAGE_THREAD, &before);
    for (int64_t pos = 0; pos < 1024; ++pos)
        for (int64_t l = 0; l < 4; ++l) c.write(l, 0, pos, 1, k.data(), v.data());
    getrusage(RUSAGE_THREAD, &after);
    // Lazily faulted: 16384 (one per 4 KiB). The bound leaves room for a sanitizer's own shadow
    // memory faulting in (ThreadSanitizer: 128 here), not for the cache's pages.
    EXPECT_LT(after.ru_minflt - before.ru_minflt, 1024) << "page faults while writing rows of a fresh cache";
    EXPECT_EQ(static_cast<const float*>(c.v(3, 0))[1023 * 16 * 128 + 5], v[5]);
    for (int64_t l = 0; l < 4; ++l)  // the rows not written are zero
        for (const void* p : {c.k(l, 0), c.v(l, 0)}) {
            const auto* f = static_cast<const float*>(p);
            for (int64_t i = 1024 * 16 * 128; i < 2048 * 16 * 128; i += 61) ASSERT_EQ(f[i], 0.0f) << l << " " << i;
        }
}

// Op-level prefill vs decode: a prompt of T tokens processed in one batch (rope on q and k of all
// tokens, one cache append, attention of T queries) and the same tokens processed one at a time
// (append 1, attend 1) give bit-identical attention outputs, for the reference and every ISA path of
// the fast kernel, f32, f16 and q8_0 caches, with a second sequence interleaved in the same cache.
TEST(KvCache, PrefillAndDecodeGiveIdenticalAttentionOutputs) {
    const int64_t n_head = 8, n_head_kv = 2, hd = 80, T = 75, n_ctx = 96;
    RopeSpec rs;
    rs.mode = RopeMode::Neox;
    rs.head_dim = hd;
    rs.n_rot = 64;
    rs.freq_base = 1e6f;
    const RopeCache rope(rs, n_ctx);
    Rng rng(0xdecade);
    const auto q = rnd(rng, T * n_head * hd), k = rnd(rng, T * n_head_kv * hd), v = rnd(rng, T * n_head_kv * hd);
    const auto other = rnd(rng, n_ctx * n_head_kv * hd);
    ThreadPool pool(3);
    for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
        AttentionSpec as;
        as.n_head = n_head;
        as.n_head_kv = n_head_kv;
        as.head_dim_k = as.head_dim_v = hd;
        as.kv_type = type;
        const size_t per_tok = static_cast<size_t>(n_head * hd);
        std::vector<kernels::Isa> paths = kernels::supported_isas();
        for (int variant = -1; variant < static_cast<int>(paths.size()); ++variant) {  // -1 = reference
            auto attend = [&](const AttentionArgs& a) {
                if (variant < 0) ref::attention(as, a);
                else cpu::attention(as, a, &pool, paths[static_cast<size_t>(variant)]);
            };
            const int64_t layer = 1, seq = 1;
            // prefill
            KvCache c1(spec(2, n_ctx, 2, n_head_kv, hd, hd, type));
            std::vector<float> qp = q, kp = k, out_prefill(T * per_tok);
            std::vector<int32_t> pos(T);
            for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(t);
            ref::rope_apply(rope, qp.data(), T, n_head, pos.data());
            ref::rope_apply(rope, kp.data(), T, n_head_kv, pos.data());
            c1.write(layer, 0, 0, n_ctx, other.data(), other.data());  // noise in the other sequence
            const int64_t p0 = c1.begin_append(seq, T);
            c1.write(layer, seq, p0, T, kp.data(), v.data());
            c1.commit(seq, T);
            AttentionArgs a{qp.data(), c1.k(layer, seq), c1.v(layer, seq), pos.data(), T, c1.length(seq), out_prefill.data()};
            attend(a);
            // decode, one token at a time
            KvCache c2(spec(2, n_ctx, 2, n_head_kv, hd, hd, type));
            for (int64_t t = 0; t < T; ++t) {
                std::vector<float> qt(q.begin() + t * per_tok, q.begin() + (t + 1) * per_tok);
                std::vector<float> kt(k.begin() + t * n_head_kv * hd, k.begin() + (t + 1) * n_head_kv * hd);
                const int64_t p = c2.begin_append(seq, 1);
                const int32_t pp = static_cast<int32_t>(p);
                ref::rope_apply(rope, qt.data(), 1, n_head, &pp);
                ref::rope_apply(rope, kt.data(), 1, n_head_kv, &pp);
                c2.write(layer, seq, p, 1, kt.data(), v.data() + t * n_head_kv * hd);
                c2.commit(seq, 1);
                std::vector<float> o(per_tok);
                AttentionArgs d{qt.data(), c2.k(layer, seq), c2.v(layer, seq), &pp, 1, c2.length(seq), o.data()};
                attend(d);
                for (size_t i = 0; i < per_tok; ++i)
                    ASSERT_EQ(o[i], out_prefill[t * per_tok + i])
                        << dtype_name(type) << " " << (variant < 0 ? "ref" : kernels::isa_name(paths[variant]))
                        << " token " << t << " i " << i;
            }
        }
    }
}

// q8_0 cache: one kv_q8 vector (34 B per started 32 elements, zero-padded) per (row, kv head), rows
// written at any position hold exactly kv_q8_quantize of their input; a 128-dim cache is 34/64 of
// f16's size; MLA (no V buffer) works.
TEST(KvCache, Q8LayoutAndBytes) {
    Rng rng(0x9808);
    for (const int64_t hd : {int64_t{40}, int64_t{128}}) {
        const int64_t hkv = 2, ctx = 12;
        KvCache c(spec(2, ctx, 2, hkv, hd, hd, DType::Q8_0));
        const uint64_t vec = static_cast<uint64_t>(kv_q8_vec_bytes(hd));
        auto pad = [](uint64_t b) { return (b + 63) / 64 * 64; };
        EXPECT_EQ(c.bytes(), 2u * 2u * 2u * pad(ctx * hkv * vec));
        if (hd == 128) {
            EXPECT_EQ(KvCache::bytes_for(spec(2, ctx, 2, hkv, hd, hd, DType::F16)) * 34, c.bytes() * 64);
        }
        const auto k = rnd(rng, 5 * hkv * hd), v = rnd(rng, 5 * hkv * hd);
        c.write(1, 1, 3, 5, k.data(), v.data());  // rows 3..7 of layer 1, seq 1
        std::vector<uint8_t> want(vec);
        for (int64_t r = 0; r < 5 * hkv; ++r) {
            kv_q8_quantize(k.data() + r * hd, hd, want.data());
            ASSERT_EQ(0, std::memcmp(static_cast<const uint8_t*>(c.k(1, 1)) + (3 * hkv + r) * vec, want.data(), vec)) << r;
            kv_q8_quantize(v.data() + r * hd, hd, want.data());
            ASSERT_EQ(0, std::memcmp(static_cast<const uint8_t*>(c.v(1, 1)) + (3 * hkv + r) * vec, want.data(), vec)) << r;
        }
    }
    KvCache mla(spec(1, 4, 1, 1, 576, 0, DType::Q8_0));
    EXPECT_EQ(mla.bytes(), (4u * 18u * 34u + 63) / 64 * 64);  // padded to 64 bytes
    const auto kk = rnd(rng, 576);
    mla.write(0, 0, 2, 1, kk.data(), nullptr);
    EXPECT_NEAR(kv_q8_at(static_cast<const uint8_t*>(mla.k(0, 0)) + 2 * 18 * 34, 575), kk[575], 0.01);
}

// Sliding-window ring (runtime/kv_cache.h): a layer with window W and max_batch B stores R = W + B - 1
// rows plus W - 1 mirror rows; position p lands in row p % R (and R + p % R when p % R < W - 1); the
// other layers keep n_ctx rows; bytes follow; a rewind keeps its length only while the ring still
// holds every key the next queries read.
TEST(KvCache, SlidingWindowRingLayout) {
    Rng rng(0x5a1d);
    const int64_t W = 6, B = 4, R = W + B - 1, n_ctx = 40, hkv = 2, dk = 8, dv = 4;
    KvCacheSpec s = spec(2, n_ctx, 2, hkv, dk, dv, DType::F32);
    s.window = {W, 0};
    s.max_batch = B;
    KvCache c(s);
    EXPECT_EQ(c.ring(0), R);
    EXPECT_EQ(c.ring(1), 0);
    EXPECT_EQ(KvCache::stored_rows(s, 0), R + W - 1);
    auto pad = [](uint64_t b) { return (b + 63) / 64 * 64; };
    const uint64_t rows0 = static_cast<uint64_t>(R + W - 1);
    EXPECT_EQ(c.bytes(), 2u * (pad(rows0 * hkv * dk * 4) + pad(rows0 * hkv * dv * 4)) +
                             2u * (pad(uint64_t(n_ctx) * hkv * dk * 4) + pad(uint64_t(n_ctx) * hkv * dv * 4)));
    EXPECT_EQ(KvCache::bytes_for(s), c.bytes());
    // a ring that would not be smaller than the context is not used
    KvCacheSpec small = s;
    small.n_ctx = R + W - 1;
    EXPECT_EQ(KvCache(small).ring(0), 0);
    // 33 positions in batches of up to B; check every position the ring should still hold
    const int64_t N = 33;
    const auto k = rnd(rng, N * hkv * dk), v = rnd(rng, N * hkv * dv);
    for (int64_t p0 = 0; p0 < N;) {
        const int64_t n = std::min<int64_t>(1 + p0 % B, N - p0);
        ASSERT_EQ(c.begin_append(1, n), p0);
        c.write(0, 1, p0, n, k.data() + p0 * hkv * dk, v.data() + p0 * hkv * dv);
        c.commit(1, n);
        p0 += n;
    }
    const auto* K = static_cast<const float*>(c.k(0, 1));
    const auto* Vb = static_cast<const float*>(c.v(0, 1));
    for (int64_t p = N - R; p < N; ++p) {
        const int64_t r = p % R;
        for (int64_t i = 0; i < hkv * dk; ++i) ASSERT_EQ(K[r * hkv * dk + i], k[p * hkv * dk + i]) << p;
        for (int64_t i = 0; i < hkv * dv; ++i) ASSERT_EQ(Vb[r * hkv * dv + i], v[p * hkv * dv + i]) << p;
        if (r < W - 1) {
            for (int64_t i = 0; i < hkv * dk; ++i) ASSERT_EQ(K[(R + r) * hkv * dk + i], k[p * hkv * dk + i]) << p;
        }
    }
    // length 33, ring holds 24..32: a rewind to 30 needs keys from 25 (kept); to 29, from 24 (kept);
    // to 28, from 23 (gone: cleared)
    EXPECT_EQ(c.truncate(1, 30), 30);
    EXPECT_EQ(c.truncate(1, 30), 30);
    c.commit(1, 3);
    EXPECT_EQ(c.truncate(1, 29), 29);
    c.commit(1, 4);
    EXPECT_EQ(c.truncate(1, 28), 0);
    EXPECT_EQ(c.length(1), 0);
    // hostile specs
    KvCacheSpec bad = s;
    bad.window = {W};
    EXPECT_THROW(KvCache::bytes_for(bad), moe::Error);
    bad = s;
    bad.window = {-1, 0};
    EXPECT_THROW(KvCache::bytes_for(bad), moe::Error);
}

// Attention over the ring gives the same bits as over a cache that keeps every position, on the
// reference and every ISA path, for f32, f16 and q8_0, with queries well past several wraps and
// batches of up to B rows (prefill-like) and of one (decode).
TEST(KvCache, AttentionOverRingEqualsFullCache) {
    const int64_t n_head = 4, n_head_kv = 2, hd = 72, W = 19, B = 7, N = 90;
    Rng rng(0x71e9);
    const auto q = rnd(rng, N * n_head * hd), k = rnd(rng, N * n_head_kv * hd), v = rnd(rng, N * n_head_kv * hd);
    ThreadPool pool(2);
    for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
        KvCacheSpec sr = spec(1, 128, 1, n_head_kv, hd, hd, type);
        sr.window = {W};
        sr.max_batch = B;
        KvCache ring(sr), full(spec(1, 128, 1, n_head_kv, hd, hd, type));
        ASSERT_EQ(ring.ring(0), W + B - 1);
        AttentionSpec as;
        as.n_head = n_head;
        as.n_head_kv = n_head_kv;
        as.head_dim_k = as.head_dim_v = hd;
        as.kv_type = type;
        as.window = W;
        AttentionSpec asr = as;
        asr.ring = ring.ring(0);
        const std::vector<kernels::Isa> paths = kernels::supported_isas();
        const size_t per_tok = static_cast<size_t>(n_head * hd);
        for (int64_t p0 = 0; p0 < N;) {
            const int64_t n = std::min<int64_t>(p0 < 40 ? B - p0 % 3 : 1, N - p0);  // batches, then decode
            for (KvCache* c : {&ring, &full}) {
                c->write(0, 0, p0, n, k.data() + p0 * n_head_kv * hd, v.data() + p0 * n_head_kv * hd);
                c->commit(0, n);
            }
            std::vector<int32_t> pos(static_cast<size_t>(n));
            for (int64_t t = 0; t < n; ++t) pos[t] = static_cast<int32_t>(p0 + t);
            for (int variant = -1; variant < static_cast<int>(paths.size()); ++variant) {
                std::vector<float> o1(n * per_tok), o2(n * per_tok);
                AttentionArgs a1{q.data() + p0 * per_tok, ring.k(0, 0), ring.v(0, 0), pos.data(), n, p0 + n, o1.data()};
                AttentionArgs a2{q.data() + p0 * per_tok, full.k(0, 0), full.v(0, 0), pos.data(), n, p0 + n, o2.data()};
                if (variant < 0) {
                    ref::attention(asr, a1);
                    ref::attention(as, a2);
                } else {
                    cpu::attention(asr, a1, &pool, paths[static_cast<size_t>(variant)]);
                    cpu::attention(as, a2, &pool, paths[static_cast<size_t>(variant)]);
                }
                ASSERT_EQ(0, std::memcmp(o1.data(), o2.data(), o1.size() * sizeof(float)))
                    << dtype_name(type) << " " << (variant < 0 ? "ref" : kernels::isa_name(paths[variant])) << " at "
                    << p0 << "+" << n;
            }
            p0 += n;
        }
    }
}
