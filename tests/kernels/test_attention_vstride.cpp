// AttentionSpec::v_row_stride (MLA's latent cache: V is the first head_dim_v elements of each K
// row): reference and fast paths on every ISA of this CPU, f32 and f16 caches, give the same bits
// as with the same values packed into a separate V buffer (the path every other test checks
// against its fp64 oracle), at sizes crossing the key tile and with an odd V width.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/cpu/attention.h"
#include "kernels/ref/attention.h"

using namespace moe;

namespace {

struct Case {
    int64_t n_head, dk, dv, n_kv, T;
    DType kv;
};

void run_case(const Case& c) {
    std::mt19937 rng(static_cast<uint32_t>(c.dk * 131 + c.dv * 7 + c.n_kv));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> q(static_cast<size_t>(c.T * c.n_head * c.dk)), k(static_cast<size_t>(c.n_kv * c.dk));
    for (auto& x : q) x = nd(rng);
    for (auto& x : k) x = nd(rng);
    // Packed V: the first dv of each K row, contiguous (the classic layout).
    std::vector<float> v(static_cast<size_t>(c.n_kv * c.dv));
    for (int64_t j = 0; j < c.n_kv; ++j) std::memcpy(v.data() + j * c.dv, k.data() + j * c.dk, sizeof(float) * c.dv);
    std::vector<uint16_t> k16, v16;
    for (float x : k) k16.push_back(fp32_to_fp16(x));
    for (float x : v) v16.push_back(fp32_to_fp16(x));
    const bool f16 = c.kv == DType::F16;
    std::vector<int32_t> pos;
    for (int64_t t = 0; t < c.T; ++t) pos.push_back(static_cast<int32_t>(c.n_kv - c.T + t));

    AttentionSpec s;
    s.n_head = c.n_head;
    s.n_head_kv = 1;
    s.head_dim_k = c.dk;
    s.head_dim_v = c.dv;
    s.kv_type = c.kv;
    AttentionArgs a;
    a.q = q.data();
    a.pos = pos.data();
    a.n_tokens = c.T;
    a.n_kv = c.n_kv;
    std::vector<float> packed(static_cast<size_t>(c.T * c.n_head * c.dv)), strided(packed.size());
    AttentionSpec st = s;
    st.v_row_stride = c.dk;
    auto both = [&](auto&& fn, const char* what) {
        a.k = f16 ? static_cast<const void*>(k16.data()) : k.data();
        a.v = f16 ? static_cast<const void*>(v16.data()) : v.data();
        a.out = packed.data();
        fn(s, a);
        a.v = a.k;  // V inside the K rows
        a.out = strided.data();
        fn(st, a);
        EXPECT_EQ(0, std::memcmp(packed.data(), strided.data(), packed.size() * sizeof(float)))
            << what << " dk " << c.dk << " dv " << c.dv << " n_kv " << c.n_kv << " " << dtype_name(c.kv);
    };
    both([](const AttentionSpec& sp, const AttentionArgs& ar) { ref::attention(sp, ar); }, "ref");
    ThreadPool pool(2);
    for (kernels::Isa isa : {kernels::Isa::Scalar, kernels::Isa::Avx2, kernels::Isa::Avx512}) {
        if (!kernels::isa_supported(isa)) continue;
        both([&](const AttentionSpec& sp, const AttentionArgs& ar) { cpu::attention(sp, ar, &pool, isa); },
             kernels::isa_name(isa));
    }
}

}  // namespace

TEST(AttentionVStride, LatentRowsEqualPackedV) {
    for (DType kv : {DType::F32, DType::F16}) {
        run_case({4, 48, 32, 70, 5, kv});    // tiny-deepseek2's rows, keys past one tile
        run_case({3, 37, 21, 9, 9, kv});     // odd widths, prefill of every row
        run_case({16, 576, 512, 130, 1, kv});  // DeepSeek-V2 decode: 512 latent + 64 rope
    }
}
