// Typed metadata getters of moe::gguf::File: absent -> nullopt, present with a type that cannot
// represent the request -> moe::Error naming the file, the key, the stored and the wanted type.
#include <limits>

#include "core/error.h"
#include "format/gguf.h"

namespace moe::gguf {
namespace {

[[noreturn]] void wrong_type(const File& f, std::string_view key, const Value& v, const char* want) {
    throw_error("gguf", f.path(), ": key '", key, "' has type ", v.type_string(), ", expected ", want);
}


bool fits_u64(const Value& v) { return !v.is_signed() || v.i >= 0; }
bool fits_i64(const Value& v) {
    return v.is_signed() || v.u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}
int64_t as_i64(const Value& v) { return v.is_signed() ? v.i : static_cast<int64_t>(v.u); }

const Value* array_of(const File& f, std::string_view key, const char* want, bool (*ok)(ValueType)) {
    const Value* v = f.find(key);
    if (!v) return nullptr;
    if (v->type != ValueType::ARRAY || !ok(v->elem_type)) wrong_type(f, key, *v, want);
    return v;
}

bool is_integer_type(ValueType t) {
    Value probe;
    probe.type = t;
    return probe.is_integer();
}

}  // namespace

std::optional<uint64_t> File::get_uint(std::string_view key) const {
    const Value* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_integer()) wrong_type(*this, key, *v, "an unsigned integer");
    if (!fits_u64(*v)) throw_error("gguf", path(), ": key '", key, "' is negative (", v->i, "), expected >= 0");
    return v->is_signed() ? static_cast<uint64_t>(v->i) : v->u;
}

std::optional<int64_t> File::get_int(std::string_view key) const {
    const Value* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_integer()) wrong_type(*this, key, *v, "an integer");
    if (!fits_i64(*v)) throw_error("gguf", path(), ": key '", key, "' value ", v->u, " does not fit in int64");
    return as_i64(*v);
}

std::optional<double> File::get_float(std::string_view key) const {
    const Value* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_float()) wrong_type(*this, key, *v, "f32 or f64");
    return v->f;
}

std::optional<bool> File::get_bool(std::string_view key) const {
    const Value* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != ValueType::BOOL) wrong_type(*this, key, *v, "bool");
    return v->u != 0;
}

std::optional<std::string> File::get_string(std::string_view key) const {
    const Value* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != ValueType::STRING) wrong_type(*this, key, *v, "string");
    return v->str;
}

std::optional<std::vector<std::string>> File::get_string_array(std::string_view key) const {
    const Value* v = array_of(*this, key, "array[string]", [](ValueType t) { return t == ValueType::STRING; });
    if (!v) return std::nullopt;
    std::vector<std::string> out;
    out.reserve(v->arr.size());
    for (const Value& e : v->arr) out.push_back(e.str);
    return out;
}

std::optional<std::vector<float>> File::get_f32_array(std::string_view key) const {
    const Value* v = array_of(*this, key, "array[f32]",
                              [](ValueType t) { return t == ValueType::F32 || t == ValueType::F64; });
    if (!v) return std::nullopt;
    std::vector<float> out;
    out.reserve(v->arr.size());
    for (const Value& e : v->arr) out.push_back(static_cast<float>(e.f));
    return out;
}

std::optional<std::vector<int32_t>> File::get_i32_array(std::string_view key) const {
    const Value* v = array_of(*this, key, "array[i32]", is_integer_type);
    if (!v) return std::nullopt;
    std::vector<int32_t> out;
    out.reserve(v->arr.size());
    for (size_t k = 0; k < v->arr.size(); ++k) {
        const Value& e = v->arr[k];
        const bool fits = fits_i64(e) && as_i64(e) >= std::numeric_limits<int32_t>::min() &&
                          as_i64(e) <= std::numeric_limits<int32_t>::max();
        if (!fits)
            throw_error("gguf", path(), ": key '", key, "' element ", k, " (", e.to_string(), ") does not fit in int32");
        out.push_back(static_cast<int32_t>(as_i64(e)));
    }
    return out;
}

}  // namespace moe::gguf
