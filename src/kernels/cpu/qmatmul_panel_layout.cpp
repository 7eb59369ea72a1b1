// The Q3_K / Q2_K / Q4_K / Q6_K / Q8_0 panel layouts (qmatmul_panel_layout.h): scalar repack / unpack and the
// scalar reference GEMV over them (Q4_0 and Q5_K: qmatmul_panel_q40_q5k.cpp; Q5_0: qmatmul_panel_q50.cpp; MXFP4: qmatmul_panel_mxfp4.cpp).
#include "kernels/cpu/qmatmul_panel_layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/checked.h"
#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ref/quant_formats.h"

namespace moe::kernels::panel {

namespace {

// Per-type geometry of a super-block: block bytes, level bits, bytes of one octet's level vectors
// and of the three regions.
struct Geo {
    int block, bits, octet, lev, sc, d;
};
Geo geo(DType t) {
    if (t == DType::Q3_K) return {kQ3kBlockBytes, 3, 192, kQ3kSbLevelBytes, kQ3kSbScaleBytes, kQ3kSbDBytes};
    if (t == DType::Q2_K) return {kQ2kBlockBytes, 2, 128, kQ2kSbLevelBytes, kQ2kSbScaleBytes, kQ2kSbDBytes};
    if (t == DType::Q4_K) return {kQ4kBlockBytes, 4, 256, kQ4kSbLevelBytes, kQ4kSbScaleBytes, kQ4kSbDBytes};
    if (t == DType::Q6_K) return {kQ6kBlockBytes, 6, 384, kQ6kSbLevelBytes, kQ6kSbScaleBytes, kQ6kSbDBytes};
    if (t == DType::Q8_0) return {8 * kQ80BlockBytes, 8, 512, kQ80SbLevelBytes, 0, kQ80SbDBytes};  // block: 8 blocks' bytes
    if (t == DType::Q4_0) return {8 * kQ40BlockBytes, 4, 256, kQ40SbLevelBytes, 0, kQ40SbDBytes};
    if (t == DType::Q5_K) return {kQ5kBlockBytes, 5, 320, kQ5kSbLevelBytes, kQ5kSbScaleBytes, kQ5kSbDBytes};
    if (t == DType::Q5_0) return {8 * kQ50BlockBytes, 5, kQ50BlkLevelBytes, 8 * kQ50BlkLevelBytes, 0, 8 * kQ50BlkDBytes};  // per 256 values
    if (t == DType::MXFP4) return {8 * kMxfp4BlockBytes, 4, 256, 8 * kMxfp4BlockLevelBytes, 0, 8 * kMxfp4BlockEBytes};  // per 256 values
    throw_error("kernels", "panel layout: weight type ", dtype_name(t), " has none (only Q2_K, Q3_K, Q4_K, Q6_K, Q8_0, Q4_0, Q5_K, Q5_0 and MXFP4)");
}

void check_k(DType t, int64_t K) {
    const int step = panel_k_step(t);
    if (K <= 0 || K % step != 0)
        throw_error("kernels", "panel layout: K = ", K, " is not a positive multiple of ", step, " (", dtype_name(t),
                    "'s panel step); only whole steps can be repacked");
}
void check_rows(int nrows) {
    if (nrows < 1 || nrows > 16) throw_error("kernels", "panel layout: ", nrows, " rows; a panel holds 1 to 16 rows");
}

// Level bit b of quad qi of an octet: vector and bit (qmatmul_panel_layout.h).
PanelBit bit_of(DType t, int qi, int b) {
    if (t == DType::Q3_K) return kQ3kPanelBits[qi][b];
    return {static_cast<uint8_t>(qi / 4), static_cast<uint8_t>(2 * (qi % 4) + b)};
}

// Value k = 128 h + 32 j + l (l < 32) of a Q3_K / Q2_K block: 2-bit field j of qs byte 32 h + l
// (qs at byte 32 for Q3_K, 16 for Q2_K); Q3_K adds 4 x bit 4 h + j of hmask[l] (offset 4 later).
void block_levels(DType t, const uint8_t* b, uint8_t lev[256]) {
    const uint8_t* qs = b + (t == DType::Q3_K ? 32 : 16);
    const int hb = t == DType::Q3_K ? 1 : 0;  // Q2_K: no hmask (hm reads qs, masked off by hb = 0)
    for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 32; ++l)
                lev[128 * h + 32 * j + l] = static_cast<uint8_t>(((qs[32 * h + l] >> (2 * j)) & 3) | ((((b[l] >> (4 * h + j)) & 1) * hb) << 2));
}
void levels_block(DType t, const uint8_t lev[256], uint8_t* b) {
    const int qs = t == DType::Q3_K ? 32 : 16;
    std::memset(b + qs, 0, 64);
    if (t == DType::Q3_K) std::memset(b, 0, 32);
    for (int k = 0; k < 256; ++k) {
        const int h = k / 128, j = (k % 128) / 32, l = k % 32;
        b[qs + 32 * h + l] = static_cast<uint8_t>(b[qs + 32 * h + l] | ((lev[k] & 3) << (2 * j)));
        if (t == DType::Q3_K) b[l] = static_cast<uint8_t>(b[l] | ((lev[k] >> 2) << (4 * h + j)));
    }
}
// The 16 raw 6-bit Q3_K scales (ref::q3_k_scale + 32) of a block's scales[12], and back.
int raw_scale(const uint8_t* s, int j) {
    const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    return lo | (((s[8 + (j % 4)] >> (2 * (j / 4))) & 3) << 4);
}
void pack_raw_scales(const int u[16], uint8_t* s) {
    std::memset(s, 0, 12);
    for (int j = 0; j < 16; ++j) {
        s[j % 8] = static_cast<uint8_t>(s[j % 8] | ((u[j] & 0xF) << (j < 8 ? 0 : 4)));
        s[8 + j % 4] = static_cast<uint8_t>(s[8 + j % 4] | ((u[j] >> 4) << (2 * (j / 4))));
    }
}

// Byte offsets of super-block sb's three regions in a panel of nsb super-blocks.
struct SbRegions {
    size_t lev, sc, d;
};
SbRegions regions(const Geo& g, int64_t nsb, int64_t sb) {
    const size_t n = static_cast<size_t>(nsb), s = static_cast<size_t>(sb);
    return {s * g.lev, n * g.lev + s * g.sc, n * (g.lev + g.sc) + s * g.d};
}

// Byte of the level vectors of value k (of a super-block), column c, holding level bit b; its bit.
inline size_t lev_byte(DType t, const Geo& g, int k, int b, int c, PanelBit* pb) {
    const int o = k / 32, qi = (k % 32) / 4, i = k % 4;
    *pb = bit_of(t, qi, b);
    return static_cast<size_t>(g.octet * o + 64 * pb->vec + 4 * c + i);
}
// Q2_K's scale byte of granule gi, column c: pairs (2 o, 2 o + 1) per column (Q3_K's packed index too).
inline size_t sc_byte(int gi, int c) { return static_cast<size_t>(q3k_sc_at(gi, c)); }

// ---- Q4_K (qmatmul_panel_layout.h): nibble levels, 6-bit scales and mins as bytes.
// Level byte (of a super-block's level region) of value k, column c, and the nibble's shift:
// granule g = k / 32, vector v = (k % 32) / 8, byte 4 c + i (i = k % 4), nibble (k % 8) / 4.
inline size_t q4k_lev_byte(int k, int c) { return static_cast<size_t>(256 * (k / 32) + 64 * ((k % 32) / 8) + 4 * c + k % 4); }
inline int q4k_lev_shift(int k) { return 4 * ((k % 8) / 4); }

void repack_q4k(const uint8_t* rows, size_t row_stride, int64_t nsb, int nrows, uint8_t* out) {
    const Geo g = geo(DType::Q4_K);
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const SbRegions r = regions(g, nsb, sb);
        for (int c = 0; c < nrows; ++c) {
            const uint8_t* b = rows + c * row_stride + sb * kQ4kBlockBytes;
            // granule g's 32 levels are nibble g % 2 of qs[32 (g / 2) ..]: byte 4 c + i of vector v
            // = level 8 v + i | level 8 v + 4 + i << 4 (unpack_panel goes value by value: the
            // test compares both; 5.0 -> 1.3 ms per MB against setting each value's nibble in turn)
            for (int g = 0; g < 8; ++g) {
                const uint8_t* q = b + 16 + 32 * (g / 2);
                const int sh = 4 * (g % 2);
                for (int v = 0; v < 4; ++v)
                    for (int i = 0; i < 4; ++i)
                        out[r.lev + 256 * g + 64 * v + 4 * c + i] =
                            static_cast<uint8_t>(((q[8 * v + i] >> sh) & 0xF) | (((q[8 * v + 4 + i] >> sh) & 0xF) << 4));
            }
            for (int gi = 0; gi < 8; ++gi) {
                uint8_t sc, m;
                ref::get_scale_min_k4(gi, b + 4, &sc, &m);
                q4k_scale_set(out + r.sc, q4k_sc_at(gi, c), sc);
                q4k_scale_set(out + r.sc, q4k_m_at(gi, c), m);
            }
            std::memcpy(out + r.d + 2 * c, b, 2);
            std::memcpy(out + r.d + 32 + 2 * c, b + 2, 2);
        }
    }
}

void unpack_q4k(const uint8_t* panel, int64_t nsb, int nrows, uint8_t* rows, size_t row_stride) {
    const Geo g = geo(DType::Q4_K);
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const SbRegions r = regions(g, nsb, sb);
        for (int c = 0; c < nrows; ++c) {
            uint8_t* b = rows + c * row_stride + sb * kQ4kBlockBytes;
            std::memcpy(b, panel + r.d + 2 * c, 2);
            std::memcpy(b + 2, panel + r.d + 32 + 2 * c, 2);
            uint8_t sc[8], m[8];
            for (int gi = 0; gi < 8; ++gi) {
                sc[gi] = q4k_scale_get(panel + r.sc, q4k_sc_at(gi, c));
                m[gi] = q4k_scale_get(panel + r.sc, q4k_m_at(gi, c));
            }
            ref::pack_scale_min_k4(sc, m, b + 4);
            std::memset(b + 16, 0, 128);
            for (int k = 0; k < 256; ++k) {
                const int lv = (panel[r.lev + q4k_lev_byte(k, c)] >> q4k_lev_shift(k)) & 0xF;
                b[16 + 32 * (k / 64) + k % 32] = static_cast<uint8_t>(b[16 + 32 * (k / 64) + k % 32] | (lv << (4 * ((k % 64) / 32))));
            }
        }
    }
}

// Row c of a Q4_K panel against x: per super-block S = sum_g sc_g I_g, M = sum_g m_g nsum_g (nsum
// of 32 values: two 16-value sums), then the two FMAs of qmatmul.h.
float dot_q4k(const uint8_t* P, int64_t nsb, int c, const ref::ActQ8Row& x) {
    const Geo g = geo(DType::Q4_K);
    float acc = 0.0f;
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const SbRegions r = regions(g, nsb, sb);
        int32_t S = 0, M = 0;
        for (int gi = 0; gi < 8; ++gi) {
            int32_t I = 0;
            for (int k = 32 * gi; k < 32 * gi + 32; ++k)
                I += ((P[r.lev + q4k_lev_byte(k, c)] >> q4k_lev_shift(k)) & 0xF) * x.qs[256 * sb + k];
            S += q4k_scale_get(P + r.sc, q4k_sc_at(gi, c)) * I;
            M += q4k_scale_get(P + r.sc, q4k_m_at(gi, c)) * (x.nsum[64 * sb + 8 * gi] + x.nsum[64 * sb + 8 * gi + 4]);
        }
        uint16_t hd, hm;
        std::memcpy(&hd, P + r.d + 2 * c, 2);
        std::memcpy(&hm, P + r.d + 32 + 2 * c, 2);
        const float dx = x.dxv[64 * sb];
        acc = std::fma(static_cast<float>(S), fp16_to_fp32(hd) * dx, acc);
        acc = std::fma(static_cast<float>(M), fp16_to_fp32(hm) * dx, acc);
    }
    return acc;
}

// ---- Q6_K (qmatmul_panel_layout.h): low nibbles as Q4_K's, the top two bits as Q2_K's levels.
// Value k = 128 n + 32 j + l (l < 32) of a block: low 4 bits = nibble j / 2 of ql[64 n + 32 (j % 2)
// + l], top 2 bits = bits 2 j, 2 j + 1 of qh[32 n + l] (ref::dequantize_row_q6_k).
inline int q6k_ql(int k) { return 64 * (k / 128) + 32 * ((k % 128 / 32) % 2) + k % 32; }
inline int q6k_ql_shift(int k) { return 4 * ((k % 128 / 32) / 2); }
inline int q6k_qh(int k) { return 32 * (k / 128) + k % 32; }
inline int q6k_qh_shift(int k) { return 2 * (k % 128 / 32); }
// Panel bytes (of a super-block's level region) of value k, column c: the nibble byte (shift
// q4k_lev_shift, as Q4_K's) and the top-bits byte of quad qi = (k % 32) / 4 of octet k / 32, shift 2 (qi % 4).
inline size_t q6k_lo_byte(int k, int c) { return static_cast<size_t>(q6k_nib_at(k / 32, (k % 32) / 8) + 4 * c + k % 4); }
inline size_t q6k_hi_byte(int k, int c) { return static_cast<size_t>(q6k_top_at(k / 32, (k % 32) / 16) + 4 * c + k % 4); }
inline int q6k_hi_shift(int k) { return 2 * (((k % 32) / 4) % 4); }

void repack_q6k(const uint8_t* rows, size_t row_stride, int64_t nsb, int nrows, uint8_t* out) {
    const Geo g = geo(DType::Q6_K);
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const SbRegions r = regions(g, nsb, sb);
        for (int c = 0; c < nrows; ++c) {
            const uint8_t* b = rows + c * row_stride + sb * kQ6kBlockBytes;
            // the 256 levels half by half (unpack_panel goes value by value through q6k_ql / q6k_qh:
            // the test compares both; 4.4 -> 0.7 ms per MB of Q6_K against that form here, under load)
            uint8_t lev[256];
            for (int n = 0; n < 2; ++n)
                for (int l = 0; l < 32; ++l) {
                    const int q0 = b[64 * n + l], q1 = b[64 * n + 32 + l], h = b[128 + 32 * n + l];
                    uint8_t* v = lev + 128 * n + l;
                    v[0] = static_cast<uint8_t>((q0 & 0xF) | (h & 3) << 4);
                    v[32] = static_cast<uint8_t>((q1 & 0xF) | ((h >> 2) & 3) << 4);
                    v[64] = static_cast<uint8_t>((q0 >> 4) | ((h >> 4) & 3) << 4);
                    v[96] = static_cast<uint8_t>((q1 >> 4) | ((h >> 6) & 3) << 4);
                }
            uint8_t* L = out + r.lev;
            for (int o = 0; o < 8; ++o) {
                const uint8_t* lo = lev + 32 * o;
                for (int v = 0; v < 4; ++v)
                    for (int i = 0; i < 4; ++i)
                        L[q6k_nib_at(o, v) + 4 * c + i] = static_cast<uint8_t>((lo[8 * v + i] & 0xF) | (lo[8 * v + 4 + i] & 0xF) << 4);
                for (int h = 0; h < 2; ++h)
                    for (int i = 0; i < 4; ++i) {
                        int byte = 0;
                        for (int q = 0; q < 4; ++q) byte |= (lo[4 * (4 * h + q) + i] >> 4) << (2 * q);
                        L[q6k_top_at(o, h) + 4 * c + i] = static_cast<uint8_t>(byte);
                    }
            }
            for (int gi = 0; gi < 16; ++gi) out[r.sc + 16 * gi + c] = b[192 + gi];
            std::memcpy(out + r.d + 2 * c, b + 208, 2);
        }
    }
}

void unpack_q6k(const uint8_t* panel, int64_t nsb, int nrows, uint8_t* rows, size_t row_stride) {
    const Geo g = geo(DType::Q6_K);
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const SbRegions r = regions(g, nsb, sb);
        const uint8_t* L = panel + r.lev;
        for (int c = 0; c < nrows; ++c) {
            uint8_t* b = rows + c * row_stride + sb * kQ6kBlockBytes;
            std::memset(b, 0, 192);
            for (int k = 0; k < 256; ++k) {
                const int lo = (L[q6k_lo_byte(k, c)] >> q4k_lev_shift(k)) & 0xF, hi = (L[q6k_hi_byte(k, c)] >> q6k_hi_shift(k)) & 3;
                b[q6k_ql(k)] = static_cast<uint8_t>(b[q6k_ql(k)] | lo << q6k_ql_shift(k));
                b[128 + q6k_qh(k)] = static_cast<uint8_t>(b[128 + q6k_qh(k)] | hi << q6k_qh_shift(k));
            }
            for (int gi = 0; gi < 16; ++gi) b[192 + gi] = panel[r.sc + 16 * gi + c];
            std::memcpy(b + 208, panel + r.d + 2 * c, 2);
        }
    }
}

// Row c of a Q6_K panel against x: per super-block S = sum_g sc_g I_g, I_g = sum (level - 32) x over
// the granule's 16 values, then acc = fma(float(S), d * dx, acc) (qmatmul.h).
float dot_q6k(const uint8_t* P, int64_t nsb, int c, const ref::ActQ8Row& x) {
    const Geo g = geo(DType::Q6_K);
    float acc = 0.0f;
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const SbRegions r = regions(g, nsb, sb);
        const uint8_t* L = P + r.lev;
        int32_t S = 0;
        for (int gi = 0; gi < 16; ++gi) {
            int32_t I = 0;
            for (int k = 16 * gi; k < 16 * gi + 16; ++k) {
                const int lv = ((L[q6k_lo_byte(k, c)] >> q4k_lev_shift(k)) & 0xF) | ((L[q6k_hi_byte(k, c)] >> q6k_hi_shift(k)) & 3) << 4;
                I += (lv - 32) * x.qs[256 * sb + k];
            }
            S += static_cast<int8_t>(P[r.sc + 16 * gi + c]) * I;
        }
        uint16_t hd;
        std::memcpy(&hd, P + r.d + 2 * c, 2);
        acc = std::fma(static_cast<float>(S), fp16_to_fp32(hd) * x.dxv[64 * sb], acc);
    }
    return acc;
}

// ---- Q8_0 (qmatmul_panel_layout.h): the int8 values as u8 q ^ 0x80, column-interleaved per quad,
// block by block (nb = K / 32 blocks). Level byte (of block b's 512 level bytes) of value k < 32,
// column c; block b's d at 32 b + 2 c of the d region.
inline size_t q80_lev_byte(int k, int c) { return static_cast<size_t>(64 * (k / 4) + 4 * c + k % 4); }

void repack_q80(const uint8_t* rows, size_t row_stride, int64_t nb, int nrows, uint8_t* out) {
    const size_t dreg = static_cast<size_t>(nb) * kQ80BlkLevelBytes;
    for (int64_t b = 0; b < nb; ++b)
        for (int c = 0; c < nrows; ++c) {
            const uint8_t* B = rows + c * row_stride + b * kQ80BlockBytes;
            for (int k = 0; k < 32; ++k) out[b * kQ80BlkLevelBytes + q80_lev_byte(k, c)] = static_cast<uint8_t>(B[2 + k] ^ 0x80);
            std::memcpy(out + dreg + b * kQ80BlkDBytes + 2 * c, B, 2);
        }
}

void unpack_q80(const uint8_t* panel, int64_t nb, int nrows, uint8_t* rows, size_t row_stride) {
    const size_t dreg = static_cast<size_t>(nb) * kQ80BlkLevelBytes;
    for (int64_t b = 0; b < nb; ++b)
        for (int c = 0; c < nrows; ++c) {
            uint8_t* B = rows + c * row_stride + b * kQ80BlockBytes;
            std::memcpy(B, panel + dreg + b * kQ80BlkDBytes + 2 * c, 2);
            for (int k = 0; k < 32; ++k) B[2 + k] = static_cast<uint8_t>(panel[b * kQ80BlkLevelBytes + q80_lev_byte(k, c)] ^ 0x80);
        }
}

// Row c of a Q8_0 panel against the kActQ8_0 row x: per block I = sum q x (exact), then
// acc = fma(float(I), d * dx, acc) in K order (qmatmul_generic.cpp's per-granule chain).
float dot_q80(const uint8_t* P, int64_t nb, int c, const ref::ActQ8Row& x) {
    const size_t dreg = static_cast<size_t>(nb) * kQ80BlkLevelBytes;
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
        const int64_t k0 = 32 * b;
        int32_t I = 0;
        for (int k = 0; k < 32; ++k) I += (P[b * kQ80BlkLevelBytes + q80_lev_byte(k, c)] - 128) * x.qs[k0 + k];
        uint16_t hd;
        std::memcpy(&hd, P + dreg + b * kQ80BlkDBytes + 2 * c, 2);
        acc = std::fma(static_cast<float>(I), fp16_to_fp32(hd) * x.dxv[k0 / 4], acc);
    }
    return acc;
}

}  // namespace

bool panel_supported(DType t) {
    return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q6_K || t == DType::Q8_0 || t == DType::Q4_0 ||
           t == DType::Q5_K || t == DType::Q5_0 || t == DType::MXFP4;
}

int panel_sb_bytes(DType t) {
    const Geo g = geo(t);
    return g.lev + g.sc + g.d;
}

int panel_k_step(DType t) {
    geo(t);  // throws for a type without a panel layout
    return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q5_0 || t == DType::MXFP4 ? 32 : 256;  // per-block types: one block
}

size_t panel_bytes(DType t, int64_t K) {
    const int sbb = panel_sb_bytes(t), step = panel_k_step(t);
    check_k(t, K);
    const uint64_t step_bytes = static_cast<uint64_t>(sbb) * static_cast<uint64_t>(step) / 256;
    return static_cast<size_t>(checked_mul(static_cast<uint64_t>(K / step), step_bytes, "kernels", "panel size"));
}

size_t panel_matrix_bytes(DType t, int64_t N, int64_t K) {
    if (N < 0) throw_error("kernels", "panel layout: negative row count ", N);
    return static_cast<size_t>(checked_mul(static_cast<uint64_t>((N + 15) / 16), panel_bytes(t, K), "kernels", "panel matrix size"));
}

void repack_panel(DType t, const uint8_t* rows, size_t row_stride, int64_t K, int nrows, uint8_t* out) {
    check_rows(nrows);
    const Geo g = geo(t);
    std::memset(out, 0, panel_bytes(t, K));
    if (t == DType::Q5_0) return detail::repack_q50(rows, row_stride, K / 32, nrows, out);
    if (t == DType::MXFP4) return detail::repack_mxfp4(rows, row_stride, K / 32, nrows, out);
    const int64_t nsb = K / 256;
    if (t == DType::Q4_K) return repack_q4k(rows, row_stride, nsb, nrows, out);
    if (t == DType::Q6_K) return repack_q6k(rows, row_stride, nsb, nrows, out);
    if (t == DType::Q8_0) return repack_q80(rows, row_stride, K / 32, nrows, out);
    if (t == DType::Q4_0) return detail::repack_q40(rows, row_stride, K / 32, nrows, out);
    if (t == DType::Q5_K) return detail::repack_q5k(rows, row_stride, nsb, nrows, out);
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const SbRegions r = regions(g, nsb, sb);
        uint8_t* L = out + r.lev;
        // the 16 rows' levels (missing rows 0), then the level vectors byte by byte: byte p = 4 c + i
        // of octet o packs the levels of value 32 o + 4 qi + i of column c, qi = 0..7, as
        // kQ3kPanelBits says (Q2_K: 2 bits each, quads 0-3 in A, 4-7 in B). 12 -> 1.2 ms per MB of Q3_K
        // against setting the bits one by one (unpack_panel does that: the test compares both).
        uint8_t lev[16][256] = {};
        for (int c = 0; c < nrows; ++c) block_levels(t, rows + c * row_stride + sb * g.block, lev[c]);
        for (int o = 0; o < 8; ++o)
            for (int p = 0; p < 64; ++p) {
                const uint8_t* lv = lev[p / 4] + 32 * o + p % 4;
                int q[8];
                for (int qi = 0; qi < 8; ++qi) q[qi] = lv[4 * qi];
                uint8_t* V = L + g.octet * o + p;
                if (t == DType::Q3_K) {
                    V[0] = static_cast<uint8_t>(q[0] | q[1] << 3 | (q[2] & 3) << 6);
                    V[64] = static_cast<uint8_t>(q[3] | q[4] << 3 | (q[5] & 3) << 6);
                    V[128] = static_cast<uint8_t>(q[6] | q[7] << 3 | (q[2] >> 2) << 6 | (q[5] >> 2) << 7);
                } else {
                    V[0] = static_cast<uint8_t>(q[0] | q[1] << 2 | q[2] << 4 | q[3] << 6);
                    V[64] = static_cast<uint8_t>(q[4] | q[5] << 2 | q[6] << 4 | q[7] << 6);
                }
            }
        uint8_t u[kQ4kScalesUnpacked] = {};  // Q3_K: the raw scales unpacked (missing rows 0), packed below
        for (int c = 0; c < nrows; ++c) {
            const uint8_t* b = rows + c * row_stride + sb * g.block;
            for (int gi = 0; gi < 16; ++gi) {
                if (t == DType::Q3_K) u[q3k_sc_at(gi, c)] = static_cast<uint8_t>(raw_scale(b + 96, gi));
                else out[r.sc + sc_byte(gi, c)] = b[gi];
            }
            if (t == DType::Q3_K) {
                std::memcpy(out + r.d + 2 * c, b + 108, 2);
            } else {
                std::memcpy(out + r.d + 2 * c, b + 80, 2);
                std::memcpy(out + r.d + 32 + 2 * c, b + 82, 2);
            }
        }
        if (t == DType::Q3_K) q4k_scales_pack_scalar(u, out + r.sc);
    }
}

void unpack_panel(DType t, const uint8_t* panel, int64_t K, int nrows, uint8_t* rows, size_t row_stride) {
    check_rows(nrows);
    const Geo g = geo(t);
    check_k(t, K);
    if (t == DType::Q5_0) return detail::unpack_q50(panel, K / 32, nrows, rows, row_stride);
    if (t == DType::MXFP4) return detail::unpack_mxfp4(panel, K / 32, nrows, rows, row_stride);
    const int64_t nsb = K / 256;
    if (t == DType::Q4_K) return unpack_q4k(panel, nsb, nrows, rows, row_stride);
    if (t == DType::Q6_K) return unpack_q6k(panel, nsb, nrows, rows, row_stride);
    if (t == DType::Q8_0) return unpack_q80(panel, K / 32, nrows, rows, row_stride);
    if (t == DType::Q4_0) return detail::unpack_q40(panel, K / 32, nrows, rows, row_stride);
    if (t == DType::Q5_K) return detail::unpack_q5k(panel, nsb, nrows, rows, row_stride);
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const SbRegions r = regions(g, nsb, sb);
        const uint8_t* L = panel + r.lev;
        for (int c = 0; c < nrows; ++c) {
            uint8_t* b = rows + c * row_stride + sb * g.block;
            uint8_t lev[256];
            for (int k = 0; k < 256; ++k) {
                int v = 0;
                for (int bit = 0; bit < g.bits; ++bit) {
                    PanelBit pb;
                    const size_t at = lev_byte(t, g, k, bit, c, &pb);
                    v |= ((L[at] >> pb.bit) & 1) << bit;
                }
                lev[k] = static_cast<uint8_t>(v);
            }
            levels_block(t, lev, b);
            if (t == DType::Q3_K) {
                int u[16];
                for (int gi = 0; gi < 16; ++gi) u[gi] = q4k_scale_get(panel + r.sc, q3k_sc_at(gi, c));
                pack_raw_scales(u, b + 96);
                std::memcpy(b + 108, panel + r.d + 2 * c, 2);
            } else {
                for (int gi = 0; gi < 16; ++gi) b[gi] = panel[r.sc + sc_byte(gi, c)];
                std::memcpy(b + 80, panel + r.d + 2 * c, 2);
                std::memcpy(b + 82, panel + r.d + 32 + 2 * c, 2);
            }
        }
    }
}

bool panel_region_major(DType t) {
    return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

PanelRegionBytes panel_region_bytes(DType t, int64_t K) {
    const Geo g = geo(t);
    const size_t nsb = static_cast<size_t>(K / 256);
    return {nsb * static_cast<size_t>(g.lev), nsb * static_cast<size_t>(g.sc), nsb * static_cast<size_t>(g.d)};
}

PanelParts panel_parts(DType t, int64_t K, const uint8_t* panels, int64_t n_panels, int64_t p) {
    if (!panel_region_major(t)) return {panels + static_cast<size_t>(p) * panel_bytes(t, K), nullptr, nullptr};
    const Geo g = geo(t);
    const size_t nsb = static_cast<size_t>(K / 256), np = static_cast<size_t>(n_panels), i = static_cast<size_t>(p);
    const size_t ls = nsb * static_cast<size_t>(g.lev);  // one panel's levels
    const uint8_t* sc0 = panels + np * ls;
    const uint8_t* d0 = sc0 + np * nsb * static_cast<size_t>(g.sc);
    return {panels + i * ls, sc0 + i * nsb * static_cast<size_t>(g.sc), d0 + i * nsb * static_cast<size_t>(g.d)};
}

const uint8_t* panel_gather(DType t, int64_t K, const uint8_t* panels, int64_t n_panels, int64_t p, uint8_t* buf) {
    const PanelParts pp = panel_parts(t, K, panels, n_panels, p);
    if (!pp.sc) return pp.lev;
    const Geo g = geo(t);
    const size_t nsb = static_cast<size_t>(K / 256), lev = nsb * static_cast<size_t>(g.lev), sc = nsb * static_cast<size_t>(g.sc);
    std::memcpy(buf, pp.lev, lev);
    std::memcpy(buf + lev, pp.sc, sc);
    std::memcpy(buf + lev + sc, pp.d, nsb * static_cast<size_t>(g.d));
    return buf;
}

void repack_matrix_panels(DType t, const uint8_t* w, size_t row_stride, int64_t N, int64_t K, int64_t p0, int64_t p1, uint8_t* out) {
    const size_t pb = panel_bytes(t, K);
    const int64_t np = (N + 15) / 16;
    if (p0 < 0 || p1 > np || p0 > p1) throw_error("kernels", "panel repack: panels [", p0, ", ", p1, ") of a matrix of ", np);
    const bool fast = panel_gemv_usable();  // AVX-512 F/BW/VL and more
    const bool rm = panel_region_major(t);
    std::vector<uint8_t> scratch(rm ? pb : 0);  // region-major: one panel, then moved into its regions
    for (int64_t p = p0; p < p1; ++p) {
        const int64_t n = 16 * p;
        const int nr = static_cast<int>(N - n < 16 ? N - n : 16);
        uint8_t* dst = rm ? scratch.data() : out + static_cast<size_t>(p) * pb;
        if (!(fast && repack_panel_avx512(t, w + n * row_stride, row_stride, K, nr, dst))) repack_panel(t, w + n * row_stride, row_stride, K, nr, dst);
        if (!rm) continue;
        const Geo g = geo(t);
        const PanelParts pp = panel_parts(t, K, out, np, p);
        const size_t nsb = static_cast<size_t>(K / 256), lev = nsb * static_cast<size_t>(g.lev), sc = nsb * static_cast<size_t>(g.sc);
        std::memcpy(const_cast<uint8_t*>(pp.lev), dst, lev);
        std::memcpy(const_cast<uint8_t*>(pp.sc), dst + lev, sc);
        std::memcpy(const_cast<uint8_t*>(pp.d), dst + lev + sc, nsb * static_cast<size_t>(g.d));
    }
}

void repack_matrix(DType t, const uint8_t* w, size_t row_stride, int64_t N, int64_t K, uint8_t* out) {
    repack_matrix_panels(t, w, row_stride, N, K, 0, (N + 15) / 16, out);
}

void unpack_matrix(DType t, const uint8_t* panels, int64_t N, int64_t K, uint8_t* rows, size_t row_stride) {
    std::vector<uint8_t> buf(panel_bytes(t, K));
    const int64_t np = (N + 15) / 16;
    for (int64_t p = 0; p < np; ++p)
        unpack_panel(t, panel_gather(t, K, panels, np, p, buf.data()), K, static_cast<int>(std::min<int64_t>(16, N - 16 * p)),
                     rows + static_cast<size_t>(16 * p) * row_stride, row_stride);
}

bool panel_gemv_usable() {
    // portable code (this file has no AVX-512 target): safe to call on any CPU
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("gfni");
    return ok;
}

void check_range(const PanelMatrix& w, int64_t n0, int64_t n1) {
    if (n0 < 0 || n1 > w.N || n0 > n1 || n0 % 16 != 0)
        throw_error("kernels", "panel GEMV: rows [", n0, ", ", n1, ") of ", w.N, "; the range must lie in the matrix and start at a multiple of 16 (a panel)");
}

void panel_gemv_ref(const PanelMatrix& w, const ref::ActQ8Row& x, int64_t n0, int64_t n1, float* y) {
    const DType t = w.type;
    const Geo g = geo(t);
    const size_t pb = panel_bytes(t, w.K);
    check_range(w, n0, n1);
    const int64_t nsb = w.K / 256;
    const int off = t == DType::Q3_K ? 4 : 0;  // value = level - off
    std::vector<uint8_t> buf(pb);  // a region-major panel gathered
    const uint8_t* P = nullptr;
    for (int64_t n = n0; n < n1; ++n) {
        if (n == n0 || n % 16 == 0) P = panel_gather(t, w.K, w.panels, (w.N + 15) / 16, n / 16, buf.data());
        const int c = static_cast<int>(n % 16);
        if (t == DType::Q5_0) {
            y[n - n0] = detail::dot_q50(P, w.K / 32, c, x);
            continue;
        }
        if (t == DType::MXFP4) {
            y[n - n0] = detail::dot_mxfp4(P, w.K / 32, c, x);
            continue;
        }
        if (t == DType::Q4_K || t == DType::Q6_K || t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q5_K) {
            y[n - n0] = t == DType::Q4_K ? dot_q4k(P, nsb, c, x)
                      : t == DType::Q6_K ? dot_q6k(P, nsb, c, x)
                      : t == DType::Q8_0 ? dot_q80(P, w.K / 32, c, x)
                      : t == DType::Q4_0 ? detail::dot_q40(P, w.K / 32, c, x)
                                         : detail::dot_q5k(P, nsb, c, x);
            continue;
        }
        float acc = 0.0f;
        for (int64_t sb = 0; sb < nsb; ++sb) {
            const SbRegions r = regions(g, nsb, sb);
            int32_t S = 0, M = 0;
            for (int gi = 0; gi < 16; ++gi) {
                int32_t I = 0;
                for (int k = 16 * gi; k < 16 * gi + 16; ++k) {
                    int v = 0;
                    for (int bit = 0; bit < g.bits; ++bit) {
                        PanelBit b;
                        const size_t at = r.lev + lev_byte(t, g, k, bit, c, &b);
                        v |= ((P[at] >> b.bit) & 1) << bit;
                    }
                    I += (v - off) * x.qs[256 * sb + k];
                }
                if (t == DType::Q3_K) {
                    S += (q4k_scale_get(P + r.sc, q3k_sc_at(gi, c)) - 32) * I;
                } else {
                    const uint8_t s = P[r.sc + sc_byte(gi, c)];
                    S += (s & 0xF) * I;
                    M += (s >> 4) * x.nsum[64 * sb + 4 * gi];
                }
            }
            uint16_t h;
            std::memcpy(&h, P + r.d + 2 * c, 2);
            const float dx = x.dxv[64 * sb];
            acc = std::fma(static_cast<float>(S), fp16_to_fp32(h) * dx, acc);
            if (t == DType::Q2_K) {
                std::memcpy(&h, P + r.d + 32 + 2 * c, 2);
                acc = std::fma(static_cast<float>(M), fp16_to_fp32(h) * dx, acc);
            }
        }
        y[n - n0] = acc;
    }
}

}  // namespace moe::kernels::panel
