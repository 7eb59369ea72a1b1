// Expert-cache policies, the cache simulator and the expert reader:
//  - hand-computed hit rates on small traces (LRU, Belady, pinned; multi-expert requests);
//  - on random traces Belady's hit rate is >= every online policy's, and with room for every key
//    every policy misses only the first use of each key;
//  - trace / profile parse errors name the file and line;
//  - ExpertReader (io_uring and pread, O_DIRECT and buffered) reads exactly the file's bytes, and a
//    read past the end is one error naming the file, layer and expert.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "moe/cache_sim.h"
#include "moe/expert_cache.h"
#include "moe/expert_io.h"

using namespace moe;
namespace fs = std::filesystem;

namespace {

// One layer, one expert per request: the keys in order.
RoutingTraceFile single(const std::vector<int>& experts) {
    std::string tsv = "layer\ttoken\texperts\tweights\n";
    for (size_t i = 0; i < experts.size(); ++i)
        tsv += "0\t" + std::to_string(i) + "\t" + std::to_string(experts[i]) + "\t1\n";
    return parse_routing_trace(tsv);
}

TEST(CacheSim, CyclicTraceByHand) {
    // a b c a b c a b c with 2 slots. LRU always evicts the key needed next: 0 hits. Belady
    // (farthest next use) hits a@3, c@5, b@7: 3 of 9. Pinned (profile: all 3 equal, ties to the
    // lower key, 1 of 2 slots pinned = a): a hits at 3 and 6, b and c keep evicting each other.
    const RoutingTraceFile t = single({0, 1, 2, 0, 1, 2, 0, 1, 2});
    EXPECT_EQ(simulate_cache(t, 2, "lru").hits, 0);
    EXPECT_EQ(simulate_cache(t, 2, "belady").hits, 3);
    EXPECT_EQ(simulate_cache(t, 2, "pinned").hits, 2);
    EXPECT_EQ(simulate_cache(t, 2, "lru").accesses, 9);
    EXPECT_EQ(simulate_cache(t, 2, "lru").evictions, 7);
    // 3 slots: only the 3 cold misses, whatever the policy.
    for (const char* p : {"lru", "lfu", "lfu-history", "pinned", "belady"}) EXPECT_EQ(simulate_cache(t, 3, p).hits, 6) << p;
}

TEST(CacheSim, LfuKeepsTheHotKeyLruDoesNot) {
    // a a a a b c a b c ... with 2 slots: LRU evicts a whenever b, c come between; LFU keeps a
    // (count 4 + decayed, far above b / c at 1) so a hits every time after the first 4 accesses.
    std::vector<int> seq = {0, 0, 0, 0};
    for (int r = 0; r < 5; ++r) seq.insert(seq.end(), {1, 2, 0});
    const RoutingTraceFile t = single(seq);
    // LRU: a a a a (3 hits), then b c a repeated: a was used 3 accesses ago with 2 slots -> miss.
    EXPECT_EQ(simulate_cache(t, 2, "lru").hits, 3);
    // LFU: 3 hits in the first run, then a hits in each of the 5 rounds; b and c miss.
    EXPECT_EQ(simulate_cache(t, 2, "lfu").hits, 3 + 5);
}

TEST(CacheSim, RequestsHoldTheirExpertsTogether) {
    // Two layers, 2 experts per request, alternating: with 2 slots a request needs both, so every
    // access misses; with 4 slots only the 4 cold misses.
    std::string tsv = "layer\ttoken\texperts\tweights\n";
    for (int tok = 0; tok < 10; ++tok)
        for (int l = 0; l < 2; ++l) tsv += std::to_string(l) + "\t" + std::to_string(tok) + "\t0,1\t0.5,0.5\n";
    const RoutingTraceFile t = parse_routing_trace(tsv);
    EXPECT_EQ(t.n_layer, 2);
    EXPECT_EQ(t.n_expert, 2);
    for (const char* p : {"lru", "lfu", "lfu-history", "belady"}) {
        EXPECT_EQ(simulate_cache(t, 2, p).hits, 0) << p;
        EXPECT_EQ(simulate_cache(t, 4, p).hits, 40 - 4) << p;
    }
    EXPECT_THROW(simulate_cache(t, 1, "lru"), Error);  // below the largest request
}

TEST(CacheSim, MissesNeverEvictAKeyTheSameRequestUsesLater) {
    // 4 slots, requests {0,1,2,3} then {4,5,6,0}: the least-recent key is 0, which the second
    // request needs last. Its resident key is held before its misses take slots, so 0 hits (LRU
    // evicting in request order would have evicted 0 for 4 and read it again).
    std::string tsv = "layer\ttoken\texperts\tweights\n";
    tsv += "0\t0\t0,1,2,3\t0.25,0.25,0.25,0.25\n";
    tsv += "0\t1\t4,5,6,0\t0.25,0.25,0.25,0.25\n";
    const RoutingTraceFile t = parse_routing_trace(tsv);
    for (const char* p : {"lru", "lfu", "lfu-history", "pinned", "belady"}) {
        const CacheSimResult r = simulate_cache(t, 4, p);
        EXPECT_EQ(r.accesses, 8) << p;
        EXPECT_EQ(r.hits, 1) << p;
        EXPECT_EQ(r.evictions, 3) << p;
    }
}

TEST(CacheSim, BeladyBoundsEveryPolicyOnRandomTraces) {
    std::mt19937 g(std::random_device{}());
    for (int trial = 0; trial < 20; ++trial) {
        const int L = 1 + static_cast<int>(g() % 4), E = 4 + static_cast<int>(g() % 12), k = 1 + static_cast<int>(g() % 3);
        std::string tsv;
        std::set<std::pair<int, int>> keys;
        int64_t accesses = 0;
        // Skewed routing: expert = min of two uniform draws (low ids hotter).
        for (int tok = 0; tok < 60; ++tok)
            for (int l = 0; l < L; ++l) {
                std::set<int> ex;
                while (static_cast<int>(ex.size()) < k) ex.insert(std::min(g() % E, g() % E));
                tsv += std::to_string(l) + "\t" + std::to_string(tok) + "\t";
                bool first = true;
                for (int e : ex) {
                    tsv += (first ? "" : ",") + std::to_string(e);
                    first = false;
                    keys.insert({l, e});
                    ++accesses;
                }
                tsv += "\n";
            }
        const RoutingTraceFile t = parse_routing_trace(tsv);
        for (int cap : {k, k + 2, L * E / 2, L * E}) {
            if (cap < k) continue;
            const double opt = simulate_cache(t, cap, "belady").hit_rate();
            for (const char* p : {"lru", "lfu", "pinned"}) {
                const CacheSimResult r = simulate_cache(t, cap, p);
                EXPECT_LE(r.hit_rate(), opt + 1e-12) << p << " cap " << cap;
                if (cap >= static_cast<int>(keys.size())) {
                    EXPECT_EQ(r.hits, accesses - static_cast<int64_t>(keys.size())) << p;
                }
            }
        }
    }
}

TEST(CacheSim, ParseErrorsNameFileAndLine) {
    try {
        parse_routing_trace("layer\ttoken\texperts\tweights\n0\t0\t1,2\t0.5,0.5\n1\tx\t1\t1\n", "t.tsv");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("t.tsv:3: token 'x'"), std::string::npos) << e.what();
    }
    EXPECT_THROW(parse_routing_trace("0\t0\n", "t.tsv"), Error);
    EXPECT_THROW(parse_routing_trace("0\t0\t-1\t1\n", "t.tsv"), Error);
    EXPECT_THROW(parse_routing_trace("layer\ttoken\texperts\tweights\n", "t.tsv"), Error);  // empty
    EXPECT_THROW(make_cache_policy("fifo"), Error);
}

// Ids below the per-field limit whose product would size a huge profile table are refused first
// (fuzz/targets/routing_trace: "1048575<TAB>0<TAB>1048575" asked profile_from_trace for 8 TiB).
TEST(CacheSim, AbsurdLayerTimesExpertRefused) {
    try {
        parse_routing_trace("0\t0\t1\t1\n1048575\t1\t1048575\t1\n", "t.tsv");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("t.tsv: layer ids up to 1048575"), std::string::npos) << e.what();
    }
    // The largest accepted table: 64 layers x 65536 experts = 2^22 cells.
    const RoutingTraceFile t = parse_routing_trace("63\t0\t65535\t1\n", "t.tsv");
    EXPECT_EQ(profile_from_trace(t).counts.size(), size_t(1) << 22);
    EXPECT_THROW(parse_routing_trace("64\t0\t65535\t1\n", "t.tsv"), Error);
}

TEST(CacheSim, ProfileFromJsonAndTsv) {
    const fs::path dir = fs::temp_directory_path() / ("moe-test-cache-sim-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto write = [&](const std::string& name, const std::string& text) {
        std::FILE* f = std::fopen((dir / name).c_str(), "wb");
        std::fputs(text.c_str(), f);
        std::fclose(f);
        return (dir / name).string();
    };
    const RoutingProfile j = load_routing_profile(write("p.json", R"({"n_expert": 3, "counts": [[1,2,3],[4,5,6]]})"));
    EXPECT_EQ(j.n_layer, 2);
    EXPECT_EQ(j.n_expert, 3);
    EXPECT_EQ(j.counts, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
    const RoutingProfile t = load_routing_profile(write("p.tsv", "layer\ttoken\texperts\tweights\n1\t0\t2,0\t.5,.5\n1\t1\t2\t1\n"));
    EXPECT_EQ(t.counts, (std::vector<int64_t>{0, 0, 0, 1, 0, 2}));
    EXPECT_THROW(load_routing_profile(write("bad.json", R"({"n_expert": 3, "counts": [[1,2]]})")), Error);
    EXPECT_THROW(load_routing_profile((dir / "missing").string()), Error);
    fs::remove_all(dir);
}

// ---- ExpertReader

struct AlignedBuf {
    char* p;
    explicit AlignedBuf(size_t n) : p(static_cast<char*>(std::aligned_alloc(ExpertReader::kIoAlign, n))) {}
    ~AlignedBuf() { std::free(p); }
};

void check_reader(const fs::path& file, const std::vector<char>& bytes, ExpertIo io, bool direct) {
    const uint64_t A = ExpertReader::kIoAlign;
    ExpertReader r(file.string(), io, direct);
    // Slices at odd offsets (as expert slices are), read as aligned ranges; more than the queue depth.
    std::vector<ReadOp> ops;
    const int n = 40;
    AlignedBuf buf(static_cast<size_t>(n) * 3 * A);
    for (int i = 0; i < n; ++i) {
        const uint64_t off = 37 + static_cast<uint64_t>(i) * 1531, len = 1000 + (i % 3) * 700;
        ReadOp op;
        op.offset = off / A * A;
        op.len = (off + len + A - 1) / A * A - op.offset;
        op.need = off + len - op.offset;
        op.dst = buf.p + static_cast<size_t>(i) * 3 * A;
        op.layer = 1;
        op.expert = i;
        ops.push_back(op);
    }
    r.read(ops.data(), n);
    for (int i = 0; i < n; ++i) {
        const uint64_t off = 37 + static_cast<uint64_t>(i) * 1531, len = 1000 + (i % 3) * 700;
        EXPECT_EQ(0, std::memcmp(ops[i].dst + off % A, bytes.data() + off, len)) << r.describe() << " op " << i;
    }
    // Past the end of the file: one error naming file, layer and expert.
    ReadOp bad;
    bad.offset = bytes.size() / A * A;
    bad.len = 2 * A;
    bad.need = bytes.size() % A + 100;
    bad.dst = buf.p;
    bad.layer = 3;
    bad.expert = 5;
    bad.tensor = "ffn_up_exps";
    try {
        r.read(&bad, 1);
        FAIL() << r.describe();
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(file.string() + ": loading layer 3 expert 5 (blk.3.ffn_up_exps"), std::string::npos) << m;
        EXPECT_NE(m.find("short read"), std::string::npos) << m;
    }
}

std::vector<char> random_file(const fs::path& p, size_t n) {
    std::mt19937 g(std::random_device{}());
    std::vector<char> b(n);
    for (auto& c : b) c = static_cast<char>(g());
    std::FILE* f = std::fopen(p.c_str(), "wb");
    EXPECT_TRUE(f);
    std::fwrite(b.data(), 1, n, f);
    std::fclose(f);
    return b;
}

TEST(ExpertReader, UringAndPreadDirectAndBuffered) {
    const fs::path p = fs::temp_directory_path() / ("moe-test-reader-" + std::to_string(::getpid()) + ".bin");
    const auto bytes = random_file(p, 64 * 1024 + 123);
    for (ExpertIo io : {ExpertIo::Uring, ExpertIo::Pread})
        for (bool direct : {true, false}) check_reader(p, bytes, io, direct);
    fs::remove(p);
}

TEST(ExpertReader, FallsBackWhereODirectIsRefused) {
    // O_DIRECT refuses a read into a misaligned buffer with EINVAL (as file systems without
    // O_DIRECT support do): the reader reopens the file buffered, retries and says so.
    const fs::path p = fs::temp_directory_path() / ("moe-test-reader-fb-" + std::to_string(::getpid()) + ".bin");
    const auto bytes = random_file(p, 64 * 1024 + 123);
    for (ExpertIo io : {ExpertIo::Uring, ExpertIo::Pread}) {
        ExpertReader r(p.string(), io, true);
        if (!r.direct()) {  // this file system refuses O_DIRECT at open already: that fallback
            EXPECT_NE(r.describe().find("O_DIRECT refused"), std::string::npos) << r.describe();
            check_reader(p, bytes, io, true);
            continue;
        }
        AlignedBuf buf(4 * ExpertReader::kIoAlign);
        ReadOp ops[2];
        for (int i = 0; i < 2; ++i) {
            ops[i].offset = static_cast<uint64_t>(i + 1) * ExpertReader::kIoAlign;
            ops[i].len = ops[i].need = ExpertReader::kIoAlign;
            ops[i].dst = buf.p + 8 + static_cast<size_t>(i) * 2 * ExpertReader::kIoAlign;  // misaligned
        }
        r.read(ops, 2);
        EXPECT_FALSE(r.direct());
        EXPECT_NE(r.describe().find("O_DIRECT refused"), std::string::npos) << r.describe();
        for (int i = 0; i < 2; ++i)
            EXPECT_EQ(0, std::memcmp(ops[i].dst, bytes.data() + ops[i].offset, ExpertReader::kIoAlign)) << i;
        check_reader(p, bytes, io, true);  // the buffered fallback keeps serving aligned reads too
    }
    fs::remove(p);
}

// A cache of 8 experts per layer over `layers` of the file at p.
ExpertCacheSpec cache_spec(const fs::path& p, const std::vector<ExpertLayerFile>& layers, int n_slots, const char* policy,
                           ExpertIo io) {
    ExpertCacheSpec spec;
    spec.path = p.string();
    spec.n_layer = static_cast<int>(layers.size());
    spec.n_expert = 8;
    spec.layers = layers;
    spec.n_slots = n_slots;
    spec.policy = policy;
    spec.io = io;
    return spec;
}

// ---- ExpertCache: a miss never evicts an expert the same acquire asks for later.

TEST(ExpertCache, MissesNeverEvictAnExpertTheSameAcquireUsesLater) {
    const fs::path p = fs::temp_directory_path() / ("moe-test-hold-" + std::to_string(::getpid()) + ".bin");
    const uint64_t stride[3] = {4099, 3001, 5003};
    std::vector<ExpertLayerFile> layers(1);
    layers[0].layer = 0;
    uint64_t off = 129;
    for (int c = 0; c < 3; ++c) {
        layers[0].offset[c] = off;
        layers[0].stride[c] = stride[c];
        off += 8 * stride[c] + 5;
    }
    const auto bytes = random_file(p, off + 64);
    for (ExpertIo io : {ExpertIo::Uring, ExpertIo::Pread})
        for (const char* policy : {"lru", "lfu", "lfu-history"}) {
            ExpertCache cache(cache_spec(p, layers, 4, policy, io));
            ExpertSlices out[4];
            const int32_t first[4] = {0, 1, 2, 3};
            cache.acquire(0, first, 4, out);
            cache.release(0);
            // Every slot full; 0 is the least recent (and, for the LFU policies, tied on count with
            // the lowest key): the three misses before it in ids must not take its slot.
            const int32_t ids[4] = {4, 5, 6, 0};
            cache.acquire(0, ids, 4, out);
            for (int i = 0; i < 4; ++i) {
                const ExpertLayerFile& lf = layers[0];
                const char* got[3] = {out[i].gate, out[i].up, out[i].down};
                for (int c = 0; c < 3; ++c)
                    EXPECT_EQ(0, std::memcmp(got[c], bytes.data() + lf.offset[c] + static_cast<uint64_t>(ids[i]) * lf.stride[c],
                                             lf.stride[c]))
                        << policy << " expert " << ids[i] << " part " << c;
            }
            cache.release(0);
            const ExpertCacheCounters t = cache.total();
            EXPECT_EQ(t.hits, 1) << policy;
            EXPECT_EQ(t.misses, 7) << policy;
            EXPECT_EQ(t.evictions, 3) << policy;
        }
    fs::remove(p);
}

// ---- ExpertCache out of order: resident experts are ready before any read is waited for.

TEST(ExpertCache, AcquireAsyncReportsResidentExpertsFirst) {
    const fs::path p = fs::temp_directory_path() / ("moe-test-ooo-" + std::to_string(::getpid()) + ".bin");
    // 2 layers x 8 experts, slices at odd offsets and sizes (as in a GGUF).
    const uint64_t stride[3] = {5003, 4099, 3001};
    std::vector<ExpertLayerFile> layers(2);
    uint64_t off = 333;
    for (int l = 0; l < 2; ++l) {
        layers[static_cast<size_t>(l)].layer = l;
        for (int c = 0; c < 3; ++c) {
            layers[static_cast<size_t>(l)].offset[c] = off;
            layers[static_cast<size_t>(l)].stride[c] = stride[c];
            off += 8 * stride[c] + 17;
        }
    }
    const auto bytes = random_file(p, off + 100);
    auto check_view = [&](const ExpertSlices& v, int layer, int e) {
        const ExpertLayerFile& lf = layers[static_cast<size_t>(layer)];
        const char* got[3] = {v.gate, v.up, v.down};
        for (int c = 0; c < 3; ++c)
            EXPECT_EQ(0, std::memcmp(got[c], bytes.data() + lf.offset[c] + static_cast<uint64_t>(e) * lf.stride[c],
                                     lf.stride[c]))
                << "layer " << layer << " expert " << e << " part " << c;
    };
    for (ExpertIo io : {ExpertIo::Uring, ExpertIo::Pread})
        for (const char* policy : {"lru", "lfu", "lfu-history"}) {
            ExpertCache cache(cache_spec(p, layers, 6, policy, io));
            ExpertSlices out[4];
            const int32_t first[3] = {0, 1, 2};
            cache.acquire(0, first, 3, out);
            for (int i = 0; i < 3; ++i) check_view(out[i], 0, first[i]);
            cache.release(0);
            // 5 and 6 miss, 1 and 2 are resident: the first wait_ready has them (at least).
            const int32_t ids[4] = {5, 1, 6, 2};
            cache.acquire_async(0, ids, 4, out);
            uint8_t ready[4] = {0, 0, 0, 0};
            int got = cache.wait_ready(ready, 4);
            EXPECT_GE(got, 2);
            EXPECT_EQ(ready[1], 1);
            EXPECT_EQ(ready[3], 1);
            for (int i = 0; i < 4; ++i)
                if (ready[i]) check_view(out[i], 0, ids[i]);
            int calls = 1;
            while (got < 4 && calls < 10) {
                const int g = cache.wait_ready(ready, 4);
                EXPECT_GT(g, 0);  // blocks until one lands; never an empty answer while some are left
                got += g;
                ++calls;
            }
            EXPECT_EQ(got, 4);
            EXPECT_EQ(cache.wait_ready(ready, 4), 0);
            for (int i = 0; i < 4; ++i) check_view(out[i], 0, ids[i]);
            cache.release(0);
            const ExpertCacheCounters t = cache.total();
            EXPECT_EQ(t.hits, 2) << policy;
            EXPECT_EQ(t.misses, 5) << policy;
        }
    fs::remove(p);
}

}  // namespace
