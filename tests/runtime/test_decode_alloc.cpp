// The decode hot path allocates nothing: after a warm-up step, further decode steps (one row per
// forward call, f32 and quantized weights, 2 threads) make zero heap allocations on any thread.
// Every operator new in this binary is counted while `g_counting` is set, so an allocation on a
// pool thread (a std::function per parallel region, a vector grown per call) fails the test.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/gen_model_util.h"
#include "runtime/session.h"

// The replacements below are malloc/free based; GCC 12 inlines them into new/delete pairs and then
// flags the free() inside as mismatched (a false positive for a replaced operator delete).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocs{0};
}  // namespace

// Every replaceable allocation function goes through these two (malloc / aligned_alloc, freed by
// free), so the counts see them all and a sanitizer sees matching pairs.
namespace {
void* counted_alloc(std::size_t n, std::size_t align) noexcept {
    if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
    if (n == 0) n = 1;
    if (align <= alignof(std::max_align_t)) return std::malloc(n);
    return std::aligned_alloc(align, (n + align - 1) / align * align);
}
void* counted_alloc_or_throw(std::size_t n, std::size_t align) {
    if (void* p = counted_alloc(n, align)) return p;
    throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc_or_throw(n, 0); }
void* operator new[](std::size_t n) { return counted_alloc_or_throw(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_alloc_or_throw(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_alloc_or_throw(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return counted_alloc(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return counted_alloc(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

using namespace moe;
namespace fs = std::filesystem;

namespace {

class DecodeAlloc : public ::testing::TestWithParam<DType> {};

}  // namespace

TEST_P(DecodeAlloc, DecodeStepsAllocateNothing) {
    const fs::path dir = fs::temp_directory_path() / ("moe-test-alloc-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string path = testutil::gen_model(dir, "tiny-olmoe", GetParam(), 11);
    long allocs = -1;
    {
        auto m = model::Model::load(path, {2, 16, 64});
        ThreadPool pool(2);
        runtime::Session s(*m, pool, {64, 1, DType::F32});
        const int64_t V = m->config().n_vocab;
        std::vector<float> logits(static_cast<size_t>(V));
        s.eval(0, {1, 2, 3, 4, 5, 6, 7, 8}, logits.data(), false);   // prefill
        std::vector<model::BatchRow> row{{9, 8, 0, true}};
        s.forward(row, logits.data());                                 // warm-up decode step
        g_allocs = 0;
        g_counting = true;
        for (int32_t i = 0; i < 6; ++i) {
            row[0] = {static_cast<int32_t>((i * 37 + 11) % V), 9 + i, 0, true};
            s.forward(row, logits.data());
        }
        g_counting = false;
        allocs = g_allocs.load();
    }
    fs::remove_all(dir);
    EXPECT_EQ(allocs, 0) << "heap allocations in 6 decode steps (" << dtype_name(GetParam()) << " weights)";
}

INSTANTIATE_TEST_SUITE_P(Types, DecodeAlloc, ::testing::Values(DType::F32, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });
