#pragma once
// GGUF reader (versions 2 and 3): mmaps the file, validates every size and offset before use, and
// hands out zero-copy TensorViews into the mapping. Layout: docs/FORMATS.md (from FACTS.md §1).
// All errors are moe::Error with component "gguf" and name the file plus the key/tensor/defect.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace moe::gguf {

enum class ValueType : uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
    STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* value_type_name(ValueType t);

constexpr uint64_t kDefaultAlignment = 32;  // when general.alignment is absent
constexpr int kMaxArrayDepth = 3;           // array<array<array<scalar>>> at most
constexpr size_t kMaxTensorName = 64;       // spec limit; llama.cpp itself writes at most 63

// One metadata value. Scalars are widened into u/i/f; arrays hold their elements in `arr`
// (element type in `elem_type`; nested arrays allowed up to a bounded depth).
struct Value {
    ValueType type = ValueType::U32;
    uint64_t u = 0;     // U8/U16/U32/U64, BOOL (0/1)
    int64_t i = 0;      // I8/I16/I32/I64
    double f = 0;       // F32/F64
    std::string str;    // STRING
    ValueType elem_type = ValueType::U8;  // ARRAY
    std::vector<Value> arr;               // ARRAY

    bool is_integer() const;
    bool is_signed() const;            // I8/I16/I32/I64 (value in `i`)
    std::string type_string() const;   // "u32", "array[string]", "array[array[i32]]"
    bool is_float() const { return type == ValueType::F32 || type == ValueType::F64; }
    std::string to_string(size_t max_elems = 8) const;  // short human-readable form
};

struct KV {
    std::string key;
    Value value;
};

struct TensorInfo {
    std::string name;
    DType type;
    int n_dims;
    int64_t ne[4];      // ne[0] fastest-varying; unused dims = 1
    uint64_t offset;    // relative to the start of the data blob
    uint64_t nbytes;    // validated size of the tensor's data
};

class File {
public:
    // Opens and fully validates the file. Throws moe::Error("[gguf] <path>: <defect> ...").
    static File open(const std::string& path);
    // Same validation over bytes in memory (used by tests and fuzzing); `data` must outlive the File.
    static File parse(const void* data, size_t size, std::string name = "<memory>");

    File(File&&) noexcept;
    File& operator=(File&&) noexcept;
    ~File();

    const std::string& path() const;
    uint32_t version() const;
    uint64_t alignment() const;
    uint64_t file_size() const;
    uint64_t data_offset() const;  // file offset of the tensor-data blob

    const std::vector<KV>& metadata() const;
    const Value* find(std::string_view key) const;
    // Typed getters: nullopt when absent; throw when present with an incompatible type
    // (any integer type is accepted for get_uint/get_int if the value fits; F32/F64 for get_float).
    std::optional<uint64_t> get_uint(std::string_view key) const;
    std::optional<int64_t> get_int(std::string_view key) const;
    std::optional<double> get_float(std::string_view key) const;
    std::optional<bool> get_bool(std::string_view key) const;
    std::optional<std::string> get_string(std::string_view key) const;
    // Arrays: nullopt when absent; throw when not an array of the right element type.
    std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
    std::optional<std::vector<float>> get_f32_array(std::string_view key) const;
    std::optional<std::vector<int32_t>> get_i32_array(std::string_view key) const;  // any int elem type that fits

    const std::vector<TensorInfo>& tensors() const;
    const TensorInfo* find_tensor(std::string_view name) const;
    // Zero-copy view into the mapping (read-only data; the pointer is non-const for TensorView).
    TensorView view(const TensorInfo& t) const;
    // Hands the whole pages of the mapping inside [p, p + n) back to the kernel (madvise
    // MADV_DONTNEED: they leave the process's resident set; read again, they fault back in from
    // the file, so the bytes seen never change). For weights a load-time repack has replaced.
    // Returns the bytes released: 0 if the File is not a mapping (parse) or the range lies outside it.
    size_t release_pages(const void* p, size_t n) const;
    // The start of the file mapping (file_size() bytes), nullptr for a File made by parse().
    const void* mapping() const;

private:
    struct Impl;
    explicit File(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace moe::gguf
