// The tiered expert cache (--mem, moe/expert_cache.h) end to end on `moe gen` tiny presets:
//  - logits bitwise equal to the all-resident run (prefill + decode) for every architecture and
//    weight type f32 / f16 / q8_0, through io_uring and pread, with a budget of exactly the
//    minimum (slots = top_k: every access misses and evicts) and with a middle budget for every
//    policy (lru, lfu, pinned);
//  - a budget below the minimum: one error naming the minimum;
//  - the model file truncated after load, or rewritten in place (same size, other bytes): one
//    error naming file, layer and expert, no hang, never a changed answer.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "common/temp_dir.h"
#include "core/thread_pool.h"
#include "format/gguf.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "model/model.h"
#include "runtime/gen_model_util.h"
#include "runtime/session.h"

using namespace moe;
namespace fs = std::filesystem;

namespace {

const char* const kPresets[] = {"tiny-mixtral", "tiny-qwen2moe", "tiny-qwen3moe", "tiny-olmoe", "tiny-gpt-oss"};
const DType kTypes[] = {DType::F32, DType::F16, DType::Q8_0};

const fs::path& temp_dir() { return moe::testutil::binary_temp_dir("expert-cache"); }

// Fresh random tokens each run (seed printed for reproduction).
uint32_t run_seed() {
    static const uint32_t s = [] {
        const uint32_t v = std::random_device{}();
        std::printf("[ expert cache ] token seed %u\n", v);
        return v;
    }();
    return s;
}
std::vector<int32_t> tokens(size_t n, int64_t V, uint32_t salt) {
    std::mt19937 g(run_seed() ^ (salt * 2654435761u));
    std::vector<int32_t> t(n);
    for (auto& v : t) v = static_cast<int32_t>(g() % static_cast<uint32_t>(V));
    return t;
}

struct Outcome {
    std::vector<float> logits;             // prefill rows, then one row per decode step
    model::MemoryBudget budget;
    ExpertCacheCounters counters;
    int top_k = 0;
};

// Prefill `prompt` (all rows' logits, batches of max_batch), then decode `gen` one by one.
Outcome run_model(const std::string& path, const model::ExpertCacheOptions& co, const std::vector<int32_t>& prompt,
        const std::vector<int32_t>& gen, int64_t max_batch = 32) {
    model::ModelOptions mo;
    mo.n_threads = 2;
    mo.max_batch = max_batch;
    mo.n_ctx = 64;
    mo.cache = co;
    auto m = model::Model::load(path, mo);
    ThreadPool pool(2);
    runtime::Session s(*m, pool, {64, 1, DType::F32});
    const size_t V = static_cast<size_t>(m->config().n_vocab);
    Outcome r;
    r.logits.resize((prompt.size() + gen.size()) * V);
    s.eval(0, prompt, r.logits.data(), true);
    for (size_t i = 0; i < gen.size(); ++i) s.eval(0, {gen[i]}, r.logits.data() + (prompt.size() + i) * V, false);
    r.budget = m->memory_budget();
    r.top_k = m->desc().moe.top_k;
    if (m->expert_cache()) r.counters = m->expert_cache()->total();
    return r;
}

// The smallest budget the model accepts (from a load with a budget that fits everything).
model::MemoryBudget budget_of(const std::string& path) {
    model::ModelOptions mo;
    mo.n_threads = 2;
    mo.max_batch = 32;
    mo.n_ctx = 64;
    mo.cache.mem_budget = 1ull << 40;
    return model::Model::load(path, mo)->memory_budget();
}

class CacheArch : public ::testing::TestWithParam<const char*> {};

TEST_P(CacheArch, MinimumBudgetBitwiseEqualToResident) {
    for (DType type : kTypes) {
        const std::string path = testutil::gen_model(temp_dir(), GetParam(), type, 11);
        const std::string what = std::string(GetParam()) + " " + dtype_name(type);
        const model::MemoryBudget b = budget_of(path);
        const auto prompt = tokens(12, 320, 1), gen = tokens(6, 320, 2);
        const Outcome ref = run_model(path, {}, prompt, gen);
        for (ExpertIo io : {ExpertIo::Uring, ExpertIo::Pread}) {
            model::ExpertCacheOptions co;
            co.mem_budget = b.minimum;
            co.io = io;
            const Outcome got = run_model(path, co, prompt, gen);
            EXPECT_EQ(got.budget.slots, got.top_k) << what;
            ASSERT_EQ(ref.logits.size(), got.logits.size());
            EXPECT_EQ(0, std::memcmp(ref.logits.data(), got.logits.data(), ref.logits.size() * sizeof(float)))
                << what << " via " << expert_io_name(io);
            // slots == top_k and layers alternate: every access misses, and most evict; the only
            // hits are loads the whole-layer prefetch started in the slots a prefill layer's last
            // (smaller) group left free (io_uring only: pread does not prefetch).
            EXPECT_EQ(got.counters.hits, got.counters.prefetch_used) << what;
            if (io == ExpertIo::Pread) {
                EXPECT_EQ(got.counters.hits, 0) << what;
            }
            EXPECT_GT(got.counters.misses, static_cast<int64_t>(gen.size())) << what;
            EXPECT_GT(got.counters.evictions, static_cast<int64_t>(gen.size())) << what;
            EXPECT_GT(got.counters.bytes_read, 0u) << what;
        }
    }
}

TEST_P(CacheArch, EveryPolicyBitwiseEqualToResident) {
    const std::string path = testutil::gen_model(temp_dir(), GetParam(), DType::Q8_0, 11);
    const model::MemoryBudget b = budget_of(path);
    const auto prompt = tokens(20, 320, 3), gen = tokens(10, 320, 4);
    const Outcome ref = run_model(path, {}, prompt, gen, 8);  // prefill in batches of 8
    // A trace of a resident run as the pinned policy's profile.
    const fs::path trace = temp_dir() / (std::string(GetParam()) + "-trace.tsv");
    {
        std::FILE* f = std::fopen(trace.c_str(), "wb");
        ASSERT_TRUE(f);
        std::fputs("layer\ttoken\texperts\tweights\n0\t0\t1,2\t0.5,0.5\n1\t0\t3,1\t0.5,0.5\n", f);
        std::fclose(f);
    }
    int64_t used = 0;
    for (const char* policy : {"lru", "lfu", "lfu-history", "pinned"}) {
        model::ExpertCacheOptions co;
        co.mem_budget = b.minimum + 3 * b.slot;  // top_k + 3 slots of 16 experts
        co.policy = policy;
        if (std::string(policy) == "pinned") co.profile = trace.string();
        const Outcome got = run_model(path, co, prompt, gen, 8);
        EXPECT_GE(got.budget.slots, got.top_k + 3);  // + what the smaller prefill batch saves in scratch
        EXPECT_LT(got.budget.slots, got.budget.total_experts);
        EXPECT_EQ(0, std::memcmp(ref.logits.data(), got.logits.data(), ref.logits.size() * sizeof(float)))
            << GetParam() << " policy " << policy;
        EXPECT_GT(got.counters.evictions, 0) << policy;
        EXPECT_GT(got.counters.hits, 0) << policy;
        // Router lookahead is on (io_uring): it starts loads, and some are used (over the four
        // policies: with 30 random tokens one policy may evict every prefetch before its use, e.g.
        // lfu on tiny-mixtral with token seed 2339534206).
        EXPECT_GT(got.counters.prefetch_issued, 0) << policy;
        EXPECT_LE(got.counters.prefetch_used, got.counters.prefetch_issued) << policy;
        used += got.counters.prefetch_used;
    }
    EXPECT_GT(used, 0);
}

TEST_P(CacheArch, PrefetchDuringSmallPrefillBatchesBitwise) {
    // Prefill in batches of 2 (a layer's <= 4 experts fit the top_k + 2 slots, so the next layer's
    // prediction is prefetched during prefill too, and prefetches may occupy every free slot).
    const std::string path = testutil::gen_model(temp_dir(), GetParam(), DType::F16, 11);
    const model::MemoryBudget b = budget_of(path);
    const auto prompt = tokens(16, 320, 6), gen = tokens(6, 320, 7);
    const Outcome ref = run_model(path, {}, prompt, gen, 2);
    for (int extra : {1, 2, 5}) {
        model::ExpertCacheOptions co;
        co.mem_budget = b.minimum + static_cast<uint64_t>(extra) * b.slot;
        const Outcome got = run_model(path, co, prompt, gen, 2);
        EXPECT_EQ(0, std::memcmp(ref.logits.data(), got.logits.data(), ref.logits.size() * sizeof(float)))
            << GetParam() << " extra " << extra;
        EXPECT_GT(got.counters.prefetch_issued, 0) << extra;
    }
}

TEST_P(CacheArch, WholeLayerPrefetchForOnePrefillBatch) {
    // One prefill batch of 24 tokens needs more experts per layer than the slots: the layer runs
    // in groups, and its last group starts the next layer's predicted experts (the most-predicted
    // first) in the slots it leaves free. Bitwise as resident; the prefetches are issued and used.
    const std::string path = testutil::gen_model(temp_dir(), GetParam(), DType::Q8_0, 11);
    const model::MemoryBudget b = budget_of(path);
    const auto prompt = tokens(24, 320, 8);
    const Outcome ref = run_model(path, {}, prompt, {}, 32);
    int64_t issued = 0, used = 0;
    int cases = 0;
    // Three budgets of 1..5 slots above the minimum, largest first, that keep fewer slots than
    // half the experts (top-4 gpt-oss reaches that sooner than the top-2 presets).
    for (int extra : {5, 4, 3, 2, 1}) {
        if (cases == 3) break;
        model::ExpertCacheOptions co;
        co.mem_budget = b.minimum + static_cast<uint64_t>(extra) * b.slot;
        model::ModelOptions mo;
        mo.n_threads = 2;
        mo.max_batch = 32;
        mo.n_ctx = 64;
        mo.cache = co;
        const model::MemoryBudget at = model::Model::load(path, mo)->memory_budget();
        if (at.slots >= at.total_experts / 2) continue;
        ++cases;
        const Outcome got = run_model(path, co, prompt, {}, 32);
        EXPECT_LT(got.budget.slots, got.budget.total_experts / 2) << extra;
        EXPECT_EQ(0, std::memcmp(ref.logits.data(), got.logits.data(), ref.logits.size() * sizeof(float)))
            << GetParam() << " extra " << extra;
        issued += got.counters.prefetch_issued;
        used += got.counters.prefetch_used;
    }
    EXPECT_EQ(cases, 3) << GetParam();
    EXPECT_GT(issued, 0);
    EXPECT_GT(used, 0);
}

INSTANTIATE_TEST_SUITE_P(Presets, CacheArch, ::testing::ValuesIn(kPresets));

TEST(ExpertCache, BudgetBelowMinimumNamesTheMinimum) {
    const std::string path = testutil::gen_model(temp_dir(), "tiny-olmoe", DType::Q8_0, 11);
    const model::MemoryBudget b = budget_of(path);
    EXPECT_GT(b.minimum, b.resident + b.kv);
    model::ModelOptions mo;
    mo.n_threads = 2;
    mo.max_batch = 32;
    mo.n_ctx = 64;
    mo.cache.mem_budget = b.minimum - 1;
    try {
        model::Model::load(path, mo);
        FAIL() << "no error for a budget below the minimum";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("below the minimum of " + std::to_string((b.minimum + (1 << 20) - 1) >> 20) + " MiB"),
                  std::string::npos)
            << msg;
        EXPECT_NE(msg.find(path), std::string::npos) << msg;
    }
    mo.cache.mem_budget = b.minimum;  // exactly the minimum loads
    EXPECT_NO_THROW(model::Model::load(path, mo));
    mo.cache.policy = "nope";
    EXPECT_THROW(model::Model::load(path, mo), Error);
    mo.cache.policy = "pinned";  // pinned without a profile
    EXPECT_THROW(model::Model::load(path, mo), Error);
}

// --repack-experts keeps a second, panel copy of the resident expert stacks, and --repack the
// dense projections too: with --mem (experts streamed into cache slots) each is one clear error
// naming itself and --mem; alone it loads, and tiny-olmoe's Q8_0 rows of 64 values (two whole
// 32-value blocks: Q8_0's panel step) become panels where the CPU runs the panel GEMV (the dense
// projections only with --repack).
TEST(ExpertCache, RepackWithMemIsOneClearError) {
    const std::string path = testutil::gen_model(temp_dir(), "tiny-olmoe", DType::Q8_0, 11);
    for (const bool dense : {false, true}) {
        const std::string flag = dense ? "--repack " : "--repack-experts ";
        SCOPED_TRACE(flag);
        model::ModelOptions mo;
        mo.n_threads = 2;
        mo.max_batch = 32;
        mo.n_ctx = 64;
        (dense ? mo.cache.repack : mo.cache.repack_experts) = true;
        mo.cache.mem_budget = 1ull << 40;
        try {
            model::Model::load(path, mo);
            FAIL() << "no error for " << flag << "with --mem";
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find(flag), std::string::npos) << msg;
            EXPECT_NE(msg.find("--mem"), std::string::npos) << msg;
        }
        mo.cache.mem_budget = 0;
        std::unique_ptr<model::Model> m;
        ASSERT_NO_THROW(m = model::Model::load(path, mo));
        const bool simd = kernels::panel::panel_gemv_usable() && m->kernels().isa() == kernels::Isa::Avx512;
        EXPECT_EQ(m->panel_bytes() > 0, simd);
        EXPECT_EQ(m->dense_panel_bytes() > 0, simd && dense);
    }
}

// The budget's KV term is the KV cache the session then makes (up to padding), at every KV type and
// with the sliding-window rings of gpt-oss (or --swa-full): the budget neither under-counts (an
// over-committed cache) nor over-counts it (fewer expert slots than the memory allows).
TEST(ExpertCache, BudgetKvTermIsTheSessionsCache) {
    for (const char* preset : {"tiny-olmoe", "tiny-gpt-oss"}) {
        const std::string path = testutil::gen_model(temp_dir(), preset, DType::F32, 11);
        for (DType kv : {DType::F32, DType::F16, DType::Q8_0}) {
            uint64_t ring = 0, full = 0;
            for (bool swa_full : {false, true}) {
                model::ModelOptions mo;
                mo.n_threads = 2;
                mo.max_batch = 16;
                mo.n_ctx = 512;
                mo.cache.mem_budget = 1ull << 40;
                mo.cache.kv_seqs = 2;
                mo.cache.kv_type = kv;
                mo.cache.swa_full = swa_full;
                auto m = model::Model::load(path, mo);
                ThreadPool pool(1);
                runtime::Session s(*m, pool, {512, 2, kv, swa_full});
                // equal up to the cache's padding of each K / V buffer to 64 bytes
                const uint64_t got = s.kv().cache().bytes(), want = m->memory_budget().kv,
                               pad = 2 * 64 * static_cast<uint64_t>(m->config().n_layer) * 2;
                EXPECT_TRUE(got >= want && got - want < pad)
                    << preset << " " << dtype_name(kv) << " swa_full " << swa_full << ": cache " << got << ", budget " << want;
                (swa_full ? full : ring) = m->memory_budget().kv;
            }
            if (std::string(preset) == "tiny-gpt-oss") EXPECT_LT(ring, full) << "the rings are counted";
            else EXPECT_EQ(ring, full);
        }
    }
}

TEST(ExpertCache, FileTruncatedAfterLoadIsOneClearError) {
    // Minimum budget (demand loads only) and room for prefetches (a failed prefetch is reported
    // by the acquire that needs the expert), through io_uring and pread.
    for (int extra : {0, 6})
    for (ExpertIo io : {ExpertIo::Uring, ExpertIo::Pread}) {
        const std::string src = testutil::gen_model(temp_dir(), "tiny-qwen3moe", DType::Q8_0, 11);
        const fs::path path = temp_dir() / (std::string("truncated-") + expert_io_name(io) + ".gguf");
        fs::copy_file(src, path, fs::copy_options::overwrite_existing);
        // The file's last tensor is an expert stack (gen writes blocks in order, experts last):
        // cutting into its expert 0 leaves every resident tensor intact.
        uint64_t cut = 0;
        std::string last;
        {
            const auto f = gguf::File::open(path.string());
            const gguf::TensorInfo* t = &f.tensors()[0];
            for (const auto& x : f.tensors())
                if (x.offset > t->offset) t = &x;
            last = t->name;
            ASSERT_NE(last.find("_exps.weight"), std::string::npos) << last;
            cut = f.data_offset() + t->offset + t->nbytes / static_cast<uint64_t>(t->ne[2]) / 2;
        }
        const model::MemoryBudget b = budget_of(path.string());
        model::ModelOptions mo;
        mo.n_threads = 2;
        mo.max_batch = 32;
        mo.n_ctx = 64;
        mo.cache.mem_budget = b.minimum + static_cast<uint64_t>(extra) * b.slot;
        mo.cache.io = io;
        auto m = model::Model::load(path.string(), mo);
        ThreadPool pool(2);
        runtime::Session s(*m, pool, {64, 1, DType::F32});
        fs::resize_file(path, cut);
        std::vector<float> out(static_cast<size_t>(m->config().n_vocab));
        const std::string layer = last.substr(4, last.find('.', 4) - 4);
        try {
            for (int i = 0; i < 4; ++i) s.eval(0, tokens(4, 320, 5 + i), out.data(), false);
            FAIL() << "no error after truncation (" << expert_io_name(io) << ")";
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find("[experts] " + path.string()), std::string::npos) << msg;
            // Found by the read that runs short (the cut expert stack), or earlier, by the check
            // after any load that the file's size changed.
            const bool short_read = msg.find("short read") != std::string::npos;
            const bool changed = msg.find("changed on disk since it was opened (size ") != std::string::npos;
            EXPECT_TRUE(short_read || changed) << msg;
            if (short_read) {
                EXPECT_NE(msg.find("layer " + layer + " expert "), std::string::npos) << msg;
            }
            EXPECT_NE(msg.find(" expert "), std::string::npos) << msg;
            EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
        }
    }
}

TEST(ExpertCache, FileRewrittenInPlaceIsOneClearError) {
    // Same size, other bytes in an expert stack, same inode: the data of a miss would silently
    // change the answer; the check after each load batch (fstat: size, mtime, ctime) stops it.
    for (int extra : {0, 6})
    for (ExpertIo io : {ExpertIo::Uring, ExpertIo::Pread}) {
        const std::string src = testutil::gen_model(temp_dir(), "tiny-qwen3moe", DType::Q8_0, 11);
        const fs::path path = temp_dir() / (std::string("rewritten-") + expert_io_name(io) + ".gguf");
        fs::copy_file(src, path, fs::copy_options::overwrite_existing);
        // An old mtime, so the rewrite below changes it even within one clock tick.
        fs::last_write_time(path, fs::last_write_time(path) - std::chrono::hours(24));
        uint64_t at = 0, len = 0;
        {
            const auto f = gguf::File::open(path.string());
            for (const auto& x : f.tensors())
                if (std::string(x.name).find("blk.0.ffn_up_exps") == 0) at = f.data_offset() + x.offset, len = x.nbytes;
            ASSERT_GT(len, 0u);
        }
        const uint64_t size = fs::file_size(path);
        const model::MemoryBudget b = budget_of(path.string());
        model::ModelOptions mo;
        mo.n_threads = 2;
        mo.max_batch = 32;
        mo.n_ctx = 64;
        mo.cache.mem_budget = b.minimum + static_cast<uint64_t>(extra) * b.slot;
        mo.cache.io = io;
        auto m = model::Model::load(path.string(), mo);
        ThreadPool pool(2);
        runtime::Session s(*m, pool, {64, 1, DType::F32});
        std::vector<float> out(static_cast<size_t>(m->config().n_vocab));
        s.eval(0, tokens(3, 320, 9), out.data(), false);  // loads work before the rewrite
        {
            std::vector<char> junk(static_cast<size_t>(len));
            std::mt19937 g(run_seed());
            for (auto& c : junk) c = static_cast<char>(g());
            std::FILE* f = std::fopen(path.c_str(), "r+b");
            ASSERT_TRUE(f);
            ASSERT_EQ(0, std::fseek(f, static_cast<long>(at), SEEK_SET));
            ASSERT_EQ(junk.size(), std::fwrite(junk.data(), 1, junk.size(), f));
            std::fclose(f);
        }
        ASSERT_EQ(size, fs::file_size(path));
        std::string first;
        try {
            for (int i = 0; i < 4; ++i) s.eval(0, tokens(4, 320, 10 + i), out.data(), false);
            FAIL() << "no error after the file was rewritten (" << expert_io_name(io) << ")";
        } catch (const Error& e) {
            first = e.what();
            EXPECT_NE(first.find("[experts] " + path.string() + ": loading layer "), std::string::npos) << first;
            EXPECT_NE(first.find(" expert "), std::string::npos) << first;
            EXPECT_NE(first.find("same size, new modification time: rewritten in place"), std::string::npos) << first;
        }
        // And again, the same error for every later call: the change is remembered (before, a
        // call whose experts were all still resident ran, and this test was flaky).
        for (const auto& again : {tokens(4, 320, 20), tokens(1, 320, 13)}) {
            try {
                s.eval(0, again, out.data(), false);
                ADD_FAILURE() << "a call after the rewrite ran (" << expert_io_name(io) << ")";
            } catch (const Error& e) {
                EXPECT_EQ(first, e.what());
            }
        }
    }
}

}  // namespace
