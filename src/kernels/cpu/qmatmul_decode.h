#pragma once
// Scalar decoding of one quantized weight row into the common int8-kernel form (see qmatmul.h):
// unsigned levels q[Kp] (Kp = K rounded up to 64, zero padded), an f32 scale per 16 values
// ws[Kp/16] and, for types with mins, dmin*m per 32 values wm[Kp/32] (Q2_K: per 16, wm[Kp/16]).
// The types beyond Q8_0, Q4_0, Q4_K, Q5_K, Q6_K are in qmatmul_decode_more.h. Used by the scalar and AVX2
// paths (the AVX-512 path decodes in registers) and by the tests as a second reading of the layout.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "core/fp16.h"
#include "kernels/cpu/qmatmul_decode_more.h"
#include "kernels/ref/quant_formats.h"

namespace moe::kernels::qdec {

struct Traits {
    int shift;   // integer offset 2^shift subtracted from q (-1: none)
    bool min;    // has a per-32 min term
    bool min16;  // has a per-16 min term (Q2_K)
    bool sbint = false;  // super-block integer chain (the K-quants Q2_K..Q6_K: qmatmul.h)
};

constexpr Traits traits(DType t) {
    switch (t) {
        case DType::Q8_0: return {7, false, false};
        case DType::Q4_0: return {3, false, false};
        case DType::Q6_K: return {5, false, false, true};
        case DType::Q4_K:
        case DType::Q5_K: return {-1, true, false, true};
        case DType::Q4_1:
        case DType::Q5_1: return {-1, true, false};
        case DType::Q2_K: return {-1, false, true, true};
        case DType::Q5_0:
        case DType::MXFP4: return {4, false, false};
        case DType::Q3_K: return {2, false, false, true};
        case DType::TQ1_0:
        case DType::TQ2_0: return {0, false, false};
        case DType::IQ4_NL:
        case DType::IQ4_XS:
        case DType::IQ2_XXS:
        case DType::IQ2_XS:
        case DType::IQ2_S:
        case DType::IQ3_XXS:
        case DType::IQ3_S:
        case DType::IQ1_S:
        case DType::IQ1_M: return {7, false, false};
        default: return {-1, false, false};
    }
}

// Values sharing one f32 weight scale (the chain's granule): 16 where the format has a scale per
// 16 values, else 32.
constexpr int granule(DType t) {
    return t == DType::Q6_K || t == DType::Q2_K || t == DType::Q3_K || t == DType::IQ2_XS || t == DType::IQ2_S ||
                   t == DType::IQ1_M
               ? 16
               : 32;
}

inline void decode_q8_0(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 32; ++b) {
        ref::BlockQ8_0 blk;
        std::memcpy(&blk, row + b * sizeof blk, sizeof blk);
        for (int l = 0; l < 32; ++l) q[32 * b + l] = static_cast<uint8_t>(blk.qs[l] + 128);
        ws[2 * b] = ws[2 * b + 1] = fp16_to_fp32(blk.d);
    }
}

inline void decode_q4_0(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 32; ++b) {
        ref::BlockQ4_0 blk;
        std::memcpy(&blk, row + b * sizeof blk, sizeof blk);
        for (int l = 0; l < 16; ++l) {
            q[32 * b + l] = blk.qs[l] & 0xF;
            q[32 * b + 16 + l] = blk.qs[l] >> 4;
        }
        ws[2 * b] = ws[2 * b + 1] = fp16_to_fp32(blk.d);
    }
}

template <bool Five>
inline void decode_q45_k(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float* wm) {
    using Block = std::conditional_t<Five, ref::BlockQ5_K, ref::BlockQ4_K>;
    for (int64_t b = 0; b < K / 256; ++b) {
        Block blk;
        std::memcpy(&blk, row + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
        uint8_t* qb = q + 256 * b;
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            ref::get_scale_min_k4(j, blk.scales, &sc, &m);
            ws[16 * b + 2 * j] = ws[16 * b + 2 * j + 1] = d * static_cast<float>(sc);
            wm[8 * b + j] = dmin * static_cast<float>(m);
            const int c = j / 2, h = j % 2;
            for (int l = 0; l < 32; ++l) {
                int v = h ? blk.qs[32 * c + l] >> 4 : blk.qs[32 * c + l] & 0xF;
                if constexpr (Five) v |= ((blk.qh[l] >> j) & 1) << 4;
                qb[32 * j + l] = static_cast<uint8_t>(v);
            }
        }
    }
}

inline void decode_q6_k(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 256; ++b) {
        ref::BlockQ6_K blk;
        std::memcpy(&blk, row + b * sizeof blk, sizeof blk);
        const float d = fp16_to_fp32(blk.d);
        for (int j = 0; j < 16; ++j) ws[16 * b + j] = d * static_cast<float>(blk.scales[j]);
        for (int half = 0; half < 2; ++half) {
            const uint8_t* ql = blk.ql + 64 * half;
            const uint8_t* qh = blk.qh + 32 * half;
            uint8_t* o = q + 256 * b + 128 * half;
            for (int l = 0; l < 32; ++l) {
                o[l] = static_cast<uint8_t>((ql[l] & 0xF) | ((qh[l] & 3) << 4));
                o[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
                o[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                o[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
            }
        }
    }
}

// q: Kp bytes, ws: Kp/16 floats, wm: Kp/16 floats (all fully written, padding zero).
inline void decode_row(DType t, const void* rowp, int64_t K, uint8_t* q, float* ws, float* wm) {
    const int64_t Kp = (K + 63) / 64 * 64;
    std::memset(q, 0, static_cast<size_t>(Kp));
    std::memset(ws, 0, sizeof(float) * static_cast<size_t>(Kp / 16));
    std::memset(wm, 0, sizeof(float) * static_cast<size_t>(Kp / 16));
    const auto* row = static_cast<const uint8_t*>(rowp);
    switch (t) {
        case DType::Q8_0: decode_q8_0(row, K, q, ws, wm); break;
        case DType::Q4_0: decode_q4_0(row, K, q, ws, wm); break;
        case DType::Q4_K: decode_q45_k<false>(row, K, q, ws, wm); break;
        case DType::Q5_K: decode_q45_k<true>(row, K, q, ws, wm); break;
        case DType::Q6_K: decode_q6_k(row, K, q, ws, wm); break;
        default: decode_row_more(t, row, K, q, ws, wm); break;
    }
}

}  // namespace moe::kernels::qdec
