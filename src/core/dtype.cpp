#include "core/dtype.h"

#include <cctype>

#include "core/checked.h"
#include "core/error.h"

namespace moe {
namespace {
// Sizes from ggml-common.h block structs (static_asserted there); see docs/FORMATS.md.
constexpr DTypeInfo kTypes[] = {
    {DType::F32, "f32", 1, 4, false},         {DType::F16, "f16", 1, 2, false},
    {DType::Q4_0, "q4_0", 32, 18, true},      {DType::Q4_1, "q4_1", 32, 20, true},
    {DType::Q5_0, "q5_0", 32, 22, true},      {DType::Q5_1, "q5_1", 32, 24, true},
    {DType::Q8_0, "q8_0", 32, 34, true},      {DType::Q8_1, "q8_1", 32, 36, true},
    {DType::Q2_K, "q2_K", 256, 84, true},     {DType::Q3_K, "q3_K", 256, 110, true},
    {DType::Q4_K, "q4_K", 256, 144, true},    {DType::Q5_K, "q5_K", 256, 176, true},
    {DType::Q6_K, "q6_K", 256, 210, true},    {DType::Q8_K, "q8_K", 256, 292, true},
    {DType::IQ2_XXS, "iq2_xxs", 256, 66, true}, {DType::IQ2_XS, "iq2_xs", 256, 74, true},
    {DType::IQ3_XXS, "iq3_xxs", 256, 98, true}, {DType::IQ1_S, "iq1_s", 256, 50, true},
    {DType::IQ4_NL, "iq4_nl", 32, 18, true},  {DType::IQ3_S, "iq3_s", 256, 110, true},
    {DType::IQ2_S, "iq2_s", 256, 82, true},   {DType::IQ4_XS, "iq4_xs", 256, 136, true},
    {DType::I8, "i8", 1, 1, false},           {DType::I16, "i16", 1, 2, false},
    {DType::I32, "i32", 1, 4, false},         {DType::I64, "i64", 1, 8, false},
    {DType::F64, "f64", 1, 8, false},         {DType::IQ1_M, "iq1_m", 256, 56, true},
    {DType::BF16, "bf16", 1, 2, false},       {DType::TQ1_0, "tq1_0", 256, 54, true},
    {DType::TQ2_0, "tq2_0", 256, 66, true},   {DType::MXFP4, "mxfp4", 32, 17, true},
};

bool iequal(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}
}  // namespace

const DTypeInfo* find_dtype(uint32_t id) {
    for (const auto& t : kTypes)
        if (static_cast<uint32_t>(t.type) == id) return &t;
    return nullptr;
}

const DTypeInfo& dtype_info(DType t) {
    const DTypeInfo* info = find_dtype(static_cast<uint32_t>(t));
    MOE_ASSERT(info != nullptr, "invalid DType ", static_cast<uint32_t>(t));
    return *info;
}

std::optional<DType> dtype_from_name(std::string_view name) {
    for (const auto& t : kTypes)
        if (iequal(t.name, name)) return t.type;
    return std::nullopt;
}

uint64_t row_bytes(DType t, uint64_t n, const char* component) {
    const DTypeInfo& info = dtype_info(t);
    if (n % info.block != 0)
        throw_error(component, "row of ", n, " elements is not a multiple of the ", info.name, " block size ",
                    info.block);
    return checked_mul(n / info.block, info.bytes, component, "row size");
}

uint64_t tensor_bytes(DType t, uint64_t ne0, uint64_t nrows, const char* component) {
    return checked_mul(row_bytes(t, ne0, component), nrows, component, "tensor size");
}

double dtype_bits_per_weight(DType t) {
    const DTypeInfo& info = dtype_info(t);
    return 8.0 * info.bytes / info.block;
}

}  // namespace moe
