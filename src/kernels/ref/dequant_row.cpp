#include "kernels/ref/dequant_row.h"

#include <cstring>

#include "core/error.h"
#include "core/fp16.h"

namespace moe::ref {

bool dequant_row_supported(DType type) {
    return type == DType::F32 || type == DType::F16 || type == DType::BF16;
}

void dequant_row(DType type, const void* src, float* dst, int64_t n) {
    MOE_ASSERT(n >= 0, "dequant_row n ", n);
    switch (type) {
        case DType::F32:
            if (n) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
            return;
        case DType::F16: {
            const auto* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
            return;
        }
        case DType::BF16: {
            const auto* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
            return;
        }
        default:
            throw_error("dequant", "tensor type ", dtype_name(type),
                        " cannot be converted to f32 by the dense path (supported: f32, f16, bf16)");
    }
}

}  // namespace moe::ref
