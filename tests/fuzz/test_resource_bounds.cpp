// Resource bounds on hostile input (docs/SECURITY.md): every fuzz input, and files crafted to claim
// huge counts, runs in a forked child under RLIMIT_AS = (its address space at the start) +
// kMemSlack + kMemPerByte * input size, and must finish within kCpuBase + kCpuPerByte * size of
// CPU time. Claims of huge tensor counts, string/array lengths, vocabularies, contexts and expert
// counts must be refused with a moe::Error before memory is allocated for them.
//
// RLIMIT_AS cannot be used under AddressSanitizer/TSan (their shadow memory reserves terabytes of
// address space), so the memory half runs in the plain Release build only; the sanitizer builds
// still run the inputs and the time bound (scaled).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/fuzz_test_util.h"
#include "model/config.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

namespace {

// The stated bounds (docs/SECURITY.md, "Resource bounds").
constexpr uint64_t kMemSlack = uint64_t(256) << 20;  // fixed part: thread arenas, tables, scratch
constexpr uint64_t kMemPerByte = 128;                // per input byte (a u8 metadata element -> ~90 B)
constexpr double kCpuBase = 2.0;                     // seconds
constexpr double kCpuPerByte = 20e-6;                // 20 us per input byte (50 KB/s)
constexpr double kSanitizerSlowdown = 10.0;

uint64_t address_space_bytes() {
    std::ifstream in("/proc/self/statm");
    uint64_t pages = 0;
    in >> pages;
    return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

struct ChildResult {
    int status = 0;
    double cpu_s = 0;
};

// Runs fn in a forked child with the memory limit for an input of `size` bytes. Exit 0 = returned.
ChildResult run_bounded(size_t size, const std::function<void()>& fn) {
    const pid_t pid = fork();
    if (pid == 0) {
        if (!kSanitized) {
            const rlimit lim{address_space_bytes() + kMemSlack + kMemPerByte * size, RLIM_INFINITY};
            setrlimit(RLIMIT_AS, &lim);
        }
        try {
            fn();
        } catch (const std::bad_alloc&) {
            _exit(3);  // over the memory bound
        } catch (...) {
            _exit(4);
        }
        _exit(0);
    }
    ChildResult r;
    rusage ru{};
    wait4(pid, &r.status, 0, &ru);
    r.cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
              1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    return r;
}

void expect_bounded(const std::string& what, size_t size, const std::function<void()>& fn) {
    const ChildResult r = run_bounded(size, fn);
    EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)
        << what << " (" << size << " bytes): child "
        << (WIFEXITED(r.status) ? (WEXITSTATUS(r.status) == 3 ? "ran out of its memory bound"
                                                               : "exited with " + std::to_string(WEXITSTATUS(r.status)))
                                : "died of signal " + std::to_string(WTERMSIG(r.status)));
    const double limit = (kCpuBase + kCpuPerByte * static_cast<double>(size)) * (kSanitized ? kSanitizerSlowdown : 1.0);
    EXPECT_LE(r.cpu_s, limit) << what << " (" << size << " bytes) used " << r.cpu_s << " s of CPU";
}

// Expects `fn` to throw a moe::Error containing `needle`, within the bounds.
void expect_refused(const std::string& what, size_t size, const std::string& needle, const std::function<void()>& fn) {
    expect_bounded(what, size, [&] {
        try {
            fn();
        } catch (const moe::Error& e) {
            if (std::string(e.what()).find(needle) != std::string::npos) return;
            std::fprintf(stderr, "%s: unexpected message: %s\n", what.c_str(), e.what());
            _exit(5);
        }
        std::fprintf(stderr, "%s: accepted\n", what.c_str());
        _exit(6);
    });
}

// --- raw GGUF bytes -------------------------------------------------------------------------------
struct Bytes {
    std::string s;
    Bytes& u32(uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); return *this; }
    Bytes& u64(uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); return *this; }
    Bytes& str(const std::string& v) { u64(v.size()); s += v; return *this; }
    Bytes& zeros(size_t n) { s.append(n, '\0'); return *this; }
};

Bytes header(uint64_t n_tensors, uint64_t n_kv) {
    Bytes b;
    b.s = "GGUF";
    b.u32(3).u64(n_tensors).u64(n_kv);
    return b;
}

void parse(const std::string& s) { (void)moe::gguf::File::parse(s.data(), s.size(), "<hostile>"); }

// The harness itself: a child that allocates past the bound is caught (Release build only).
TEST(ResourceBounds, MemoryBoundIsEnforced) {
    if (kSanitized) GTEST_SKIP() << "RLIMIT_AS is not usable under sanitizers (see top of file)";
    const ChildResult r = run_bounded(1024, [] {
        std::vector<char> v(kMemSlack + (size_t(64) << 20), 1);
        std::printf("%d\n", v[v.size() / 2]);
    });
    EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 3) << "status " << r.status;
}

TEST(ResourceBounds, EveryFuzzInput) {
    for (const auto& t : moe::fuzz::kTargets) {
        moe::fuzz::prepare(t.name);  // vocabularies loaded before the fork: not the input's cost
        for (const auto& in : moe::testutil::fuzz_inputs(t.name))
            expect_bounded(std::string(t.name) + " " + in.path.filename().string(), in.bytes.size(),
                           [&] { t.fn(reinterpret_cast<const uint8_t*>(in.bytes.data()), in.bytes.size()); });
    }
}

// Long inputs without structure: one 64 KB "word" (the BPE merge loop is per pre-tokenized word),
// 64 KB of spaces, 64 KB of random bytes, for every target.
TEST(ResourceBounds, LongUnstructuredInputs) {
    (void)moe::fuzz::vocab_tokenizer(moe::fuzz::kVocabBpe);
    std::string word(1, '\0'), spaces(1, '\0'), noise;
    word.append(64 << 10, 'a');
    spaces.append(64 << 10, ' ');
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < (64 << 10); ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        noise.push_back(static_cast<char>(x));
    }
    for (const auto& t : moe::fuzz::kTargets)
        for (const auto* in : {&word, &spaces, &noise})
            expect_bounded(std::string(t.name) + " long input", in->size(),
                           [&] { t.fn(reinterpret_cast<const uint8_t*>(in->data()), in->size()); });
}

TEST(ResourceBounds, HugeCountsAreRefusedBeforeAllocating) {
    const std::string tensors = header(uint64_t(1) << 62, 0).zeros(64).s;
    expect_refused("tensor count 2^62", tensors.size(), "tensor count", [&] { parse(tensors); });
    // Enough bytes for the count to be possible, but above the tensor limit.
    const std::string many = header((uint64_t(1) << 18) + 1, 0).zeros(((size_t(1) << 18) + 1) * 32).s;
    expect_refused("tensor count 2^18+1", many.size(), "limit of 262144 tensors", [&] { parse(many); });
    const std::string kvs = header(0, uint64_t(1) << 60).zeros(64).s;
    expect_refused("kv count 2^60", kvs.size(), "key/value count", [&] { parse(kvs); });
    const std::string str = header(0, 1).str("k").u32(8).u64(uint64_t(1) << 60).zeros(16).s;
    expect_refused("string length 2^60", str.size(), "string length", [&] { parse(str); });
    const std::string arr = header(0, 1).str("k").u32(9).u32(0).u64(uint64_t(1) << 40).zeros(16).s;
    expect_refused("array count 2^40", arr.size(), "array element count", [&] { parse(arr); });
    // 2^22 + 1 one-byte elements are present in the file, and still refused (element cap).
    const size_t n = (size_t(1) << 22) + 1;
    const std::string big = header(0, 1).str("k").u32(9).u32(0).u64(n).zeros(n).s;
    expect_refused("array of 2^22+1 u8", big.size(), "limit of 4194304", [&] { parse(big); });
}

TEST(ResourceBounds, HugeVocabularyIsRefused) {
    expect_refused("vocab of 2^21+1 tokens", 8 * ((size_t(1) << 21) + 1), "more than the limit", [] {
        moe::tokenizer::Vocab v;
        v.model = "gpt2";
        v.type = moe::tokenizer::ModelType::Bpe;
        v.tokens.resize(moe::tokenizer::kMaxVocab + 1);
        for (size_t i = 0; i < v.tokens.size(); ++i) v.tokens[i] = std::to_string(i);
        moe::tokenizer::Tokenizer tok(std::move(v));
    });
}

// A valid tiny model (the gguf_bind seed) whose metadata claims a huge context, expert count or
// vocabulary: loading is refused or bounded, never sized by the claim.
class ResourceBoundsModel : public ::testing::Test {
protected:
    static std::string seed_path() {
        return (moe::testutil::fuzz_dir() / "corpus" / "gguf_bind" / "micro-olmoe-f32.gguf").string();
    }
    // The seed rewritten with `key` set to (or added as) `v`; key "" = the seed as it is.
    static std::string with_key(const std::string& key, moe::gguf::Value v) {
        const auto src = moe::gguf::File::open(seed_path());
        const auto out = std::filesystem::temp_directory_path() / ("moe_bounds_" + std::to_string(getpid()) + ".gguf");
        {
            moe::gguf::Writer w(out.string(), src.alignment());
            bool replaced = false;
            for (const auto& kv : src.metadata()) {
                if (kv.key == "general.alignment") continue;
                replaced |= kv.key == key;
                w.set(kv.key, kv.key == key ? v : kv.value);
            }
            if (!replaced && !key.empty()) w.set(key, v);  // added when the seed lacks it
            for (const auto& t : src.tensors())
                w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims));
            w.write_header();
            for (const auto& t : src.tensors()) w.write_data(src.view(t).data, t.nbytes);
            w.finish();
        }
        std::ifstream in(out, std::ios::binary);
        std::ostringstream ss;
        ss << in.rdbuf();
        std::filesystem::remove(out);
        return ss.str();
    }
    static moe::gguf::Value u64(uint64_t x) {
        moe::gguf::Value v;
        v.type = moe::gguf::ValueType::U64;
        v.u = x;
        return v;
    }
    static void load(const std::string& bytes) {
        moe::fuzz::gguf_bind(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    }
};

TEST_F(ResourceBoundsModel, SeedLoadsAndRuns) {
    const std::string s = with_key("", {});
    const auto f = moe::gguf::File::parse(s.data(), s.size());
    EXPECT_EQ(f.get_string("general.architecture"), "olmoe");
    expect_bounded("seed", s.size(), [&] { load(s); });
}

TEST_F(ResourceBoundsModel, HugeContextExpertAndVocabClaims) {
    struct Claim {
        std::string key;
        uint64_t value;
        bool refused;  // the tensors disagree with the claim, so loading must fail
    };
    for (const Claim& c : std::vector<Claim>{
             {"olmoe.context_length", uint64_t(1) << 40, false},  // n_ctx defaults to min(this, 4096)
             {"olmoe.context_length", uint64_t(1) << 62, true},
             {"olmoe.expert_count", 65536, true},
             {"olmoe.expert_count", uint64_t(1) << 40, true},
             {"olmoe.expert_used_count", 65536, true},
             {"olmoe.vocab_size", uint64_t(1) << 24, true},
             {"olmoe.vocab_size", uint64_t(1) << 40, true},
             {"olmoe.block_count", 4096, true},
             {"olmoe.embedding_length", uint64_t(1) << 24, true},
         }) {
        const std::string what = c.key + " = " + std::to_string(c.value);
        const std::string s = with_key(c.key, u64(c.value));
        auto load_model = [&] {
            (void)moe::model::Model::load(moe::gguf::File::parse(s.data(), s.size(), "<claim>"),
                                          {.n_threads = 1, .max_batch = 4});
        };
        if (c.refused) expect_refused(what, s.size(), "", load_model);
        else expect_bounded(what, s.size(), load_model);
        expect_bounded(what + " (gguf_bind)", s.size(), [&] { load(s); });
    }
}

}  // namespace
