// Generic by-DType entries over the per-type reference dequantizers / quantizers.
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

namespace {
using DequantFn = void (*)(const void*, float*, int64_t);
using QuantFn = void (*)(const float*, void*, int64_t);

DequantFn dequant_fn(DType t) {
    switch (t) {
        case DType::Q8_0: return dequantize_row_q8_0;
        case DType::Q4_0: return dequantize_row_q4_0;
        case DType::Q4_1: return dequantize_row_q4_1;
        case DType::Q5_0: return dequantize_row_q5_0;
        case DType::Q5_1: return dequantize_row_q5_1;
        case DType::MXFP4: return dequantize_row_mxfp4;
        case DType::Q2_K: return dequantize_row_q2_k;
        case DType::Q3_K: return dequantize_row_q3_k;
        case DType::Q4_K: return dequantize_row_q4_k;
        case DType::Q5_K: return dequantize_row_q5_k;
        case DType::Q6_K: return dequantize_row_q6_k;
        case DType::IQ4_NL: return dequantize_row_iq4_nl;
        case DType::IQ4_XS: return dequantize_row_iq4_xs;
        case DType::IQ2_XXS: return dequantize_row_iq2_xxs;
        case DType::IQ2_XS: return dequantize_row_iq2_xs;
        case DType::IQ2_S: return dequantize_row_iq2_s;
        case DType::IQ3_XXS: return dequantize_row_iq3_xxs;
        case DType::IQ3_S: return dequantize_row_iq3_s;
        case DType::IQ1_S: return dequantize_row_iq1_s;
        case DType::IQ1_M: return dequantize_row_iq1_m;
        case DType::TQ1_0: return dequantize_row_tq1_0;
        case DType::TQ2_0: return dequantize_row_tq2_0;
        default: return nullptr;
    }
}

QuantFn quant_fn(DType t) {
    switch (t) {
        case DType::Q8_0: return quantize_row_q8_0;
        case DType::Q4_0: return quantize_row_q4_0;
        case DType::Q4_K: return quantize_row_q4_k;
        case DType::Q5_K: return quantize_row_q5_k;
        case DType::Q6_K: return quantize_row_q6_k;
        case DType::MXFP4: return quantize_row_mxfp4;
        default: return nullptr;
    }
}

bool plain(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
}  // namespace

bool can_dequantize(DType t) { return plain(t) || dequant_fn(t) != nullptr; }
bool can_quantize(DType t) { return plain(t) || quant_fn(t) != nullptr; }

bool dequantize_row(DType t, const void* x, float* y, int64_t n) {
    MOE_ASSERT(n >= 0 && n % dtype_info(t).block == 0, "dequantize_row: ", n, " is not a multiple of the ",
               dtype_name(t), " block");
    if (t == DType::F32) {
        if (n) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
        return true;
    }
    if (t == DType::F16 || t == DType::BF16) {
        const auto* s = static_cast<const uint16_t*>(x);
        for (int64_t i = 0; i < n; ++i) y[i] = t == DType::F16 ? fp16_to_fp32(s[i]) : bf16_to_fp32(s[i]);
        return true;
    }
    const DequantFn f = dequant_fn(t);
    if (!f) return false;
    f(x, y, n);
    return true;
}

bool quantize_row(DType t, const float* x, void* y, int64_t n) {
    MOE_ASSERT(n >= 0 && n % dtype_info(t).block == 0, "quantize_row: ", n, " is not a multiple of the ",
               dtype_name(t), " block");
    if (t == DType::F32) {
        if (n) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
        return true;
    }
    if (t == DType::F16 || t == DType::BF16) {
        auto* d = static_cast<uint16_t*>(y);
        for (int64_t i = 0; i < n; ++i) d[i] = t == DType::F16 ? fp32_to_fp16(x[i]) : fp32_to_bf16(x[i]);
        return true;
    }
    const QuantFn f = quant_fn(t);
    if (!f) return false;
    f(x, y, n);
    return true;
}

}  // namespace moe::ref
