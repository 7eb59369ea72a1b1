// Writer round trips: every value type, nested/empty arrays, several tensor types streamed in odd
// chunks with a non-default alignment, read back bit-exactly; and a rewrite of a llama.cpp file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <vector>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/huge_pages.h"
#include "core/rng.h"
#include "format/gguf.h"
#include "format/gguf_test_util.h"
#include "format/gguf_writer.h"

namespace {

using moe::DType;
using moe::gguf::File;
using moe::gguf::Value;
using moe::gguf::ValueType;
using moe::gguf::Writer;
using namespace moe::gguf::testing;

Value scalar(ValueType t) {
    Value v;
    v.type = t;
    return v;
}
Value u(ValueType t, uint64_t x) { Value v = scalar(t); v.u = x; return v; }
Value i(ValueType t, int64_t x) { Value v = scalar(t); v.i = x; return v; }
Value f(ValueType t, double x) { Value v = scalar(t); v.f = x; return v; }
Value s(const std::string& x) { Value v = scalar(ValueType::STRING); v.str = x; return v; }
Value arr(ValueType elem, std::vector<Value> xs) {
    Value v = scalar(ValueType::ARRAY);
    v.elem_type = elem;
    v.arr = std::move(xs);
    return v;
}

std::vector<std::pair<std::string, Value>> all_values() {
    using T = ValueType;
    return {
        {"t.u8", u(T::U8, 255)},
        {"t.i8", i(T::I8, -128)},
        {"t.u16", u(T::U16, 65535)},
        {"t.i16", i(T::I16, -32768)},
        {"t.u32", u(T::U32, 4294967295u)},
        {"t.i32", i(T::I32, std::numeric_limits<int32_t>::min())},
        {"t.f32", f(T::F32, -1.5e-7f)},
        {"t.bool_true", u(T::BOOL, 1)},
        {"t.bool_false", u(T::BOOL, 0)},
        {"t.string", s(std::string("h\xc3\xa9llo\n\0world", 13))},
        {"t.string_empty", s("")},
        {"t.u64", u(T::U64, std::numeric_limits<uint64_t>::max())},
        {"t.i64", i(T::I64, std::numeric_limits<int64_t>::min())},
        {"t.f64", f(T::F64, 3.141592653589793)},
        {"t.arr_u8", arr(T::U8, {u(T::U8, 0), u(T::U8, 7), u(T::U8, 255)})},
        {"t.arr_i16", arr(T::I16, {i(T::I16, -1), i(T::I16, 300)})},
        {"t.arr_f64", arr(T::F64, {f(T::F64, 1e300), f(T::F64, -0.0)})},
        {"t.arr_bool", arr(T::BOOL, {u(T::BOOL, 1), u(T::BOOL, 0)})},
        {"t.arr_i64", arr(T::I64, {i(T::I64, -5)})},
        {"t.arr_u64", arr(T::U64, {u(T::U64, 1ull << 63)})},
        {"t.arr_empty", arr(T::U32, {})},
        {"t.arr_empty_strings", arr(T::STRING, {})},
        {"t.nested2", arr(T::ARRAY, {arr(T::I32, {i(T::I32, 1), i(T::I32, 2)}), arr(T::STRING, {s("x")}),
                                     arr(T::F32, {})})},
        {"t.nested3", arr(T::ARRAY, {arr(T::ARRAY, {arr(T::U16, {u(T::U16, 9)}), arr(T::BOOL, {})})})},
        {"t.nested_empty", arr(T::ARRAY, {})},
    };
}

struct TensorSpec {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
};

const std::vector<TensorSpec> kTensors = {
    {"t.f32", DType::F32, {5, 3}},
    {"t.f16", DType::F16, {7}},
    {"t.bf16", DType::BF16, {3, 2, 2}},
    {"t.q8_0", DType::Q8_0, {64, 3}},
    {"t.q4_k", DType::Q4_K, {256, 2}},
    {"t.q6_k.4d", DType::Q6_K, {256, 1, 1, 2}},
    {"t.i32", DType::I32, {9}},
};

std::vector<uint8_t> random_bytes(moe::Rng& rng, uint64_t n) {
    std::vector<uint8_t> b(n);
    for (auto& x : b) x = static_cast<uint8_t>(rng.next());
    return b;
}

TEST(GgufWriter, RoundTripEveryTypeOddChunksAlignment64) {
    const auto path = (temp_dir() / "rt.gguf").string();
    moe::Rng rng(7);
    std::vector<std::vector<uint8_t>> data;
    {
        Writer w(path, 64);
        w.set_string("general.architecture", "test");
        for (const auto& [k, v] : all_values()) w.set(k, v);
        w.set_u32("h.u32", 3);
        w.set_i32("h.i32", -3);
        w.set_u64("h.u64", 1ull << 40);
        w.set_f32("h.f32", 0.25f);
        w.set_bool("h.bool", true);
        w.set_string_array("h.strs", {"a", "", "ccc"});
        w.set_f32_array("h.f32s", {1.0f, -2.5f});
        w.set_i32_array("h.i32s", {-1, 0, 1});
        for (const auto& t : kTensors) {
            const size_t idx = w.add_tensor(t.name, t.type, t.shape);
            data.push_back(random_bytes(rng, w.tensor_bytes(idx)));
        }
        EXPECT_EQ(w.tensor_bytes(3), 3u * 2u * 34u);  // q8_0: rows of 64 elements = 2 blocks of 34 bytes
        w.write_header();
        // All tensor bytes back to back, streamed in odd chunks that straddle tensor boundaries.
        std::vector<uint8_t> all;
        for (const auto& d : data) all.insert(all.end(), d.begin(), d.end());
        for (size_t pos = 0; pos < all.size();) {
            const size_t n = std::min<size_t>(1 + rng.below(97), all.size() - pos);
            w.write_data(all.data() + pos, n);
            pos += n;
        }
        w.finish();
    }
    const File f = File::open(path);
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), 64u);
    EXPECT_EQ(f.data_offset() % 64, 0u);
    // general.alignment is added first because it is not the default.
    ASSERT_EQ(f.metadata().at(0).key, "general.alignment");
    EXPECT_EQ(f.metadata().at(0).value.type, ValueType::U32);
    EXPECT_EQ(f.get_uint("general.alignment"), 64u);
    for (const auto& [k, v] : all_values()) {
        const Value* got = f.find(k);
        ASSERT_NE(got, nullptr) << k;
        EXPECT_EQ(diff_values(v, *got, k), "");
    }
    EXPECT_EQ(f.get_string("t.string")->size(), 13u);  // embedded NUL kept
    EXPECT_EQ(f.get_int("h.i32"), -3);
    EXPECT_EQ(f.get_uint("h.u64"), 1ull << 40);
    EXPECT_EQ(f.get_float("h.f32"), 0.25);
    EXPECT_EQ(f.get_bool("h.bool"), true);
    EXPECT_EQ(f.get_string_array("h.strs"), (std::vector<std::string>{"a", "", "ccc"}));
    EXPECT_EQ(f.get_f32_array("h.f32s"), (std::vector<float>{1.0f, -2.5f}));
    EXPECT_EQ(f.get_i32_array("h.i32s"), (std::vector<int32_t>{-1, 0, 1}));
    EXPECT_EQ(f.metadata().size(), 1 + 1 + all_values().size() + 8);
    ASSERT_EQ(f.tensors().size(), kTensors.size());
    uint64_t end = 0;
    for (size_t k = 0; k < kTensors.size(); ++k) {
        const auto& t = f.tensors()[k];
        EXPECT_EQ(t.name, kTensors[k].name);
        EXPECT_EQ(t.type, kTensors[k].type);
        ASSERT_EQ(t.n_dims, static_cast<int>(kTensors[k].shape.size()));
        for (int d = 0; d < 4; ++d) EXPECT_EQ(t.ne[d], d < t.n_dims ? kTensors[k].shape[d] : 1) << t.name;
        EXPECT_EQ(t.offset % 64, 0u);
        ASSERT_EQ(t.nbytes, data[k].size());
        EXPECT_EQ(std::memcmp(f.view(t).data, data[k].data(), t.nbytes), 0) << t.name;
        end = t.offset + t.nbytes;
    }
    // Padding follows the last tensor too (llama.cpp reads the padded data size).
    EXPECT_EQ(f.file_size(), f.data_offset() + (end + 63) / 64 * 64);
    std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

TEST(GgufWriter, DefaultAlignmentIsNotWrittenAndMetadataOnlyFiles) {
    const auto path = (temp_dir() / "meta.gguf").string();
    {
        Writer w(path);
        w.set_string("general.architecture", "llama");
        w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "a"});
        w.finish();  // no tensors: write_header() is implied
    }
    const File f = File::open(path);
    EXPECT_EQ(f.find("general.alignment"), nullptr);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.metadata().size(), 2u);
    EXPECT_TRUE(f.tensors().empty());
}

void expect_error(const std::function<void()>& fn, const std::string& phrase) {
    try {
        fn();
        ADD_FAILURE() << "no error, expected: " << phrase;
    } catch (const moe::Error& e) {
        EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what() << "\nexpected: " << phrase;
    }
}

TEST(GgufWriter, RejectsWhatTheReaderWouldReject) {
    const auto path = (temp_dir() / "bad.gguf").string();
    expect_error([&] { Writer w(path, 48); }, "alignment 48 is not a power of two");
    Writer w(path);
    w.set_u32("k", 1);
    expect_error([&] { w.set_u32("k", 2); }, "duplicate key 'k'");
    expect_error([&] { w.set("", s("x")); }, "key of 0 bytes");
    expect_error([&] { w.set("b", u(ValueType::BOOL, 2)); }, "bool value 2");
    expect_error([&] { w.set("m", arr(ValueType::U32, {u(ValueType::U32, 1), i(ValueType::I32, 1)})); },
                 "array element of type i32 in an array of u32");
    const Value deep = arr(ValueType::ARRAY, {arr(ValueType::ARRAY, {arr(ValueType::ARRAY, {})})});
    expect_error([&] { w.set("deep", deep); }, "arrays nested deeper than 3 levels");
    expect_error([&] { w.set_u64("general.alignment", 32); }, "general.alignment must be a u32 equal to");
    w.add_tensor("t", DType::F32, {4});
    expect_error([&] { w.add_tensor("t", DType::F32, {4}); }, "duplicate tensor name");
    expect_error([&] { w.add_tensor(std::string(64, 'n'), DType::F32, {4}); }, "longer than 63");
    expect_error([&] { w.add_tensor("q", DType::Q8_0, {16}); }, "not a multiple of the q8_0 block size 32");
    expect_error([&] { w.add_tensor("z", DType::F32, {4, 0}); }, "dimension 1 is 0");
    expect_error([&] { w.add_tensor("five", DType::F32, {1, 1, 1, 1, 1}); }, "5 dimensions");
    expect_error([&] { w.add_tensor("none", DType::F32, {}); }, "0 dimensions");
    expect_error([&] { w.add_tensor("huge", DType::F32, {int64_t(1) << 62, 4}); }, "overflow");
    expect_error([&] { w.write_data("x", 1); }, "outside write_header()..finish()");
    w.write_header();
    expect_error([&] { w.set_u32("late", 1); }, "after write_header()");
    expect_error([&] { w.add_tensor("late", DType::F32, {4}); }, "after write_header()");
    const float x[3] = {1, 2, 3};
    w.write_data(x, sizeof x);
    expect_error([&] { w.finish(); }, "tensor 't' has 12 of 16 bytes written");
    const float more[2] = {4, 5};
    expect_error([&] { w.write_data(more, sizeof more); }, "4 bytes more than the declared tensors hold");
}

TEST(GgufWriter, UnfinishedFileIsRemoved) {
    const auto path = (temp_dir() / "partial.gguf").string();
    {
        Writer w(path);
        w.add_tensor("t", DType::F32, {4});
        w.write_header();
        EXPECT_TRUE(std::filesystem::exists(path));
    }
    EXPECT_FALSE(std::filesystem::exists(path));
}

// Rewrites the llama.cpp-written tiny model with our writer and compares everything.
TEST(GgufWriter, RewriteTinyLlama) {
    const File src = File::open(MOE_TEST_DATA_DIR "/models/llama-2-tiny-random.gguf");
    const auto path = (temp_dir() / "tiny.gguf").string();
    {
        Writer w(path, src.alignment());
        for (const auto& kv : src.metadata()) w.set(kv.key, kv.value);
        for (const auto& t : src.tensors())
            w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims));
        w.write_header();
        for (const auto& t : src.tensors()) {
            const auto* p = static_cast<const uint8_t*>(src.view(t).data);
            for (uint64_t pos = 0; pos < t.nbytes; pos += 1000)
                w.write_data(p + pos, static_cast<size_t>(std::min<uint64_t>(1000, t.nbytes - pos)));
        }
        w.finish();
    }
    const File out = File::open(path);
    ASSERT_EQ(out.metadata().size(), src.metadata().size());
    for (size_t k = 0; k < src.metadata().size(); ++k) {
        EXPECT_EQ(out.metadata()[k].key, src.metadata()[k].key);
        EXPECT_EQ(diff_values(src.metadata()[k].value, out.metadata()[k].value, src.metadata()[k].key), "");
    }
    ASSERT_EQ(out.tensors().size(), src.tensors().size());
    for (size_t k = 0; k < src.tensors().size(); ++k) {
        const auto& a = src.tensors()[k];
        const auto& b = out.tensors()[k];
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.type, b.type);
        EXPECT_EQ(a.n_dims, b.n_dims);
        EXPECT_TRUE(std::equal(a.ne, a.ne + 4, b.ne)) << a.name;
        EXPECT_EQ(a.offset, b.offset) << a.name;  // same packing rule as llama.cpp
        ASSERT_EQ(a.nbytes, b.nbytes);
        EXPECT_EQ(std::memcmp(src.view(a).data, out.view(b).data, a.nbytes), 0) << a.name;
    }
    // The llama.cpp layout is deterministic: a v3 source is reproduced byte for byte.
    if (src.version() == 3) {
        std::ifstream in(path, std::ios::binary);
        std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ASSERT_EQ(bytes.size(), src.file_size());
        const auto* orig = static_cast<const char*>(src.view(src.tensors()[0]).data) - src.data_offset() - src.tensors()[0].offset;
        EXPECT_EQ(std::memcmp(bytes.data(), orig, bytes.size()), 0);
    }
    std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

}  // namespace

namespace {
// This process's resident file-backed memory in bytes (RssFile of /proc/self/status), or -1.
int64_t rss_file() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("RssFile:", 0) == 0) return std::stoll(line.substr(8)) * 1024;
    return -1;
}
}  // namespace

namespace {
// A GGUF file at path with one F32 tensor "t" of n random values; returns the values.
std::vector<float> write_one_f32_tensor(const std::string& path, int64_t n, uint64_t seed) {
    std::vector<float> data(static_cast<size_t>(n));
    moe::Rng rng(seed);
    for (auto& v : data) v = rng.normal();
    Writer w(path);
    w.add_tensor("t", DType::F32, {n});
    w.write_header();
    w.write_data(data.data(), data.size() * sizeof(float));
    w.finish();
    return data;
}
}  // namespace

// release_pages (used after --repack-experts): the whole pages inside the range leave the mapping's
// resident set, a later read gives the same bytes (faulted back from the file); ranges outside the
// mapping, and Files parsed from memory, release nothing.
TEST(GgufFile, ReleasePagesDropsResidencyKeepsBytes) {
    const auto path = (temp_dir() / "release.gguf").string();
    // f32 values: 16 MiB and a bit, so RSS shows the release
    const std::vector<float> data = write_one_f32_tensor(path, (16 << 20) / 4 + 100, 0x7e1ea5e);
    const File f = File::open(path);
    const moe::TensorView t = f.view(*f.find_tensor("t"));
    const size_t bytes = data.size() * sizeof(float);
    ASSERT_EQ(0, std::memcmp(t.data, data.data(), bytes));  // touches every page
    const int64_t before = rss_file();
    const size_t released = f.release_pages(t.data, bytes);
    const int64_t after = rss_file();
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    EXPECT_GE(released, bytes - 2 * page);  // all but the two partial pages at the ends
    EXPECT_EQ(released % page, 0u);
    if (before >= 0) {
        EXPECT_LE(after, before - static_cast<int64_t>(released) + (1 << 20)) << "RssFile " << before << " -> " << after;
    }
    EXPECT_EQ(0, std::memcmp(t.data, data.data(), bytes));  // the same bytes, read back from the file
    // outside the mapping, empty, or a File over memory: nothing released
    EXPECT_EQ(f.release_pages(data.data(), bytes), 0u);
    EXPECT_EQ(f.release_pages(t.data, 0), 0u);
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> mem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const File m = File::parse(mem.data(), mem.size());
    const moe::TensorView tm = m.view(*m.find_tensor("t"));
    EXPECT_EQ(m.release_pages(tm.data, bytes), 0u);
    EXPECT_EQ(0, std::memcmp(tm.data, data.data(), bytes));
}

// File::open advises the mapping huge (core/huge_pages.h) before the first fault, unless
// MOE_HUGEPAGES=0; the bytes read are the file's either way.
TEST(GgufFile, MappingIsAdvisedHugeUnlessTurnedOff) {
    const auto path = (temp_dir() / "huge.gguf").string();
    const std::vector<float> data = write_one_f32_tensor(path, (4 << 20) / 4 + 7, 0x9a9e5);
    const char* old = std::getenv("MOE_HUGEPAGES");
    const std::string saved = old ? old : "";
    for (const bool off : {false, true}) {
        if (off) setenv("MOE_HUGEPAGES", "0", 1);
        else unsetenv("MOE_HUGEPAGES");
        const File f = File::open(path);
        ASSERT_NE(f.mapping(), nullptr);
        const moe::TensorView t = f.view(*f.find_tensor("t"));
        EXPECT_EQ(0, std::memcmp(t.data, data.data(), data.size() * sizeof(float)));
        const moe::HugeCoverage c = moe::huge_coverage(f.mapping(), f.file_size());
        ASSERT_TRUE(c.known);
        EXPECT_LE(c.huge, c.rss);
        if (moe::thp_mode() != "unknown") {
            EXPECT_EQ(c.advised, !off) << (off ? "MOE_HUGEPAGES=0" : "default");
        }
    }
    if (old) setenv("MOE_HUGEPAGES", saved.c_str(), 1);
    else unsetenv("MOE_HUGEPAGES");
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> mem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(File::parse(mem.data(), mem.size()).mapping(), nullptr);  // not a mapping
}
