// moe::gguf::Value helpers: type names and a short human-readable rendering.
#include <cstdio>

#include "format/gguf.h"

namespace moe::gguf {

const char* value_type_name(ValueType t) {
    switch (t) {
        case ValueType::U8: return "u8";
        case ValueType::I8: return "i8";
        case ValueType::U16: return "u16";
        case ValueType::I16: return "i16";
        case ValueType::U32: return "u32";
        case ValueType::I32: return "i32";
        case ValueType::F32: return "f32";
        case ValueType::BOOL: return "bool";
        case ValueType::STRING: return "string";
        case ValueType::ARRAY: return "array";
        case ValueType::U64: return "u64";
        case ValueType::I64: return "i64";
        case ValueType::F64: return "f64";
    }
    return "unknown";
}

bool Value::is_integer() const {
    switch (type) {
        case ValueType::U8: case ValueType::I8: case ValueType::U16: case ValueType::I16:
        case ValueType::U32: case ValueType::I32: case ValueType::U64: case ValueType::I64:
            return true;
        default:
            return false;
    }
}

bool Value::is_signed() const {
    return type == ValueType::I8 || type == ValueType::I16 || type == ValueType::I32 || type == ValueType::I64;
}

std::string Value::type_string() const {
    if (type != ValueType::ARRAY) return value_type_name(type);
    // Nested arrays show their first element's inner type when there is one.
    if (elem_type == ValueType::ARRAY && !arr.empty()) return "array[" + arr.front().type_string() + "]";
    return std::string("array[") + value_type_name(elem_type) + "]";
}

std::string Value::to_string(size_t max_elems) const {
    switch (type) {
        case ValueType::BOOL: return u ? "true" : "false";
        case ValueType::STRING: {
            constexpr size_t kMaxChars = 64;
            // Built with += (operator+ on literals trips a GCC 12 -Wrestrict false positive).
            std::string s(1, '"');
            s.append(str, 0, kMaxChars);
            if (str.size() <= kMaxChars) return s += '"';
            s += "...\" (";
            s += std::to_string(str.size());
            return s += " bytes)";
        }
        case ValueType::F32:
        case ValueType::F64: {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.9g", f);
            return buf;
        }
        case ValueType::ARRAY: {
            std::string s = "[";
            for (size_t k = 0; k < arr.size() && k < max_elems; ++k) {
                if (k) s += ", ";
                s += arr[k].to_string(max_elems);
            }
            if (arr.size() > max_elems) s += ", ... (" + std::to_string(arr.size()) + " elements)";
            return s + "]";
        }
        default:
            return is_signed() ? std::to_string(i) : std::to_string(u);
    }
}

}  // namespace moe::gguf
