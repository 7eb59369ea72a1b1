// Streaming GGUF v3 writer (layout: docs/FORMATS.md). The header is written from the declared
// metadata and tensor infos; tensor bytes are then appended in declaration order, each tensor
// padded with zeros to the alignment (after the last one too, as llama.cpp reads the padded size).
// general.alignment is written only when it differs from the default 32, or when the caller set
// it explicitly (then it must be a u32 equal to the writer's alignment).
#include "format/gguf_writer.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "core/checked.h"
#include "core/error.h"

namespace moe::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;
constexpr uint32_t kVersion = 3;
// llama.cpp stores names in a GGML_MAX_NAME (64) buffer including the NUL.
constexpr size_t kMaxWrittenName = kMaxTensorName - 1;

// Rejects what the reader would reject, so a written file always reads back.
void validate_value(const Value& v, int depth, const std::string& path, const std::string& key) {
    auto bad = [&](auto&&... args) { throw_error("gguf", path, ": key '", key, "': ", args...); };
    if (static_cast<uint32_t>(v.type) > static_cast<uint32_t>(ValueType::F64)) bad("unknown value type");
    if (v.type == ValueType::BOOL && v.u > 1) bad("bool value ", v.u, " (must be 0 or 1)");
    if (v.type != ValueType::ARRAY) return;
    if (static_cast<uint32_t>(v.elem_type) > static_cast<uint32_t>(ValueType::F64)) bad("unknown array element type");
    if (v.elem_type == ValueType::ARRAY && depth + 1 >= kMaxArrayDepth)
        bad("arrays nested deeper than ", kMaxArrayDepth, " levels");
    for (const Value& e : v.arr) {
        if (e.type != v.elem_type)
            bad("array element of type ", value_type_name(e.type), " in an array of ", value_type_name(v.elem_type));
        validate_value(e, depth + 1, path, key);
    }
}

}  // namespace

Writer::Writer(std::string path, uint64_t alignment) : path_(std::move(path)), alignment_(alignment) {
    if (alignment_ == 0 || !std::has_single_bit(alignment_) || alignment_ > std::numeric_limits<uint32_t>::max())
        throw_error("gguf", path_, ": alignment ", alignment_, " is not a power of two that fits in u32");
}

Writer::~Writer() {
    if (fp_) std::fclose(fp_);
    if (header_written_ && !finished_) std::remove(path_.c_str());  // never leave a half-written model
}

void Writer::set(const std::string& key, Value v) {
    if (header_written_) throw_error("gguf", path_, ": set('", key, "') after write_header()");
    if (key.empty() || key.size() > 65535) throw_error("gguf", path_, ": key of ", key.size(), " bytes (must be 1..65535)");
    for (const KV& kv : kvs_)
        if (kv.key == key) throw_error("gguf", path_, ": duplicate key '", key, "'");
    validate_value(v, 0, path_, key);
    if (key == "general.alignment" && (v.type != ValueType::U32 || v.u != alignment_))
        throw_error("gguf", path_, ": general.alignment must be a u32 equal to the writer's alignment ", alignment_,
                    " (got ", v.type_string(), " ", v.to_string(), ")");
    kvs_.push_back({key, std::move(v)});
}

namespace {
Value scalar(ValueType t) {
    Value v;
    v.type = t;
    return v;
}
template <typename T, typename Fill>
Value array(ValueType elem, const std::vector<T>& xs, Fill fill) {
    Value v = scalar(ValueType::ARRAY);
    v.elem_type = elem;
    v.arr.reserve(xs.size());
    for (const T& x : xs) {
        Value e = scalar(elem);
        fill(e, x);
        v.arr.push_back(std::move(e));
    }
    return v;
}
}  // namespace

void Writer::set_u32(const std::string& key, uint32_t x) { Value v = scalar(ValueType::U32); v.u = x; set(key, std::move(v)); }
void Writer::set_i32(const std::string& key, int32_t x) { Value v = scalar(ValueType::I32); v.i = x; set(key, std::move(v)); }
void Writer::set_u64(const std::string& key, uint64_t x) { Value v = scalar(ValueType::U64); v.u = x; set(key, std::move(v)); }
void Writer::set_f32(const std::string& key, float x) { Value v = scalar(ValueType::F32); v.f = x; set(key, std::move(v)); }
void Writer::set_bool(const std::string& key, bool x) { Value v = scalar(ValueType::BOOL); v.u = x ? 1 : 0; set(key, std::move(v)); }
void Writer::set_string(const std::string& key, const std::string& x) {
    Value v = scalar(ValueType::STRING);
    v.str = x;
    set(key, std::move(v));
}
void Writer::set_string_array(const std::string& key, const std::vector<std::string>& xs) {
    set(key, array(ValueType::STRING, xs, [](Value& e, const std::string& x) { e.str = x; }));
}
void Writer::set_f32_array(const std::string& key, const std::vector<float>& xs) {
    set(key, array(ValueType::F32, xs, [](Value& e, float x) { e.f = x; }));
}
void Writer::set_i32_array(const std::string& key, const std::vector<int32_t>& xs) {
    set(key, array(ValueType::I32, xs, [](Value& e, int32_t x) { e.i = x; }));
}

size_t Writer::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& shape) {
    auto bad = [&](auto&&... args) { throw_error("gguf", path_, ": tensor '", name, "': ", args...); };
    if (header_written_) bad("add_tensor() after write_header()");
    if (name.size() > kMaxWrittenName) bad("name of ", name.size(), " bytes is longer than ", kMaxWrittenName);
    for (const Pending& t : tensors_)
        if (t.name == name) bad("duplicate tensor name");
    const DTypeInfo* info = find_dtype(static_cast<uint32_t>(type));
    if (!info) bad("unknown tensor type ", static_cast<uint32_t>(type));
    if (shape.empty() || shape.size() > 4) bad(shape.size(), " dimensions (must be 1..4)");
    const std::string what = path_ + ": tensor '" + name + "' size";
    const uint64_t nelem = checked_product(shape.data(), static_cast<int>(shape.size()), "gguf", what.c_str());
    if (nelem > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) bad("element count overflows int64");
    const uint64_t ne0 = static_cast<uint64_t>(shape[0]);
    if (ne0 % info->block != 0) bad("ne[0]=", ne0, " is not a multiple of the ", info->name, " block size ", info->block);
    const uint64_t nbytes = moe::tensor_bytes(type, ne0, nelem / ne0, "gguf");
    const uint64_t offset = data_size_;
    data_size_ = checked_align(checked_add(offset, nbytes, "gguf", what.c_str()), alignment_, "gguf", what.c_str());
    tensors_.push_back({name, type, shape, offset, nbytes});
    return tensors_.size() - 1;
}

uint64_t Writer::tensor_bytes(size_t index) const {
    if (index >= tensors_.size())
        throw_error("gguf", path_, ": tensor index ", index, " out of range (", tensors_.size(), " declared)");
    return tensors_[index].nbytes;
}

void Writer::write_raw(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, fp_) != n)
        throw_error("gguf", path_, ": write failed (disk full or read-only?): ", std::strerror(errno));
    bytes_written_ = checked_add(bytes_written_, n, "gguf", "file size");
}

void Writer::write_zeros(uint64_t n) {
    static constexpr uint8_t kZeros[256] = {};
    while (n > 0) {
        const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof kZeros));
        write_raw(kZeros, k);
        n -= k;
    }
}

void Writer::write_u32(uint32_t x) { write_raw(&x, 4); }
void Writer::write_u64(uint64_t x) { write_raw(&x, 8); }

void Writer::write_string(const std::string& s) {
    write_u64(s.size());
    write_raw(s.data(), s.size());
}

void Writer::write_value(const Value& v) {
    switch (v.type) {
        case ValueType::U8: case ValueType::BOOL: { const uint8_t x = static_cast<uint8_t>(v.u); write_raw(&x, 1); break; }
        case ValueType::I8: { const int8_t x = static_cast<int8_t>(v.i); write_raw(&x, 1); break; }
        case ValueType::U16: { const uint16_t x = static_cast<uint16_t>(v.u); write_raw(&x, 2); break; }
        case ValueType::I16: { const int16_t x = static_cast<int16_t>(v.i); write_raw(&x, 2); break; }
        case ValueType::U32: write_u32(static_cast<uint32_t>(v.u)); break;
        case ValueType::I32: { const int32_t x = static_cast<int32_t>(v.i); write_raw(&x, 4); break; }
        case ValueType::U64: write_u64(v.u); break;
        case ValueType::I64: write_raw(&v.i, 8); break;
        case ValueType::F32: { const float x = static_cast<float>(v.f); write_raw(&x, 4); break; }
        case ValueType::F64: write_raw(&v.f, 8); break;
        case ValueType::STRING: write_string(v.str); break;
        case ValueType::ARRAY:
            write_u32(static_cast<uint32_t>(v.elem_type));
            write_u64(v.arr.size());
            for (const Value& e : v.arr) write_value(e);
            break;
    }
}

void Writer::write_header() {
    if (header_written_) throw_error("gguf", path_, ": write_header() called twice");
    fp_ = std::fopen(path_.c_str(), "wb");
    if (!fp_) throw_error("gguf", path_, ": cannot create file: ", std::strerror(errno));
    header_written_ = true;  // from here on an unfinished file is removed by the destructor
    const bool user_alignment = std::any_of(kvs_.begin(), kvs_.end(), [](const KV& kv) { return kv.key == "general.alignment"; });
    const bool add_alignment = !user_alignment && alignment_ != kDefaultAlignment;
    write_u32(kMagic);
    write_u32(kVersion);
    write_u64(tensors_.size());
    write_u64(kvs_.size() + (add_alignment ? 1 : 0));
    if (add_alignment) {
        write_string("general.alignment");
        write_u32(static_cast<uint32_t>(ValueType::U32));
        write_u32(static_cast<uint32_t>(alignment_));
    }
    for (const KV& kv : kvs_) {
        write_string(kv.key);
        write_u32(static_cast<uint32_t>(kv.value.type));
        write_value(kv.value);
    }
    for (const Pending& t : tensors_) {
        write_string(t.name);
        write_u32(static_cast<uint32_t>(t.shape.size()));
        for (int64_t d : t.shape) write_u64(static_cast<uint64_t>(d));
        write_u32(static_cast<uint32_t>(t.type));
        write_u64(t.offset);
    }
    write_zeros(checked_align(bytes_written_, alignment_, "gguf", "header size") - bytes_written_);
    current_ = 0;
    written_in_current_ = 0;
}

void Writer::write_data(const void* data, size_t bytes) {
    if (!header_written_ || finished_) throw_error("gguf", path_, ": write_data() outside write_header()..finish()");
    const auto* p = static_cast<const uint8_t*>(data);
    while (bytes > 0) {
        if (current_ >= tensors_.size())
            throw_error("gguf", path_, ": write_data(): ", bytes, " bytes more than the declared tensors hold");
        const Pending& t = tensors_[current_];
        const uint64_t take = std::min<uint64_t>(bytes, t.nbytes - written_in_current_);
        write_raw(p, static_cast<size_t>(take));
        p += take;
        bytes -= static_cast<size_t>(take);
        written_in_current_ += take;
        if (written_in_current_ == t.nbytes) {
            write_zeros(checked_align(t.nbytes, alignment_, "gguf", "tensor padding") - t.nbytes);
            ++current_;
            written_in_current_ = 0;
        }
    }
}

void Writer::finish() {
    if (finished_) throw_error("gguf", path_, ": finish() called twice");
    if (!header_written_) write_header();  // metadata-only files need no write_data()
    if (current_ < tensors_.size()) {
        const Pending& t = tensors_[current_];
        throw_error("gguf", path_, ": finish(): tensor '", t.name, "' has ", written_in_current_, " of ", t.nbytes,
                    " bytes written (", tensors_.size() - current_, " tensor(s) incomplete)");
    }
    const bool flushed = std::fflush(fp_) == 0;
    const bool closed = std::fclose(fp_) == 0;
    fp_ = nullptr;
    if (!flushed || !closed) throw_error("gguf", path_, ": write failed while closing (disk full?)");
    finished_ = true;
}

}  // namespace moe::gguf
