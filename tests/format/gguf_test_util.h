#pragma once
// Helpers shared by the GGUF tests: a tiny little-endian byte builder, a small valid GGUF file
// described field by field (so a test can corrupt exactly one field), bit-exact Value comparison
// and a per-test temporary directory.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "format/gguf.h"

namespace moe::gguf::testing {

class Bytes {
public:
    Bytes& u8(uint8_t v) { return raw(&v, 1); }
    Bytes& u16(uint16_t v) { return raw(&v, 2); }
    Bytes& u32(uint32_t v) { return raw(&v, 4); }
    Bytes& u64(uint64_t v) { return raw(&v, 8); }
    Bytes& f32(float v) { return raw(&v, 4); }
    Bytes& str(const std::string& s) { return u64(s.size()).raw(s.data(), s.size()); }
    Bytes& raw(const void* p, size_t n);
    Bytes& append(const Bytes& b) { return raw(b.data().data(), b.size()); }
    Bytes& pad_to(uint64_t alignment);
    size_t size() const { return b_.size(); }
    const std::vector<uint8_t>& data() const { return b_; }

private:
    std::vector<uint8_t> b_;
};

// Encoded key + value type + value.
Bytes kv_u32(const std::string& key, uint32_t v);
Bytes kv_string(const std::string& key, const std::string& v);
// Value bytes supplied raw (after key and type).
Bytes kv_raw(const std::string& key, uint32_t type, const Bytes& value);

struct MiniTensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    uint64_t offset;
    int64_t n_dims = -1;  // -1: dims.size()
};

// A small valid file: by default 5 KVs (architecture, a u32, a bool, an f32, a string array) and
// two tensors (f32 [4,2] at 0, f16 [8] at 32) whose data ends the file exactly (no trailing
// padding), so truncation at any byte is a defect.
struct MiniFile {
    uint32_t magic = 0x46554747;
    uint32_t version = 3;
    int64_t n_tensors = -1;  // -1: tensors.size()
    int64_t n_kv = -1;       // -1: kvs.size()
    std::vector<Bytes> kvs;
    std::vector<MiniTensor> tensors;
    uint64_t alignment = 32;  // used for the padding before the data blob
    int64_t data_bytes = -1;  // -1: end of the last tensor (by offset)

    MiniFile();
    std::vector<uint8_t> build() const;
};

// Bytes of a tensor of type `type` and element count `n` (block-multiple).
uint64_t mini_tensor_bytes(uint32_t type, uint64_t n);

// Bit-exact comparison (floats by bit pattern); returns "" when equal, else where they differ.
std::string diff_values(const Value& a, const Value& b, const std::string& where = "");

// A fresh empty directory under the gtest temp dir, unique per test.
std::filesystem::path temp_dir();

}  // namespace moe::gguf::testing
