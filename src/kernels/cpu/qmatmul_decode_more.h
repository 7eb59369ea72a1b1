#pragma once
// Scalar decoding into the int8-kernel form (qmatmul.h, qmatmul_decode.h) for the legacy fallbacks
// (Q4_1, Q5_0, Q5_1), the low-bit K-quants (Q2_K, Q3_K), the IQ family, the ternary types and
// MXFP4. Every weight becomes ws * (q - 2^shift) (+ a min term for Q4_1 / Q5_1 / Q2_K) with q an
// unsigned level and ws an f32 scale per 16 values, exactly (same real value as the reference
// dequantizer's before its final rounding):
//   signed levels v (IQ grids x signs, IQ4 values, MXFP4 2 x E2M1): q = v + 128 (shift 7), or + 16
//   (MXFP4, shift 4); Q5_0: shift 4; Q3_K: shift 2 (v = -4..3); TQ1_0 / TQ2_0: shift 0 (v = t - 1);
//   IQ1_S / IQ1_M: dl * (g +- 1/8) = (dl / 8) * (8 g +- 1), dl / 8 exact in f32.
//   Q4_1 / Q5_1: y = d q + m: min term wm = -m per 32 values (qmatmul.h's dmin*m with the sign folded).
//   Q2_K: y = d sc q - dmin m per 16 values: wm per 16 (Traits::min16). The kernels run Q2_K / Q3_K
//   on the super-block integer chain (qmatmul.h) with the integer scales of sb_scales below; ws / wm
//   here (d*sc, dmin*m) are that same reading as f32.
// Block layouts: kernels/ref/quant_formats.h; the same field readings as the reference dequantizers
// (tests compare every kernel path against them).
#include <cstdint>
#include <cstddef>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/ref/quant_formats.h"

namespace moe::kernels::qdec {

template <class Block>
inline Block load_block(const uint8_t* row, int64_t b) {
    Block blk;
    std::memcpy(&blk, row + b * static_cast<int64_t>(sizeof(Block)), sizeof blk);
    return blk;
}
inline void fill_ws(float* ws, int64_t i16, int n16, float v) {
    for (int k = 0; k < n16; ++k) ws[i16 + k] = v;
}

// Q4_1 / Q5_1 / Q5_0 (32 per block, nibbles as Q4_0, 5th bit from qh).
template <DType T>
inline void decode_legacy(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float* wm) {
    for (int64_t b = 0; b < K / 32; ++b) {
        const uint8_t* p = row + b * dtype_info(T).bytes;
        uint16_t d, m = 0;
        std::memcpy(&d, p, 2);
        if (T != DType::Q5_0) std::memcpy(&m, p + 2, 2);
        const uint8_t* qs = p + (T == DType::Q4_1 ? 4 : T == DType::Q5_0 ? 6 : 8);
        uint32_t qh = 0;
        if (T != DType::Q4_1) std::memcpy(&qh, p + (T == DType::Q5_0 ? 2 : 4), 4);
        for (int l = 0; l < 16; ++l) {
            q[32 * b + l] = static_cast<uint8_t>((qs[l] & 0xF) | (((qh >> l) & 1) << 4));
            q[32 * b + 16 + l] = static_cast<uint8_t>((qs[l] >> 4) | (((qh >> (l + 16)) & 1) << 4));
        }
        fill_ws(ws, 2 * b, 2, fp16_to_fp32(d));
        if (T != DType::Q5_0) wm[b] = -fp16_to_fp32(m);
    }
}

// Q2_K: element i of the super-block: sub-block i / 16 (scale byte), 2-bit field as the reference.
inline void decode_q2_k(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float* wm) {
    for (int64_t b = 0; b < K / 256; ++b) {
        const auto blk = load_block<ref::BlockQ2_K>(row, b);
        const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
        for (int i = 0; i < 256; ++i) {
            const int half = i / 128, s = (i % 128) / 32, part = (i % 32) / 16, l = i % 16;
            q[256 * b + i] = static_cast<uint8_t>((blk.qs[32 * half + 16 * part + l] >> (2 * s)) & 3);
        }
        for (int j = 0; j < 16; ++j) {
            ws[16 * b + j] = d * static_cast<float>(blk.scales[j] & 0xF);
            wm[16 * b + j] = dmin * static_cast<float>(blk.scales[j] >> 4);
        }
    }
}

// Q3_K: level = 2-bit field + 4 * hmask bit (v = level - 4).
inline void decode_q3_k(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 256; ++b) {
        const auto blk = load_block<ref::BlockQ3_K>(row, b);
        const float d = fp16_to_fp32(blk.d);
        for (int i = 0; i < 256; ++i) {
            const int half = i / 128, s = (i % 128) / 32, part = (i % 32) / 16, l = i % 16;
            const int lo = (blk.qs[32 * half + 16 * part + l] >> (2 * s)) & 3;
            const int hb = (blk.hmask[16 * part + l] >> (4 * half + s)) & 1;
            q[256 * b + i] = static_cast<uint8_t>(lo | (hb << 2));
        }
        for (int j = 0; j < 16; ++j) ws[16 * b + j] = d * static_cast<float>(ref::q3_k_scale(blk.scales, j));
    }
}

// The integer scales of super-block b of a K-quant row, for the super-block integer chain
// (qmatmul.h): sc[j] and m[j] of its granules (Q2_K 16 x (0..15, 0..15); Q3_K 16 x -32..31, m 0;
// Q4_K / Q5_K 8 x (0..63, 0..63), per 32 values; Q6_K 16 x -128..127, m 0), d and dmin (0 where
// the type has none) as f32.
struct SbScales {
    int32_t sc[16], m[16];
    float d, dmin;
};
inline SbScales sb_scales(DType t, const uint8_t* row, int64_t b) {
    SbScales s{};
    if (t == DType::Q2_K) {
        const auto blk = load_block<ref::BlockQ2_K>(row, b);
        for (int j = 0; j < 16; ++j) {
            s.sc[j] = blk.scales[j] & 0xF;
            s.m[j] = blk.scales[j] >> 4;
        }
        s.d = fp16_to_fp32(blk.d);
        s.dmin = fp16_to_fp32(blk.dmin);
    } else if (t == DType::Q3_K) {
        const auto blk = load_block<ref::BlockQ3_K>(row, b);
        for (int j = 0; j < 16; ++j) s.sc[j] = ref::q3_k_scale(blk.scales, j);
        s.d = fp16_to_fp32(blk.d);
    } else if (t == DType::Q4_K || t == DType::Q5_K) {
        // Q4_K and Q5_K share the header (d, dmin, scales[12]) at the block start
        const size_t bytes = t == DType::Q4_K ? sizeof(ref::BlockQ4_K) : sizeof(ref::BlockQ5_K);
        ref::BlockQ4_K h;
        std::memcpy(&h, row + static_cast<size_t>(b) * bytes, offsetof(ref::BlockQ4_K, qs));
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            ref::get_scale_min_k4(j, h.scales, &sc, &m);
            s.sc[j] = sc;
            s.m[j] = m;
        }
        s.d = fp16_to_fp32(h.d);
        s.dmin = fp16_to_fp32(h.dmin);
    } else {
        MOE_ASSERT(t == DType::Q6_K, "sb_scales of a type without the super-block chain");
        const auto blk = load_block<ref::BlockQ6_K>(row, b);
        for (int j = 0; j < 16; ++j) s.sc[j] = blk.scales[j];
        s.d = fp16_to_fp32(blk.d);
    }
    return s;
}

inline uint8_t lvl(int v) { return static_cast<uint8_t>(v + 128); }

inline void decode_iq4_nl(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 32; ++b) {
        const auto blk = load_block<ref::BlockIQ4_NL>(row, b);
        for (int l = 0; l < 16; ++l) {
            q[32 * b + l] = lvl(ref::kIq4nlValues[blk.qs[l] & 0xF]);
            q[32 * b + 16 + l] = lvl(ref::kIq4nlValues[blk.qs[l] >> 4]);
        }
        fill_ws(ws, 2 * b, 2, fp16_to_fp32(blk.d));
    }
}

inline void decode_iq4_xs(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 256; ++b) {
        const auto blk = load_block<ref::BlockIQ4_XS>(row, b);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
            const int ls = ((blk.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((blk.scales_h >> (2 * ib)) & 3) << 4);
            fill_ws(ws, 16 * b + 2 * ib, 2, d * static_cast<float>(ls - 32));
            uint8_t* o = q + 256 * b + 32 * ib;
            for (int l = 0; l < 16; ++l) {
                o[l] = lvl(ref::kIq4nlValues[blk.qs[16 * ib + l] & 0xF]);
                o[16 + l] = lvl(ref::kIq4nlValues[blk.qs[16 * ib + l] >> 4]);
            }
        }
    }
}

// 8 signed grid magnitudes -> levels.
inline void put8(uint8_t* o, uint64_t grid, uint8_t signs) {
    for (int j = 0; j < 8; ++j) {
        const int m = ref::grid_byte(grid, j);
        o[j] = lvl((signs >> j) & 1 ? -m : m);
    }
}
inline float db_iq2(float d, int s) { return d * (0.5f + static_cast<float>(s)) * 0.25f; }

inline void decode_iq2_xxs(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 256; ++b) {
        const auto blk = load_block<ref::BlockIQ2_XXS>(row, b);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
            uint32_t a[2];
            std::memcpy(a, blk.qs + 4 * ib, 8);
            fill_ws(ws, 16 * b + 2 * ib, 2, db_iq2(d, static_cast<int>(a[1] >> 28)));
            for (int l = 0; l < 4; ++l)
                put8(q + 256 * b + 32 * ib + 8 * l, ref::kIq2xxsGrid[(a[0] >> (8 * l)) & 0xFF], ref::iq_signs8(a[1] >> (7 * l)));
        }
    }
}

inline void decode_iq2_xs(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 256; ++b) {
        const auto blk = load_block<ref::BlockIQ2_XS>(row, b);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
            ws[16 * b + 2 * ib] = db_iq2(d, blk.scales[ib] & 0xF);
            ws[16 * b + 2 * ib + 1] = db_iq2(d, blk.scales[ib] >> 4);
            for (int l = 0; l < 4; ++l) {
                const uint16_t v = blk.qs[4 * ib + l];
                put8(q + 256 * b + 32 * ib + 8 * l, ref::kIq2xsGrid[v & 511], ref::iq_signs8(v >> 9));
            }
        }
    }
}

inline void decode_iq2_s(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 256; ++b) {
        const auto blk = load_block<ref::BlockIQ2_S>(row, b);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
            ws[16 * b + 2 * ib] = db_iq2(d, blk.scales[ib] & 0xF);
            ws[16 * b + 2 * ib + 1] = db_iq2(d, blk.scales[ib] >> 4);
            for (int l = 0; l < 4; ++l) {
                const int idx = blk.qs[4 * ib + l] | (((blk.qh[ib] >> (2 * l)) & 3) << 8);
                put8(q + 256 * b + 32 * ib + 8 * l, ref::kIq2sGrid[idx], blk.signs[4 * ib + l]);
            }
        }
    }
}

inline uint64_t cat4(uint32_t g0, uint32_t g1) { return g0 | (static_cast<uint64_t>(g1) << 32); }

inline void decode_iq3_xxs(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 256; ++b) {
        const auto blk = load_block<ref::BlockIQ3_XXS>(row, b);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
            uint32_t w;
            std::memcpy(&w, blk.sas + 4 * ib, 4);
            fill_ws(ws, 16 * b + 2 * ib, 2, d * (0.5f + static_cast<float>(w >> 28)) * 0.5f);
            const uint8_t* qs = blk.qs + 8 * ib;
            for (int l = 0; l < 4; ++l)
                put8(q + 256 * b + 32 * ib + 8 * l, cat4(ref::kIq3xxsGrid[qs[2 * l]], ref::kIq3xxsGrid[qs[2 * l + 1]]),
                     ref::iq_signs8(w >> (7 * l)));
        }
    }
}

inline void decode_iq3_s(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 256; ++b) {
        const auto blk = load_block<ref::BlockIQ3_S>(row, b);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
            const int s = (blk.scales[ib / 2] >> (4 * (ib % 2))) & 0xF;
            fill_ws(ws, 16 * b + 2 * ib, 2, d * static_cast<float>(1 + 2 * s));
            const uint8_t* qs = blk.qs + 8 * ib;
            const int qh = blk.qh[ib];
            for (int l = 0; l < 4; ++l) {
                const int i0 = qs[2 * l] | (((qh >> (2 * l)) & 1) << 8), i1 = qs[2 * l + 1] | (((qh >> (2 * l + 1)) & 1) << 8);
                put8(q + 256 * b + 32 * ib + 8 * l, cat4(ref::kIq3sGrid[i0], ref::kIq3sGrid[i1]), blk.signs[4 * ib + l]);
            }
        }
    }
}

// IQ1: 8 grid values g in {-1, 0, 1} -> levels 128 + 8 g +- 1.
inline void put8_iq1(uint8_t* o, int idx, bool neg) {
    const uint64_t g = ref::kIq1sGrid[idx];
    for (int j = 0; j < 8; ++j) o[j] = lvl(8 * static_cast<int8_t>(ref::grid_byte(g, j)) + (neg ? -1 : 1));
}

inline void decode_iq1_s(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 256; ++b) {
        const auto blk = load_block<ref::BlockIQ1_S>(row, b);
        const float d = fp16_to_fp32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
            const unsigned qh = blk.qh[ib];
            fill_ws(ws, 16 * b + 2 * ib, 2, d * static_cast<float>(2 * ((qh >> 12) & 7) + 1) * 0.125f);
            for (int l = 0; l < 4; ++l)
                put8_iq1(q + 256 * b + 32 * ib + 8 * l, blk.qs[4 * ib + l] | static_cast<int>(((qh >> (3 * l)) & 7) << 8),
                         (qh & 0x8000) != 0);
        }
    }
}

inline void decode_iq1_m(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 256; ++b) {
        const auto blk = load_block<ref::BlockIQ1_M>(row, b);
        const float d = fp16_to_fp32(ref::iq1_m_scale_bits(blk.scales));
        uint16_t sc[4];
        std::memcpy(sc, blk.scales, 8);
        for (int ib = 0; ib < 8; ++ib) {
            const unsigned w = sc[ib / 2] >> (6 * (ib % 2));
            ws[16 * b + 2 * ib] = d * static_cast<float>(2 * (w & 7) + 1) * 0.125f;
            ws[16 * b + 2 * ib + 1] = d * static_cast<float>(2 * ((w >> 3) & 7) + 1) * 0.125f;
            for (int l = 0; l < 4; ++l) {
                const unsigned h = blk.qh[2 * ib + l / 2] >> (4 * (l % 2));
                put8_iq1(q + 256 * b + 32 * ib + 8 * l, blk.qs[4 * ib + l] | static_cast<int>((h & 7) << 8), (h & 8) != 0);
            }
        }
    }
}

inline void decode_tq1_0(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 256; ++b) {
        const auto blk = load_block<ref::BlockTQ1_0>(row, b);
        uint8_t* o = q + 256 * b;
        for (int t = 0; t < 5; ++t)
            for (int m = 0; m < 32; ++m) *o++ = static_cast<uint8_t>(ref::tq1_trit(blk.qs[m], t));
        for (int t = 0; t < 5; ++t)
            for (int m = 0; m < 16; ++m) *o++ = static_cast<uint8_t>(ref::tq1_trit(blk.qs[32 + m], t));
        for (int t = 0; t < 4; ++t)
            for (int m = 0; m < 4; ++m) *o++ = static_cast<uint8_t>(ref::tq1_trit(blk.qh[m], t));
        fill_ws(ws, 16 * b, 16, fp16_to_fp32(blk.d));
    }
}

inline void decode_tq2_0(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 256; ++b) {
        const auto blk = load_block<ref::BlockTQ2_0>(row, b);
        uint8_t* o = q + 256 * b;
        for (int j = 0; j < 64; j += 32)
            for (int l = 0; l < 4; ++l)
                for (int m = 0; m < 32; ++m) *o++ = static_cast<uint8_t>((blk.qs[j + m] >> (2 * l)) & 3);
        fill_ws(ws, 16 * b, 16, fp16_to_fp32(blk.d));
    }
}

inline void decode_mxfp4(const uint8_t* row, int64_t K, uint8_t* q, float* ws, float*) {
    for (int64_t b = 0; b < K / 32; ++b) {
        const auto blk = load_block<ref::BlockMxfp4>(row, b);
        for (int l = 0; l < 16; ++l) {
            q[32 * b + l] = static_cast<uint8_t>(ref::kMxfp4Values[blk.qs[l] & 0xF] + 16);
            q[32 * b + 16 + l] = static_cast<uint8_t>(ref::kMxfp4Values[blk.qs[l] >> 4] + 16);
        }
        fill_ws(ws, 2 * b, 2, ref::e8m0_half(blk.e));
    }
}

// False if t is not one of this file's types.
inline bool decode_row_more(DType t, const uint8_t* row, int64_t K, uint8_t* q, float* ws, float* wm) {
    switch (t) {
        case DType::Q4_1: decode_legacy<DType::Q4_1>(row, K, q, ws, wm); return true;
        case DType::Q5_0: decode_legacy<DType::Q5_0>(row, K, q, ws, wm); return true;
        case DType::Q5_1: decode_legacy<DType::Q5_1>(row, K, q, ws, wm); return true;
        case DType::Q2_K: decode_q2_k(row, K, q, ws, wm); return true;
        case DType::Q3_K: decode_q3_k(row, K, q, ws, wm); return true;
        case DType::IQ4_NL: decode_iq4_nl(row, K, q, ws, wm); return true;
        case DType::IQ4_XS: decode_iq4_xs(row, K, q, ws, wm); return true;
        case DType::IQ2_XXS: decode_iq2_xxs(row, K, q, ws, wm); return true;
        case DType::IQ2_XS: decode_iq2_xs(row, K, q, ws, wm); return true;
        case DType::IQ2_S: decode_iq2_s(row, K, q, ws, wm); return true;
        case DType::IQ3_XXS: decode_iq3_xxs(row, K, q, ws, wm); return true;
        case DType::IQ3_S: decode_iq3_s(row, K, q, ws, wm); return true;
        case DType::IQ1_S: decode_iq1_s(row, K, q, ws, wm); return true;
        case DType::IQ1_M: decode_iq1_m(row, K, q, ws, wm); return true;
        case DType::TQ1_0: decode_tq1_0(row, K, q, ws, wm); return true;
        case DType::TQ2_0: decode_tq2_0(row, K, q, ws, wm); return true;
        case DType::MXFP4: decode_mxfp4(row, K, q, ws, wm); return true;
        default: return false;
    }
}

}  // namespace moe::kernels::qdec
