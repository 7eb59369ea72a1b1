// GGUF v2/v3 reader. Every count, length, offset and size read from the file is bounded by the
// bytes that remain before it is used, and all size arithmetic goes through core/checked.h, so a
// hostile or truncated file produces a moe::Error naming the file and the defect, never a crash
// or an unbounded allocation. The accepted format and the list of checks: docs/FORMATS.md.
#include "format/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>

#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/huge_pages.h"
#include "format/gguf_keys.h"

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace moe::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kMaxKeyBytes = 65535;
// Smallest encodings, used to bound counts by the bytes left before anything is allocated.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;             // key length, value type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name length, n_dims, 1 dim, type, offset
// Cap on array elements over the whole file: each parsed element costs a Value (~90 bytes), so
// this bounds metadata memory to ~400 MB whatever the file claims. The largest real vocabularies
// (Gemma 3, 262k tokens x tokens/scores/token_type) need < 1M. docs/SECURITY.md lists the bounds.
constexpr uint64_t kMaxMetadataElements = uint64_t(1) << 22;
// Cap on tensors: each info costs ~300 bytes (TensorInfo + name index); real files have < 50k
// (DeepSeek-V3 with one tensor per expert would be 45k).
constexpr uint64_t kMaxTensors = uint64_t(1) << 18;
constexpr const char* kFix = "; re-download or re-convert the file";
constexpr const char* kDamaged = " (the file is truncated or damaged); re-download or re-convert the file";

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::F64); }

uint64_t min_value_bytes(ValueType t) {
    switch (t) {
        case ValueType::U8: case ValueType::I8: case ValueType::BOOL: return 1;
        case ValueType::U16: case ValueType::I16: return 2;
        case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
        case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
        case ValueType::STRING: return 8;      // length only
        case ValueType::ARRAY: return 4 + 8;   // element type + count
    }
    return 1;
}

// Bounds-checked little-endian cursor over the file bytes.
class Cursor {
public:
    Cursor(const uint8_t* data, uint64_t size, const std::string& name) : p_(data), size_(size), name_(name) {}

    template <typename... Args>
    [[noreturn]] void fail(Args&&... args) const {
        throw_error("gguf", name_, ": ", std::forward<Args>(args)...);
    }

    uint64_t pos() const { return pos_; }
    uint64_t left() const { return size_ - pos_; }

    void need(uint64_t n, const std::string& what) const {
        if (n > left())
            fail("truncated: ", what, " at byte ", pos_, " needs ", n, " bytes but only ", left(),
                 " remain", kFix);
    }

    template <typename T>
    T read(const std::string& what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, p_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    // GGUF string: u64 length + bytes. `max_len` bounds it beyond the bytes left.
    std::string read_string(const std::string& what, uint64_t max_len = std::numeric_limits<uint64_t>::max()) {
        const uint64_t at = pos_;
        const uint64_t len = read<uint64_t>(what + " length");
        if (len > left())
            fail(what, ": string length ", len, " at byte ", at, " exceeds the ", left(),
                 " bytes left in the file", kDamaged);
        if (len > max_len) fail(what, ": length ", len, " is longer than the limit of ", max_len, " bytes");
        return read_bytes(len, what);
    }

    std::string read_bytes(uint64_t len, const std::string& what) {
        need(len, what);
        std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
        pos_ += len;
        return s;
    }

private:
    const uint8_t* p_;
    uint64_t size_;
    uint64_t pos_ = 0;
    const std::string& name_;
};

// Runs a core/checked.h computation and prefixes its error with the file and subject.
template <typename F>
auto with_context(const std::string& prefix, F&& f) {
    try {
        return f();
    } catch (const Error& e) {
        std::string msg = e.what();
        const std::string tag = "[" + e.component() + "] ";
        if (msg.rfind(tag, 0) == 0) msg.erase(0, tag.size());
        throw Error("gguf", prefix + ": " + msg);
    }
}

}  // namespace

// Everything parsed from the file; Impl adds ownership of the mapping.
struct Contents {
    std::string path;
    const uint8_t* base = nullptr;
    uint64_t size = 0;

    uint32_t version = 0;
    uint64_t alignment = kDefaultAlignment;
    uint64_t data_offset = 0;
    std::vector<KV> kvs;
    std::map<std::string, size_t, std::less<>> kv_index;
    std::vector<TensorInfo> tensors;
    std::map<std::string, size_t, std::less<>> tensor_index;

    template <typename... Args>
    [[noreturn]] void fail(Args&&... args) const {
        throw_error("gguf", path, ": ", std::forward<Args>(args)...);
    }
};

struct File::Impl : Contents {
    void* map = nullptr;
    size_t map_len = 0;

    Impl() = default;
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;
    ~Impl() {
        if (map) ::munmap(map, map_len);
    }
};

namespace {

class Parser {
public:
    explicit Parser(Contents& f) : f_(f), in_(f.base, f.size, f.path) {}

    void run() {
        read_header();
        read_metadata();
        check_metadata();
        read_tensor_infos();
        place_tensors();
    }

private:
    void read_header() {
        const uint32_t magic = in_.read<uint32_t>("magic");
        if (magic != kMagic) {
            char got[5] = {};
            std::memcpy(got, &magic, 4);
            for (char& c : got)
                if (c && (c < 32 || c > 126)) c = '?';
            in_.fail("bad magic \"", got, "\" (expected \"GGUF\"): not a GGUF file, or a damaged one", kFix);
        }
        f_.version = in_.read<uint32_t>("version");
        if (f_.version != 2 && f_.version != 3) {
            const bool swapped = f_.version == 0x02000000u || f_.version == 0x03000000u;
            in_.fail("unsupported GGUF version ", f_.version,
                     swapped ? " (this looks like a big-endian file; only little-endian GGUF is supported)"
                     : f_.version == 1 ? " (GGUF v1 is obsolete; re-convert the model with a current llama.cpp)"
                                       : " (supported: 2 and 3)");
        }
        n_tensors_ = in_.read<uint64_t>("tensor count");
        n_kv_ = in_.read<uint64_t>("metadata key/value count");
        // Bound both counts by the bytes left before anything is allocated.
        if (n_tensors_ > in_.left() / kMinTensorInfoBytes)
            in_.fail("tensor count ", n_tensors_, " is impossible: each tensor info needs at least ",
                     kMinTensorInfoBytes, " bytes and only ", in_.left(), " bytes follow the header", kDamaged);
        if (n_tensors_ > kMaxTensors)
            in_.fail("tensor count ", n_tensors_, " is more than the limit of ", kMaxTensors,
                     " tensors (real models have < 50000)", kDamaged);
        const uint64_t info_min = checked_mul(n_tensors_, kMinTensorInfoBytes, "gguf", "tensor info size");
        if (n_kv_ > (in_.left() - info_min) / kMinKvBytes)
            in_.fail("metadata key/value count ", n_kv_, " is impossible: each pair needs at least ", kMinKvBytes,
                     " bytes and only ", in_.left(), " bytes follow the header", kDamaged);
    }

    void read_metadata() {
        f_.kvs.reserve(static_cast<size_t>(n_kv_));
        for (uint64_t k = 0; k < n_kv_; ++k) {
            const uint64_t at = in_.pos();
            KV kv;
            kv.key = in_.read_string("metadata key " + std::to_string(k), kMaxKeyBytes);
            if (kv.key.empty()) in_.fail("metadata key ", k, " at byte ", at, " is empty", kFix);
            const std::string ctx = "key '" + kv.key + "'";
            const ValueType t = read_value_type(ctx + " value type");
            kv.value = read_value(t, 0, ctx);
            if (!f_.kv_index.emplace(kv.key, f_.kvs.size()).second)
                in_.fail("duplicate key '", kv.key, "' (second copy at byte ", at, ")", kFix);
            f_.kvs.push_back(std::move(kv));
        }
    }

    ValueType read_value_type(const std::string& what) {
        const uint64_t at = in_.pos();
        const uint32_t t = in_.read<uint32_t>(what);
        if (!known_value_type(t)) in_.fail(what, ": unknown value type ", t, " at byte ", at, kFix);
        return static_cast<ValueType>(t);
    }

    // `depth` is the number of arrays enclosing this value.
    Value read_value(ValueType t, int depth, const std::string& ctx) {
        Value v;
        v.type = t;
        switch (t) {
            case ValueType::U8: v.u = in_.read<uint8_t>(ctx); break;
            case ValueType::U16: v.u = in_.read<uint16_t>(ctx); break;
            case ValueType::U32: v.u = in_.read<uint32_t>(ctx); break;
            case ValueType::U64: v.u = in_.read<uint64_t>(ctx); break;
            case ValueType::I8: v.i = in_.read<int8_t>(ctx); break;
            case ValueType::I16: v.i = in_.read<int16_t>(ctx); break;
            case ValueType::I32: v.i = in_.read<int32_t>(ctx); break;
            case ValueType::I64: v.i = in_.read<int64_t>(ctx); break;
            case ValueType::F32: v.f = in_.read<float>(ctx); break;
            case ValueType::F64: v.f = in_.read<double>(ctx); break;
            case ValueType::BOOL: {
                const uint64_t at = in_.pos();
                const uint8_t b = in_.read<uint8_t>(ctx);
                if (b > 1) in_.fail(ctx, ": invalid bool value ", unsigned(b), " at byte ", at, " (must be 0 or 1)", kFix);
                v.u = b;
                break;
            }
            case ValueType::STRING: v.str = in_.read_string(ctx); break;
            case ValueType::ARRAY: read_array(v, depth + 1, ctx); break;
        }
        return v;
    }

    void read_array(Value& v, int depth, const std::string& ctx) {
        v.elem_type = read_value_type(ctx + " array element type");
        if (v.elem_type == ValueType::ARRAY && depth >= kMaxArrayDepth)
            in_.fail(ctx, ": arrays nested deeper than ", kMaxArrayDepth, " levels", kFix);
        const uint64_t at = in_.pos();
        const uint64_t count = in_.read<uint64_t>(ctx + " array count");
        const uint64_t min_bytes = min_value_bytes(v.elem_type);
        if (count > in_.left() / min_bytes)
            in_.fail(ctx, ": array element count ", count, " at byte ", at, " needs at least ", min_bytes,
                     " bytes each but only ", in_.left(), " bytes are left", kDamaged);
        if (count > elems_left_)
            in_.fail(ctx, ": array of ", count, " elements exceeds the limit of ", kMaxMetadataElements,
                     " metadata array elements per file");
        elems_left_ -= count;
        v.arr.reserve(static_cast<size_t>(count));
        for (uint64_t k = 0; k < count; ++k) {
            if (v.elem_type == ValueType::ARRAY) {
                // Nested arrays carry their own element type and count.
                Value inner;
                inner.type = ValueType::ARRAY;
                read_array(inner, depth + 1, ctx);
                v.arr.push_back(std::move(inner));
            } else {
                v.arr.push_back(read_value(v.elem_type, depth, ctx));
            }
        }
    }

    // Alignment and the value types of well-known keys.
    void check_metadata() {
        std::string arch;
        if (auto it = f_.kv_index.find("general.architecture"); it != f_.kv_index.end()) {
            const Value& a = f_.kvs[it->second].value;
            if (a.type == ValueType::STRING) arch = a.str;
        }
        for (const KV& kv : f_.kvs) {
            const auto kind = known_key_kind(kv.key, arch);
            if (kind && !value_matches(kv.value, *kind))
                f_.fail("key '", kv.key, "' has type ", kv.value.type_string(), ", expected ", key_kind_name(*kind),
                        kFix);
        }
        if (auto it = f_.kv_index.find("general.alignment"); it != f_.kv_index.end()) {
            const uint64_t a = f_.kvs[it->second].value.u;  // u32, checked above
            if (a == 0 || !std::has_single_bit(a))
                f_.fail("general.alignment ", a, " is not a power of two", kFix);
            f_.alignment = a;
        }
    }

    void read_tensor_infos() {
        f_.tensors.reserve(static_cast<size_t>(n_tensors_));
        for (uint64_t k = 0; k < n_tensors_; ++k) {
            const uint64_t at = in_.pos();
            TensorInfo t{};
            const std::string what = "tensor info " + std::to_string(k);
            const uint64_t len = in_.read<uint64_t>(what + " name length");
            if (len > kMaxTensorName)
                in_.fail(what, " at byte ", at, ": tensor name of ", len, " bytes is longer than ", kMaxTensorName,
                         " bytes", kFix);
            t.name = in_.read_bytes(len, what + " name");
            read_shape_and_type(t, "tensor '" + t.name + "'");
            t.offset = in_.read<uint64_t>("tensor '" + t.name + "' offset");
            if (!f_.tensor_index.emplace(t.name, f_.tensors.size()).second)
                in_.fail("duplicate tensor name '", t.name, "' (second copy at byte ", at, ")", kFix);
            f_.tensors.push_back(std::move(t));
        }
    }

    void read_shape_and_type(TensorInfo& t, const std::string& ctx) {
        const uint32_t n_dims = in_.read<uint32_t>(ctx + " n_dims");
        if (n_dims < 1 || n_dims > 4)
            in_.fail(ctx, " has ", n_dims, " dimensions (must be 1..4)", kFix);
        t.n_dims = static_cast<int>(n_dims);
        for (int d = 0; d < 4; ++d) t.ne[d] = 1;
        for (int d = 0; d < t.n_dims; ++d) {
            const uint64_t ne = in_.read<uint64_t>(ctx + " dimension " + std::to_string(d));
            if (ne == 0) in_.fail(ctx, ": dimension ", d, " is 0 (must be > 0)", kFix);
            if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                in_.fail(ctx, ": dimension ", d, " is ", ne, ", too large (size overflow)", kFix);
            t.ne[d] = static_cast<int64_t>(ne);
        }
        const uint64_t at = in_.pos();
        const uint32_t type = in_.read<uint32_t>(ctx + " type");
        const DTypeInfo* info = find_dtype(type);
        if (!info)
            in_.fail(ctx, ": unknown tensor type ", type, " at byte ", at,
                     " (a newer quantization, or a damaged file; update moe-engine or re-convert)");
        t.type = info->type;
        const std::string prefix = f_.path + ": " + ctx;
        const uint64_t nelem = with_context(prefix, [&] { return checked_product(t.ne, 4, "gguf", "element count"); });
        if (nelem > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            in_.fail(ctx, ": element count ", nelem, " is too large (size overflow)", kFix);
        const uint64_t ne0 = static_cast<uint64_t>(t.ne[0]);
        if (ne0 % info->block != 0)
            in_.fail(ctx, ": ne[0]=", ne0, " is not a multiple of the ", info->name, " block size ", info->block, kFix);
        t.nbytes = with_context(prefix, [&] { return tensor_bytes(t.type, ne0, nelem / ne0, "gguf"); });
    }

    // Data blob placement: aligned offsets inside the file, no two tensors sharing bytes.
    void place_tensors() {
        const uint64_t header_end = in_.pos();
        // llama.cpp pads to the alignment only when there are tensors; a vocab-only file may end here.
        f_.data_offset = f_.tensors.empty()
                             ? header_end
                             : with_context(f_.path, [&] { return checked_align(header_end, f_.alignment, "gguf", "data offset"); });
        for (const TensorInfo& t : f_.tensors) {
            const std::string ctx = "tensor '" + t.name + "'";
            if (t.offset % f_.alignment != 0)
                f_.fail(ctx, ": data offset ", t.offset, " is not a multiple of the alignment ", f_.alignment, kFix);
            const std::string prefix = f_.path + ": " + ctx;
            const uint64_t start = with_context(prefix, [&] { return checked_add(f_.data_offset, t.offset, "gguf", "data start"); });
            if (start >= f_.size)
                f_.fail(ctx, ": data at byte ", start, " starts past the end of the file (", f_.size, " bytes)", kDamaged);
            const uint64_t end = with_context(prefix, [&] { return checked_add(start, t.nbytes, "gguf", "data end"); });
            if (end > f_.size)
                f_.fail(ctx, ": data (", t.nbytes, " bytes from byte ", start, ") extends past the end of the file (",
                        f_.size, " bytes); the file is truncated", kFix);
        }
        std::vector<size_t> order(f_.tensors.size());
        std::iota(order.begin(), order.end(), size_t(0));
        std::sort(order.begin(), order.end(),
                  [&](size_t a, size_t b) { return f_.tensors[a].offset < f_.tensors[b].offset; });
        for (size_t k = 1; k < order.size(); ++k) {
            const TensorInfo& prev = f_.tensors[order[k - 1]];
            const TensorInfo& cur = f_.tensors[order[k]];
            const uint64_t prev_end = checked_add(prev.offset, prev.nbytes, "gguf", "tensor end");  // bounded above
            if (prev_end > cur.offset)
                f_.fail("tensors '", prev.name, "' and '", cur.name, "' overlap in the data section (offsets ",
                        prev.offset, " + ", prev.nbytes, " bytes > ", cur.offset, ")", kFix);
        }
    }

    Contents& f_;
    Cursor in_;
    uint64_t n_tensors_ = 0;
    uint64_t n_kv_ = 0;
    uint64_t elems_left_ = kMaxMetadataElements;
};

}  // namespace

File File::open(const std::string& path) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) impl->fail("cannot open: ", std::strerror(errno), " (check the path)");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        impl->fail("cannot stat: ", std::strerror(err));
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        impl->fail("is a directory, not a GGUF file");
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        impl->fail("is not a regular file");
    }
    if (st.st_size == 0) {
        ::close(fd);
        impl->fail("file is empty (0 bytes)", kFix);
    }
    impl->map_len = checked_cast<size_t>(st.st_size, "gguf", "file size");
    void* m = ::mmap(nullptr, impl->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);  // the mapping keeps the file alive
    if (m == MAP_FAILED) impl->fail("mmap failed: ", std::strerror(err));
    advise_huge(m, impl->map_len);  // before the first fault: weights on 2 MiB pages (core/huge_pages.h)
    impl->map = m;
    impl->base = static_cast<const uint8_t*>(m);
    impl->size = impl->map_len;
    Parser(*impl).run();
    return File(std::move(impl));
}

File File::parse(const void* data, size_t size, std::string name) {
    auto impl = std::make_unique<Impl>();
    impl->path = std::move(name);
    impl->base = static_cast<const uint8_t*>(data);
    impl->size = size;
    if (size > 0 && data == nullptr) impl->fail("null data pointer");
    Parser(*impl).run();
    return File(std::move(impl));
}

size_t File::release_pages(const void* p, size_t n) const {
    if (!impl_->map || !p || n == 0) return 0;
    const auto lo = reinterpret_cast<uintptr_t>(impl_->map), hi = lo + impl_->map_len;
    const auto a = reinterpret_cast<uintptr_t>(p);
    if (a < lo || a > hi || n > hi - a) return 0;
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t first = (a + page - 1) / page * page, last = (a + n) / page * page;
    if (last <= first) return 0;
    if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;  // advice only: keep the pages
    return last - first;
}

const void* File::mapping() const { return impl_->map; }

File::File(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

const std::string& File::path() const { return impl_->path; }
uint32_t File::version() const { return impl_->version; }
uint64_t File::alignment() const { return impl_->alignment; }
uint64_t File::file_size() const { return impl_->size; }
uint64_t File::data_offset() const { return impl_->data_offset; }
const std::vector<KV>& File::metadata() const { return impl_->kvs; }
const std::vector<TensorInfo>& File::tensors() const { return impl_->tensors; }

const Value* File::find(std::string_view key) const {
    auto it = impl_->kv_index.find(key);
    return it == impl_->kv_index.end() ? nullptr : &impl_->kvs[it->second].value;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
    auto it = impl_->tensor_index.find(name);
    return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

TensorView File::view(const TensorInfo& t) const {
    // Offsets and sizes were validated at open; the mapping is read-only (PROT_READ).
    auto* p = const_cast<uint8_t*>(impl_->base + impl_->data_offset + t.offset);
    return make_view(t.name, t.type, t.n_dims, t.ne, p);
}

}  // namespace moe::gguf
