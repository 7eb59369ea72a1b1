#include "format/gguf_test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "common/temp_dir.h"
#include "core/dtype.h"

namespace moe::gguf::testing {

Bytes& Bytes::raw(const void* p, size_t n) {
    // resize + memcpy rather than insert(): GCC 12 reports a false -Wstringop-overflow on insert.
    const size_t old = b_.size();
    b_.resize(old + n);
    if (n) std::memcpy(b_.data() + old, p, n);
    return *this;
}

Bytes& Bytes::pad_to(uint64_t alignment) {
    while (b_.size() % alignment != 0) b_.push_back(0);
    return *this;
}

Bytes kv_raw(const std::string& key, uint32_t type, const Bytes& value) {
    Bytes b;
    b.str(key).u32(type).append(value);
    return b;
}

Bytes kv_u32(const std::string& key, uint32_t v) { return kv_raw(key, 4, Bytes().u32(v)); }
Bytes kv_string(const std::string& key, const std::string& v) { return kv_raw(key, 8, Bytes().str(v)); }

MiniFile::MiniFile() {
    kvs.push_back(kv_string("general.architecture", "llama"));
    kvs.push_back(kv_u32("llama.block_count", 1));
    kvs.push_back(kv_raw("test.flag", 7, Bytes().u8(1)));
    kvs.push_back(kv_raw("llama.rope.freq_base", 6, Bytes().f32(10000.0f)));
    kvs.push_back(kv_raw("test.words", 9, Bytes().u32(8).u64(2).str("ab").str("c")));
    tensors.push_back({"a", {4, 2}, 0 /*F32*/, 0});
    tensors.push_back({"b", {8}, 1 /*F16*/, 32});
}

uint64_t mini_tensor_bytes(uint32_t type, uint64_t n) {
    const DTypeInfo* info = find_dtype(type);
    return info ? n / info->block * info->bytes : 0;
}

std::vector<uint8_t> MiniFile::build() const {
    Bytes b;
    b.u32(magic).u32(version);
    b.u64(n_tensors < 0 ? tensors.size() : static_cast<uint64_t>(n_tensors));
    b.u64(n_kv < 0 ? kvs.size() : static_cast<uint64_t>(n_kv));
    for (const Bytes& kv : kvs) b.append(kv);
    uint64_t end = 0;
    for (const MiniTensor& t : tensors) {
        b.str(t.name).u32(t.n_dims < 0 ? static_cast<uint32_t>(t.dims.size()) : static_cast<uint32_t>(t.n_dims));
        uint64_t n = 1;
        for (uint64_t d : t.dims) {
            b.u64(d);
            n *= d;
        }
        b.u32(t.type).u64(t.offset);
        end = std::max(end, t.offset + mini_tensor_bytes(t.type, n));
    }
    if (!tensors.empty()) b.pad_to(alignment);
    const uint64_t data = data_bytes < 0 ? end : static_cast<uint64_t>(data_bytes);
    for (uint64_t k = 0; k < data; ++k) b.u8(static_cast<uint8_t>(k * 7 + 1));
    return b.data();
}

std::string diff_values(const Value& a, const Value& b, const std::string& where) {
    auto differ = [&](const std::string& what) { return where + ": " + what + " differs"; };
    if (a.type != b.type) return differ(std::string("type ") + value_type_name(a.type) + " vs " + value_type_name(b.type));
    if (a.is_signed() && a.i != b.i) return differ("value");
    if ((a.type == ValueType::BOOL || (a.is_integer() && !a.is_signed())) && a.u != b.u) return differ("value");
    if (a.is_float() && std::memcmp(&a.f, &b.f, sizeof a.f) != 0) return differ("float bits");
    if (a.type == ValueType::STRING && a.str != b.str) return differ("string");
    if (a.type == ValueType::ARRAY) {
        if (a.elem_type != b.elem_type) return differ("element type");
        if (a.arr.size() != b.arr.size()) return differ("array size");
        for (size_t k = 0; k < a.arr.size(); ++k) {
            std::string d = diff_values(a.arr[k], b.arr[k], where + "[" + std::to_string(k) + "]");
            if (!d.empty()) return d;
        }
    }
    return "";
}

std::filesystem::path temp_dir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // Under the binary's scratch folder, which is removed when the binary's tests end.
    std::filesystem::path p = moe::testutil::binary_temp_dir("gguf") / (std::string(info->test_suite_name()) + "_" + info->name());
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p;
}

}  // namespace moe::gguf::testing
