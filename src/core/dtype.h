#pragma once
// Registry of the ggml/GGUF tensor types: id, name, block size (elements) and block bytes.
// Every type a GGUF file may name is known at least by size, so such files load and report
// cleanly even where no kernel exists for the type yet.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace moe {

// Values are the ggml_type ids stored in GGUF tensor infos.
enum class DType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
    IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
    TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct DTypeInfo {
    DType type;
    const char* name;   // as ggml prints it: "f32", "q4_K", ...
    uint32_t block;     // elements per block (1 for plain types)
    uint32_t bytes;     // bytes per block
    bool quantized;
};

// nullptr when the id is not a known (current) ggml type.
const DTypeInfo* find_dtype(uint32_t id);
const DTypeInfo& dtype_info(DType t);  // t must be valid
inline const char* dtype_name(DType t) { return dtype_info(t).name; }
std::optional<DType> dtype_from_name(std::string_view name);  // case-insensitive
// Bytes for a row of n elements; throws "[component]" if n is not a multiple of the block size.
uint64_t row_bytes(DType t, uint64_t n, const char* component = "dtype");
// Bytes for the whole tensor with row length ne0 and nrows rows (checked arithmetic).
uint64_t tensor_bytes(DType t, uint64_t ne0, uint64_t nrows, const char* component = "dtype");
// Average bits per weight (e.g. 8.5 for Q8_0).
double dtype_bits_per_weight(DType t);

}  // namespace moe
