// The Q4_0 and Q5_K panel layouts (qmatmul_panel_layout.h): scalar repack / unpack and the scalar
// reference dot of one panel row (panel_gemv_ref calls these; qmatmul_panel_layout.cpp dispatches).
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/quant_formats.h"

namespace moe::kernels::panel::detail {

namespace {

// Level byte (of a super-block's level region) of value k (< 256), column c, and the nibble's
// shift: 32-value granule / block k / 32, vector (k % 32) / 8, byte 4 c + i (i = k % 4), nibble
// (k % 8) / 4 -- Q4_K's nibble vectors, Q4_0's too.
inline size_t nib_byte(int k, int c) { return static_cast<size_t>(256 * (k / 32) + 64 * ((k % 32) / 8) + 4 * c + k % 4); }
inline int nib_shift(int k) { return 4 * ((k % 8) / 4); }

// ---- Q4_0: value j of a block = nibble j / 16 of qs[j % 16]; block b's level vectors at 256 b
// (nib_byte of its values 0..31), its d at 32 b + 2 c of the d region.

// ---- Q5_K: value k = 32 g + 8 v + 4 h + i of a super-block, column c. Its level byte (byte
// 4 c + i of vector v of granule g) holds, for h = 1, the level in bits 3-7; for h = 0 the level's
// bits 0-2 in bits 0-2, and its bits 3-4 are bits 2 v, 2 v + 1 of the granule's side byte 4 c + i. In
// the block: nibble h' = (k % 64) / 32 of qs[32 (k / 64) + k % 32] + 16 x bit k / 32 of qh[k % 32].
inline size_t q5k_lev_byte(int k, int c) { return static_cast<size_t>(q5k_lev_at(k / 32, (k % 32) / 8) + 4 * c + k % 4); }
inline size_t q5k_side_byte(int k, int c) { return static_cast<size_t>(q5k_side_at(k / 32) + 4 * c + k % 4); }
inline int q5k_level(const uint8_t* L, int k, int c) {
    const int b = L[q5k_lev_byte(k, c)];
    if ((k % 8) / 4) return b >> 3;
    return (b & 7) | ((L[q5k_side_byte(k, c)] >> (2 * ((k % 32) / 8))) & 3) << 3;
}

}  // namespace

void repack_q40(const uint8_t* rows, size_t row_stride, int64_t nb, int nrows, uint8_t* out) {
    const size_t dreg = static_cast<size_t>(nb) * kQ40BlkLevelBytes;
    for (int64_t b = 0; b < nb; ++b) {
        uint8_t* L = out + b * kQ40BlkLevelBytes;
        uint8_t* D = out + dreg + b * kQ40BlkDBytes;
        for (int c = 0; c < nrows; ++c) {
            const uint8_t* B = rows + c * row_stride + b * kQ40BlockBytes;
            uint8_t lev[32];
            for (int j = 0; j < 16; ++j) {
                lev[j] = B[2 + j] & 0xF;
                lev[16 + j] = B[2 + j] >> 4;
            }
            // byte 4 c + i of vector v = level 8 v + i | level 8 v + 4 + i << 4
            for (int v = 0; v < 4; ++v)
                for (int i = 0; i < 4; ++i) L[64 * v + 4 * c + i] = static_cast<uint8_t>(lev[8 * v + i] | lev[8 * v + 4 + i] << 4);
            std::memcpy(D + 2 * c, B, 2);
        }
    }
}

void unpack_q40(const uint8_t* panel, int64_t nb, int nrows, uint8_t* rows, size_t row_stride) {
    const size_t dreg = static_cast<size_t>(nb) * kQ40BlkLevelBytes;
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* L = panel + b * kQ40BlkLevelBytes;
        for (int c = 0; c < nrows; ++c) {
            uint8_t* B = rows + c * row_stride + b * kQ40BlockBytes;
            std::memcpy(B, panel + dreg + b * kQ40BlkDBytes + 2 * c, 2);
            std::memset(B + 2, 0, 16);
            for (int j = 0; j < 32; ++j) {  // value by value (repack goes vector by vector: the test compares both)
                const int lv = (L[nib_byte(j, c)] >> nib_shift(j)) & 0xF;
                B[2 + j % 16] = static_cast<uint8_t>(B[2 + j % 16] | lv << (4 * (j / 16)));
            }
        }
    }
}

// Row c of a Q4_0 panel against the kActQ8_0 row x: per block I = sum (level - 8) x (exact), then
// acc = fma(float(I), d * dx, acc) in K order (the block kernels' per-granule chain, DQ4_0).
float dot_q40(const uint8_t* P, int64_t nb, int c, const ref::ActQ8Row& x) {
    const size_t dreg = static_cast<size_t>(nb) * kQ40BlkLevelBytes;
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* L = P + b * kQ40BlkLevelBytes;
        const int64_t k0 = 32 * b;
        int32_t I = 0;
        for (int k = 0; k < 32; ++k) I += (((L[nib_byte(k, c)] >> nib_shift(k)) & 0xF) - 8) * x.qs[k0 + k];
        uint16_t hd;
        std::memcpy(&hd, P + dreg + b * kQ40BlkDBytes + 2 * c, 2);
        acc = std::fma(static_cast<float>(I), fp16_to_fp32(hd) * x.dxv[k0 / 4], acc);
    }
    return acc;
}

void repack_q5k(const uint8_t* rows, size_t row_stride, int64_t nsb, int nrows, uint8_t* out) {
    const size_t sreg = static_cast<size_t>(nsb) * kQ5kSbLevelBytes, dreg = sreg + static_cast<size_t>(nsb) * kQ5kSbScaleBytes;
    for (int64_t sb = 0; sb < nsb; ++sb) {
        uint8_t* L = out + sb * kQ5kSbLevelBytes;
        uint8_t* S = out + sreg + sb * kQ5kSbScaleBytes;
        uint8_t* D = out + dreg + sb * kQ5kSbDBytes;
        for (int c = 0; c < nrows; ++c) {
            const uint8_t* b = rows + c * row_stride + sb * kQ5kBlockBytes;
            // the 256 levels 32 at a time (granule g: nibble g % 2 of qs[32 (g / 2) ..], bit g of qh)
            uint8_t lev[256];
            for (int g = 0; g < 8; ++g)
                for (int l = 0; l < 32; ++l)
                    lev[32 * g + l] = static_cast<uint8_t>(((b[48 + 32 * (g / 2) + l] >> (4 * (g % 2))) & 0xF) | ((b[16 + l] >> g) & 1) << 4);
            for (int g = 0; g < 8; ++g)
                for (int v = 0; v < 4; ++v)
                    for (int i = 0; i < 4; ++i) {
                        const int l0 = lev[32 * g + 8 * v + i], l1 = lev[32 * g + 8 * v + 4 + i];
                        L[q5k_lev_at(g, v) + 4 * c + i] = static_cast<uint8_t>((l0 & 7) | l1 << 3);
                        uint8_t& side = L[q5k_side_at(g) + 4 * c + i];
                        side = static_cast<uint8_t>(side | (l0 >> 3) << (2 * v));
                    }
            for (int gi = 0; gi < 8; ++gi) {
                uint8_t sc, m;
                ref::get_scale_min_k4(gi, b + 4, &sc, &m);
                q4k_scale_set(S, q4k_sc_at(gi, c), sc);
                q4k_scale_set(S, q4k_m_at(gi, c), m);
            }
            std::memcpy(D + 2 * c, b, 2);
            std::memcpy(D + 32 + 2 * c, b + 2, 2);
        }
    }
}

void unpack_q5k(const uint8_t* panel, int64_t nsb, int nrows, uint8_t* rows, size_t row_stride) {
    const size_t sreg = static_cast<size_t>(nsb) * kQ5kSbLevelBytes, dreg = sreg + static_cast<size_t>(nsb) * kQ5kSbScaleBytes;
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* L = panel + sb * kQ5kSbLevelBytes;
        const uint8_t* S = panel + sreg + sb * kQ5kSbScaleBytes;
        const uint8_t* D = panel + dreg + sb * kQ5kSbDBytes;
        for (int c = 0; c < nrows; ++c) {
            uint8_t* b = rows + c * row_stride + sb * kQ5kBlockBytes;
            std::memcpy(b, D + 2 * c, 2);
            std::memcpy(b + 2, D + 32 + 2 * c, 2);
            uint8_t sc[8], m[8];
            for (int gi = 0; gi < 8; ++gi) {
                sc[gi] = q4k_scale_get(S, q4k_sc_at(gi, c));
                m[gi] = q4k_scale_get(S, q4k_m_at(gi, c));
            }
            ref::pack_scale_min_k4(sc, m, b + 4);
            std::memset(b + 16, 0, 160);
            for (int k = 0; k < 256; ++k) {  // value by value (repack goes by vector bytes: the test compares both)
                const int lv = q5k_level(L, k, c);
                uint8_t& q = b[48 + 32 * (k / 64) + k % 32];
                q = static_cast<uint8_t>(q | (lv & 0xF) << (4 * ((k % 64) / 32)));
                b[16 + k % 32] = static_cast<uint8_t>(b[16 + k % 32] | (lv >> 4) << (k / 32));
            }
        }
    }
}

// Row c of a Q5_K panel against x: per super-block S = sum_g sc_g I_g (5-bit levels), M = sum_g
// m_g nsum_g, then the two FMAs of qmatmul.h (as dot_q4k).
float dot_q5k(const uint8_t* P, int64_t nsb, int c, const ref::ActQ8Row& x) {
    const size_t sreg = static_cast<size_t>(nsb) * kQ5kSbLevelBytes, dreg = sreg + static_cast<size_t>(nsb) * kQ5kSbScaleBytes;
    float acc = 0.0f;
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* L = P + sb * kQ5kSbLevelBytes;
        const uint8_t* S8 = P + sreg + sb * kQ5kSbScaleBytes;
        int32_t S = 0, M = 0;
        for (int gi = 0; gi < 8; ++gi) {
            int32_t I = 0;
            for (int k = 32 * gi; k < 32 * gi + 32; ++k) {
                I += q5k_level(L, k, c) * x.qs[256 * sb + k];
            }
            S += q4k_scale_get(S8, q4k_sc_at(gi, c)) * I;
            M += q4k_scale_get(S8, q4k_m_at(gi, c)) * (x.nsum[64 * sb + 8 * gi] + x.nsum[64 * sb + 8 * gi + 4]);
        }
        uint16_t hd, hm;
        std::memcpy(&hd, P + dreg + sb * kQ5kSbDBytes + 2 * c, 2);
        std::memcpy(&hm, P + dreg + sb * kQ5kSbDBytes + 32 + 2 * c, 2);
        const float dx = x.dxv[64 * sb];
        acc = std::fma(static_cast<float>(S), fp16_to_fp32(hd) * dx, acc);
        acc = std::fma(static_cast<float>(M), fp16_to_fp32(hm) * dx, acc);
    }
    return acc;
}

}  // namespace moe::kernels::panel::detail
