#include "kernels/ref/dequant_row.h"

#include "core/error.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

bool dequant_row_supported(DType type) { return can_dequantize(type); }

void dequant_row(DType type, const void* src, float* dst, int64_t n) {
    MOE_ASSERT(n >= 0, "dequant_row n ", n);
    if (!can_dequantize(type))
        throw_error("dequant", "tensor type ", dtype_name(type),
                    " cannot be converted to f32 (supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                    "mxfp4, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, iq3_s, iq3_xxs, iq2_s, iq2_xs, iq2_xxs, "
                    "iq1_m, iq1_s, tq1_0, tq2_0)");
    if (n % dtype_info(type).block != 0)
        throw_error("dequant", "a row of ", n, " elements is not a whole number of ", dtype_name(type), " blocks (",
                    dtype_info(type).block, " elements each)");
    dequantize_row(type, src, dst, n);
}

}  // namespace moe::ref
