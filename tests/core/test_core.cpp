// Core runtime: checked size math, dtype registry, fp16/bf16 conversion, tensor views, arena, rng.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/arena.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "core/tensor.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

using namespace moe;

TEST(Checked, DetectsOverflow) {
    EXPECT_EQ(checked_add(1, 2, "t", "x"), 3u);
    EXPECT_EQ(checked_mul(1ull << 31, 4, "t", "x"), 1ull << 33);
    EXPECT_THROW(checked_add(~0ull, 1, "t", "x"), Error);
    EXPECT_THROW(checked_mul(1ull << 33, 1ull << 33, "t", "x"), Error);
    const int64_t dims[3] = {1 << 22, 1 << 22, 1 << 22};  // 2^66
    EXPECT_THROW(checked_product(dims, 3, "t", "x"), Error);
    const int64_t zero[2] = {4, 0};
    EXPECT_THROW(checked_product(zero, 2, "t", "x"), Error);
    EXPECT_EQ(checked_align(33, 32, "t", "x"), 64u);
    EXPECT_EQ(checked_align(64, 32, "t", "x"), 64u);
    EXPECT_THROW(checked_cast<int32_t>(uint64_t{1} << 40, "t", "x"), Error);
}

TEST(Checked, ErrorNamesComponent) {
    try {
        checked_mul(~0ull, 3, "gguf", "tensor size");
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.component(), "gguf");
        EXPECT_NE(std::string(e.what()).find("[gguf] size overflow computing tensor size"), std::string::npos);
    }
}

TEST(DType, KnownSizes) {
    // Sizes from ggml-common.h (FACTS.md section 3).
    struct { DType t; uint32_t block, bytes; } cases[] = {
        {DType::F32, 1, 4}, {DType::F16, 1, 2}, {DType::BF16, 1, 2}, {DType::Q4_0, 32, 18},
        {DType::Q4_1, 32, 20}, {DType::Q5_0, 32, 22}, {DType::Q5_1, 32, 24}, {DType::Q8_0, 32, 34},
        {DType::Q2_K, 256, 84}, {DType::Q3_K, 256, 110}, {DType::Q4_K, 256, 144}, {DType::Q5_K, 256, 176},
        {DType::Q6_K, 256, 210}, {DType::Q8_K, 256, 292}, {DType::MXFP4, 32, 17}, {DType::IQ4_XS, 256, 136},
    };
    for (auto& c : cases) {
        EXPECT_EQ(dtype_info(c.t).block, c.block) << dtype_name(c.t);
        EXPECT_EQ(dtype_info(c.t).bytes, c.bytes) << dtype_name(c.t);
    }
    EXPECT_EQ(find_dtype(4), nullptr);  // removed Q4_2
    EXPECT_EQ(find_dtype(40), nullptr);
    EXPECT_EQ(dtype_from_name("Q4_K"), DType::Q4_K);
    EXPECT_EQ(dtype_from_name("bf16"), DType::BF16);
    EXPECT_FALSE(dtype_from_name("q9_9").has_value());
    EXPECT_EQ(row_bytes(DType::Q8_0, 64), 68u);
    EXPECT_THROW(row_bytes(DType::Q4_K, 100), Error);
    EXPECT_DOUBLE_EQ(dtype_bits_per_weight(DType::Q8_0), 8.5);
}

TEST(Fp16, AllHalfValuesRoundTrip) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = fp16_to_fp32(static_cast<uint16_t>(h));
        if (std::isnan(f)) {
            EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f))));
            continue;
        }
        EXPECT_EQ(fp32_to_fp16(f), h) << h;
    }
}

TEST(Fp16, RoundingMatchesHardware) {
    Rng rng(7);
    for (int i = 0; i < 200000; ++i) {
        // random bit patterns over the whole float range plus values near the fp16 range
        float f = i % 2 ? fp32_from_bits(static_cast<uint32_t>(rng.next())) : rng.uniform(-70000.f, 70000.f) * (i % 3 ? 1e-4f : 1.f);
        if (std::isnan(f)) continue;
#if defined(__F16C__)
        const uint16_t hw = static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
        ASSERT_EQ(fp32_to_fp16(f), hw) << f;
#else
        // independent fp64 check: the result is the nearest half (ties to even)
        const double back = fp16_to_fp32(fp32_to_fp16(f));
        if (std::fabs(f) < 65504) {
            EXPECT_LE(std::fabs(back - f), std::fabs(f) * 4.9e-4 + 3e-8);
        }
#endif
    }
}

TEST(Bf16, RoundToNearestEven) {
    EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x3f808000)), 0x3f80);  // tie -> even
    EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x3f818000)), 0x3f82);  // tie -> even (up)
    EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x3f808001)), 0x3f81);
    EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
    Rng rng(3);
    for (int i = 0; i < 100000; ++i) {
        const float f = rng.normal() * 100.f;
        const double err = std::fabs(static_cast<double>(bf16_to_fp32(fp32_to_bf16(f))) - f);
        EXPECT_LE(err, std::fabs(f) * (1.0 / 256.0) + 1e-30);
    }
}

TEST(Tensor, ViewStridesAndBytes) {
    std::vector<uint8_t> buf(34 * 2 * 3 * 2);
    TensorView v = make_view("blk.0.ffn_up_exps.weight", DType::Q8_0, {64, 3, 2}, buf.data());
    EXPECT_EQ(v.nb[1], 68u);
    EXPECT_EQ(v.nb[2], 68u * 3);
    EXPECT_EQ(v.nbytes(), buf.size());
    EXPECT_TRUE(v.contiguous());
    EXPECT_EQ(v.shape_string(), "[64, 3, 2]");
    EXPECT_EQ(static_cast<uint8_t*>(v.row(1, 1)) - buf.data(), 68 * 4);
}

TEST(Arena, PlanThenBumpAllocate) {
    ArenaPlan plan;
    plan.add_array<float>(10).add(1).add_array<double>(100);
    Arena arena(plan.bytes());
    float* a = arena.alloc_array<float>(10);
    void* b = arena.alloc(1);
    double* c = arena.alloc_array<double>(100);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % kScratchAlign, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % kScratchAlign, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % kScratchAlign, 0u);
    EXPECT_EQ(arena.used(), plan.bytes());
    arena.reset();
    EXPECT_EQ(arena.alloc_array<float>(10), a);
}

TEST(Rng, ReproducibleAndRoughlyNormal) {
    Rng a(42), b(42), c(43);
    EXPECT_EQ(a.next(), b.next());
    EXPECT_NE(a.next(), c.next());
    Rng r(1);
    double s = 0, s2 = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
        const double x = r.normal();
        s += x;
        s2 += x * x;
    }
    EXPECT_NEAR(s / n, 0.0, 0.02);
    EXPECT_NEAR(s2 / n, 1.0, 0.02);
}
