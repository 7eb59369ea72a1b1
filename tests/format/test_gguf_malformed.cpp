// Hostile-input corpus for the GGUF reader, generated here: a small valid file (MiniFile) with one
// field corrupted per case; each case asserts the specific phrase of its defect. Parsed copies are
// exact-size heap buffers so that ASan catches any read past the end.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include "core/error.h"
#include "core/rng.h"
#include "format/gguf.h"
#include "format/gguf_test_util.h"

namespace {

using moe::gguf::File;
using namespace moe::gguf::testing;

constexpr const char* kName = "corpus.gguf";

// Parses an exact-size copy; returns the error message, or "" if it parsed.
std::string parse_error(const std::vector<uint8_t>& bytes, size_t len) {
    std::unique_ptr<uint8_t[]> copy(new uint8_t[len == 0 ? 1 : len]);
    if (len) std::memcpy(copy.get(), bytes.data(), len);
    try {
        const File f = File::parse(copy.get(), len, kName);
        // Touch every tensor byte through the public views, as a loader would.
        unsigned sum = 0;
        for (const auto& t : f.tensors()) {
            const auto v = f.view(t);
            for (uint64_t k = 0; k < t.nbytes; ++k) sum += static_cast<const uint8_t*>(v.data)[k];
        }
        for (const auto& kv : f.metadata()) sum += static_cast<unsigned>(kv.value.to_string().size());
        (void)sum;
        return "";
    } catch (const moe::Error& e) {
        return e.what();
    }
}

void expect_defect(const MiniFile& m, const std::string& phrase) {
    const auto bytes = m.build();
    const std::string err = parse_error(bytes, bytes.size());
    ASSERT_FALSE(err.empty()) << "parsed, expected: " << phrase;
    EXPECT_EQ(err.rfind(std::string("[gguf] ") + kName + ": ", 0), 0u) << err;
    EXPECT_NE(err.find(phrase), std::string::npos) << "message: " << err << "\nexpected phrase: " << phrase;
}

TEST(GgufMalformed, BaselineParses) {
    const MiniFile m;
    const auto bytes = m.build();
    ASSERT_EQ(parse_error(bytes, bytes.size()), "");
    const File f = File::parse(bytes.data(), bytes.size(), kName);
    EXPECT_EQ(f.tensors().size(), 2u);
    EXPECT_EQ(f.get_bool("test.flag"), true);
    EXPECT_EQ(f.get_string_array("test.words"), (std::vector<std::string>{"ab", "c"}));
    EXPECT_EQ(f.data_offset() + 48, f.file_size());  // data ends the file: every truncation is a defect
    MiniFile v2;
    v2.version = 2;
    const auto b2 = v2.build();
    EXPECT_EQ(File::parse(b2.data(), b2.size(), kName).version(), 2u);
}

TEST(GgufMalformed, BadMagic) {
    MiniFile m;
    m.magic = 0x46554746;  // "FGUF"
    expect_defect(m, "bad magic \"FGUF\"");
}

TEST(GgufMalformed, UnsupportedVersion) {
    MiniFile m;
    m.version = 1;
    expect_defect(m, "unsupported GGUF version 1");
    m.version = 4;
    expect_defect(m, "unsupported GGUF version 4");
    m.version = 0x03000000;
    expect_defect(m, "big-endian");
}

TEST(GgufMalformed, TruncatedAtEveryByte) {
    const auto bytes = MiniFile().build();
    for (size_t len = 0; len < bytes.size(); ++len) {
        const std::string err = parse_error(bytes, len);
        ASSERT_FALSE(err.empty()) << "prefix of " << len << " bytes parsed";
        EXPECT_TRUE(err.find("truncated") != std::string::npos) << len << ": " << err;
    }
}

TEST(GgufMalformed, HugeTensorCount) {
    MiniFile m;
    m.n_tensors = int64_t(1) << 60;
    expect_defect(m, "tensor count 1152921504606846976 is impossible");
}

TEST(GgufMalformed, HugeKvCount) {
    MiniFile m;
    m.n_kv = INT64_MAX;
    expect_defect(m, "metadata key/value count 9223372036854775807 is impossible");
}

TEST(GgufMalformed, StringLengthPastEnd) {
    MiniFile m;
    m.kvs[0] = kv_raw("general.architecture", 8, Bytes().u64(uint64_t(1) << 40));
    expect_defect(m, "string length 1099511627776");
    // A key whose own length runs past the end.
    MiniFile k;
    k.kvs.push_back(Bytes().u64(~uint64_t(0)));
    expect_defect(k, "string length 18446744073709551615");
}

TEST(GgufMalformed, HugeArrayCount) {
    MiniFile m;
    m.kvs.push_back(kv_raw("test.big", 9, Bytes().u32(4).u64(uint64_t(1) << 50)));
    expect_defect(m, "array element count 1125899906842624");
    // Strings need >= 8 bytes each: a count that would fit as bytes but not as strings.
    MiniFile s;
    s.kvs.push_back(kv_raw("test.strs", 9, Bytes().u32(8).u64(200)));
    expect_defect(s, "array element count 200");
}

TEST(GgufMalformed, DeepArrayNesting) {
    // Three levels are allowed ...
    MiniFile ok;
    ok.kvs.push_back(kv_raw("test.nest3", 9, Bytes().u32(9).u64(1).u32(9).u64(1).u32(4).u64(1).u32(7)));
    const auto b = ok.build();
    const File f = File::parse(b.data(), b.size(), kName);
    EXPECT_EQ(f.find("test.nest3")->arr.at(0).arr.at(0).arr.at(0).u, 7u);
    // ... four are not.
    MiniFile m;
    m.kvs.push_back(kv_raw("test.nest4", 9, Bytes().u32(9).u64(1).u32(9).u64(1).u32(9).u64(1).u32(4).u64(1).u32(7)));
    expect_defect(m, "key 'test.nest4': arrays nested deeper than 3 levels");
}

TEST(GgufMalformed, DuplicateKey) {
    MiniFile m;
    m.kvs.push_back(kv_u32("llama.block_count", 2));
    expect_defect(m, "duplicate key 'llama.block_count'");
}

TEST(GgufMalformed, EmptyKey) {
    MiniFile m;
    m.kvs.push_back(kv_u32("", 2));
    expect_defect(m, "metadata key 5 at byte");
}

TEST(GgufMalformed, DuplicateTensorName) {
    MiniFile m;
    m.tensors[1].name = "a";
    expect_defect(m, "duplicate tensor name 'a'");
}

TEST(GgufMalformed, InvalidBool) {
    MiniFile m;
    m.kvs[2] = kv_raw("test.flag", 7, Bytes().u8(2));
    expect_defect(m, "key 'test.flag': invalid bool value 2");
    MiniFile a;  // inside an array too
    a.kvs.push_back(kv_raw("test.bools", 9, Bytes().u32(7).u64(3).u8(0).u8(1).u8(255)));
    expect_defect(a, "invalid bool value 255");
}

TEST(GgufMalformed, UnknownValueType) {
    MiniFile m;
    m.kvs.push_back(kv_raw("test.x", 13, Bytes().u32(0)));
    expect_defect(m, "key 'test.x' value type: unknown value type 13");
    MiniFile a;
    a.kvs.push_back(kv_raw("test.arr", 9, Bytes().u32(0xFFFFFFFF).u64(0)));
    expect_defect(a, "array element type: unknown value type 4294967295");
}

TEST(GgufMalformed, UnknownTensorType) {
    MiniFile m;
    m.tensors[0].type = 31;  // removed Q4_0_4_4
    expect_defect(m, "tensor 'a': unknown tensor type 31");
    m.tensors[0].type = 40;
    expect_defect(m, "unknown tensor type 40");
}

TEST(GgufMalformed, DimensionCount) {
    MiniFile m;
    m.tensors[0].n_dims = 0;
    m.tensors[0].dims = {};
    m.data_bytes = 48;
    expect_defect(m, "tensor 'a' has 0 dimensions (must be 1..4)");
    MiniFile five;
    five.tensors[0].dims = {4, 2, 1, 1, 1};
    expect_defect(five, "tensor 'a' has 5 dimensions (must be 1..4)");
}

TEST(GgufMalformed, ZeroDimension) {
    MiniFile m;
    m.tensors[0].dims = {4, 0};
    m.data_bytes = 48;
    expect_defect(m, "tensor 'a': dimension 1 is 0");
}

TEST(GgufMalformed, OverflowingDims) {
    MiniFile m;
    m.data_bytes = 48;
    m.tensors[0].dims = {uint64_t(1) << 40, uint64_t(1) << 40};  // element count wraps u64
    expect_defect(m, "overflow");
    m.tensors[0].dims = {uint64_t(1) << 62, 2};  // fits u64, not int64
    expect_defect(m, "overflow");
    m.tensors[0].dims = {uint64_t(1) << 61, 2};  // elements fit, f32 bytes wrap u64
    expect_defect(m, "overflow");
    m.tensors[0].dims = {uint64_t(1) << 63};  // a single dim above INT64_MAX
    expect_defect(m, "dimension 0 is 9223372036854775808, too large");
}

TEST(GgufMalformed, RowNotMultipleOfBlock) {
    MiniFile m;
    m.tensors[0] = {"a", {16, 2}, 8 /*Q8_0*/, 0};
    m.data_bytes = 48;
    expect_defect(m, "tensor 'a': ne[0]=16 is not a multiple of the q8_0 block size 32");
}

TEST(GgufMalformed, MisalignedOffset) {
    MiniFile m;
    m.tensors[1].offset = 40;
    expect_defect(m, "tensor 'b': data offset 40 is not a multiple of the alignment 32");
}

TEST(GgufMalformed, OffsetPastEndOfFile) {
    MiniFile m;
    m.tensors[1].offset = 1 << 20;
    m.data_bytes = 48;
    expect_defect(m, "tensor 'b': data at byte");
    expect_defect(m, "starts past the end of the file");
    m.tensors[1].offset = ~uint64_t(31);  // aligned, but data_offset + offset wraps
    expect_defect(m, "overflow");
}

TEST(GgufMalformed, OverlappingTensors) {
    MiniFile m;
    m.tensors[0].dims = {4, 4};  // 64 bytes at 0 ...
    m.tensors[1].offset = 32;    // ... and 'b' at 32
    expect_defect(m, "tensors 'a' and 'b' overlap");
    // Declaration order does not matter: sorted by offset.
    MiniFile r;
    r.tensors = {{"b", {8}, 1, 32}, {"a", {4, 4}, 0, 0}};
    expect_defect(r, "tensors 'a' and 'b' overlap");
}

TEST(GgufMalformed, AlignmentNotPowerOfTwo) {
    MiniFile m;
    m.kvs.push_back(kv_u32("general.alignment", 48));
    expect_defect(m, "general.alignment 48 is not a power of two");
    MiniFile z;
    z.kvs.push_back(kv_u32("general.alignment", 0));
    expect_defect(z, "general.alignment 0 is not a power of two");
}

TEST(GgufMalformed, AlignmentWrongType) {
    MiniFile m;
    m.kvs.push_back(kv_raw("general.alignment", 10, Bytes().u64(32)));
    expect_defect(m, "key 'general.alignment' has type u64, expected u32");
}

TEST(GgufMalformed, NonDefaultAlignmentIsHonoured) {
    MiniFile m;
    m.kvs.push_back(kv_u32("general.alignment", 64));
    m.alignment = 64;
    m.tensors[1].offset = 64;
    const auto b = m.build();
    const File f = File::parse(b.data(), b.size(), kName);
    EXPECT_EQ(f.alignment(), 64u);
    EXPECT_EQ(f.data_offset() % 64, 0u);
    m.tensors[1].offset = 32;  // aligned to 32 but not 64
    expect_defect(m, "not a multiple of the alignment 64");
}

TEST(GgufMalformed, WrongTypeForKnownKey) {
    MiniFile m;
    m.kvs[0] = kv_u32("general.architecture", 5);
    expect_defect(m, "key 'general.architecture' has type u32, expected string");
    MiniFile t;
    t.kvs.push_back(kv_raw("tokenizer.ggml.tokens", 9, Bytes().u32(5).u64(1).u32(7)));
    expect_defect(t, "key 'tokenizer.ggml.tokens' has type array[i32], expected array[string]");
    MiniFile a;  // <arch>.* keys are typed through general.architecture
    a.kvs[1] = kv_string("llama.block_count", "one");
    expect_defect(a, "key 'llama.block_count' has type string, expected an integer");
    MiniFile f;
    f.kvs[3] = kv_u32("llama.rope.freq_base", 10000);
    expect_defect(f, "key 'llama.rope.freq_base' has type u32, expected f32 or f64");
    MiniFile e;  // an empty array still declares its element type
    e.kvs.push_back(kv_raw("tokenizer.ggml.scores", 9, Bytes().u32(8).u64(0)));
    expect_defect(e, "key 'tokenizer.ggml.scores' has type array[string], expected array[f32]");
}

TEST(GgufMalformed, TensorNameLength) {
    MiniFile ok;  // 64 bytes: the spec limit, accepted
    ok.tensors[0].name = std::string(64, 'n');
    const auto b = ok.build();
    EXPECT_EQ(parse_error(b, b.size()), "");
    MiniFile m;
    m.tensors[0].name = std::string(65, 'n');
    expect_defect(m, "tensor name of 65 bytes is longer than 64 bytes");
}

TEST(GgufMalformed, DataRegionTruncated) {
    MiniFile m;
    m.data_bytes = 40;  // 'b' needs bytes 32..48
    expect_defect(m, "tensor 'b': data (16 bytes from byte");
    expect_defect(m, "extends past the end of the file");
}

// Seeded random mutations of a valid file: each must parse or throw moe::Error, nothing else.
TEST(GgufMalformed, MutationFuzz) {
    MiniFile base;
    base.kvs.push_back(kv_raw("test.nest", 9, Bytes().u32(9).u64(2).u32(5).u64(1).u32(7).u32(8).u64(1).str("x")));
    base.kvs.push_back(kv_u32("general.alignment", 32));
    const auto valid = base.build();
    ASSERT_EQ(parse_error(valid, valid.size()), "");
    moe::Rng rng(20261129);
    int parsed = 0, rejected = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        std::vector<uint8_t> b = valid;
        const int ops = 1 + static_cast<int>(rng.below(3));
        for (int k = 0; k < ops && !b.empty(); ++k) {
            const size_t pos = rng.below(b.size());
            switch (rng.below(5)) {
                case 0: b[pos] ^= static_cast<uint8_t>(1u << rng.below(8)); break;
                case 1: b[pos] = static_cast<uint8_t>(rng.next()); break;
                case 2: b.resize(pos); break;
                case 3: {  // a large little-endian integer where a count or length may sit
                    const uint64_t x = rng.below(2) ? ~uint64_t(0) >> rng.below(64) : rng.next();
                    for (size_t j = 0; j < 8 && pos + j < b.size(); ++j) b[pos + j] = static_cast<uint8_t>(x >> (8 * j));
                    break;
                }
                default: b[pos] = static_cast<uint8_t>(rng.below(3)); break;  // small values: types, bools
            }
        }
        try {
            const std::string err = parse_error(b, b.size());
            (err.empty() ? parsed : rejected)++;
            if (!err.empty()) {
                ASSERT_EQ(err.rfind("[gguf] ", 0), 0u) << err;
            }
        } catch (const std::exception& e) {
            FAIL() << "iteration " << iter << ": non-moe exception: " << e.what();
        }
    }
    std::printf("mutation fuzz: %d parsed, %d rejected with moe::Error\n", parsed, rejected);
    EXPECT_GT(parsed, 0);
    EXPECT_GT(rejected, 0);
}

// The mmap path: File::open names the path in every error.
TEST(GgufMalformed, OpenErrorsNameThePath) {
    const auto dir = temp_dir();
    auto write = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
        const auto p = (dir / name).string();
        std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                 static_cast<std::streamsize>(bytes.size()));
        return p;
    };
    auto expect_open_error = [](const std::string& path, const std::string& phrase) {
        try {
            (void)File::open(path);
            ADD_FAILURE() << path << " opened";
        } catch (const moe::Error& e) {
            const std::string msg = e.what();
            EXPECT_EQ(msg.rfind("[gguf] " + path + ": ", 0), 0u) << msg;
            EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
        }
    };
    MiniFile m;
    const std::string good = write("good.gguf", m.build());
    EXPECT_EQ(File::open(good).tensors().size(), 2u);
    m.magic = 0x4c4c4747;
    expect_open_error(write("magic.gguf", m.build()), "bad magic");
    MiniFile t;
    t.data_bytes = 40;
    expect_open_error(write("short.gguf", t.build()), "extends past the end of the file");
    expect_open_error(write("empty.gguf", {}), "file is empty (0 bytes)");
    expect_open_error(write("tiny.gguf", {'G', 'G'}), "truncated");
    expect_open_error(dir.string(), "is a directory");
    expect_open_error((dir / "missing.gguf").string(), "cannot open: No such file or directory");
    std::filesystem::remove_all(dir);
}

}  // namespace
