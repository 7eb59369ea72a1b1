#pragma once
// Streaming GGUF v3 writer: declare metadata and tensors (name, type, shape), then stream each
// tensor's bytes in declaration order, in as many chunks as wanted. Nothing but the header is held
// in memory, so models larger than RAM can be written. Output is readable by llama.cpp.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "format/gguf.h"

namespace moe::gguf {

class Writer {
public:
    explicit Writer(std::string path, uint64_t alignment = 32);
    ~Writer();  // closes the file; an unfinished file is removed
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    // Metadata (in insertion order; duplicate keys are an error).
    void set(const std::string& key, Value v);
    void set_u32(const std::string& key, uint32_t v);
    void set_i32(const std::string& key, int32_t v);
    void set_u64(const std::string& key, uint64_t v);
    void set_f32(const std::string& key, float v);
    void set_bool(const std::string& key, bool v);
    void set_string(const std::string& key, const std::string& v);
    void set_string_array(const std::string& key, const std::vector<std::string>& v);
    void set_f32_array(const std::string& key, const std::vector<float>& v);
    void set_i32_array(const std::string& key, const std::vector<int32_t>& v);

    // Declares a tensor; shape is ne0 first (1..4 dims). Returns its index.
    size_t add_tensor(const std::string& name, DType type, const std::vector<int64_t>& shape);
    uint64_t tensor_bytes(size_t index) const;

    // Writes header, metadata and tensor infos. Call once, after all set/add_tensor calls.
    void write_header();
    // Appends bytes of the current tensor (tensors are filled in declaration order); when a
    // tensor's bytes are complete, padding is written and the next tensor becomes current.
    void write_data(const void* data, size_t bytes);
    // Checks that every tensor was filled completely, flushes and closes.
    void finish();

private:
    struct Pending {
        std::string name;
        DType type;
        std::vector<int64_t> shape;
        uint64_t offset;
        uint64_t nbytes;
    };
    void write_raw(const void* p, size_t n);
    void write_zeros(uint64_t n);
    void write_u32(uint32_t x);
    void write_u64(uint64_t x);
    void write_string(const std::string& s);
    void write_value(const Value& v);
    std::string path_;
    uint64_t alignment_;
    std::FILE* fp_ = nullptr;
    std::vector<KV> kvs_;
    std::vector<Pending> tensors_;
    uint64_t data_size_ = 0;
    size_t current_ = 0;
    uint64_t written_in_current_ = 0;
    bool header_written_ = false;
    bool finished_ = false;
    uint64_t bytes_written_ = 0;  // file position, for padding
};

}  // namespace moe::gguf
