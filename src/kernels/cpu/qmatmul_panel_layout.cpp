// The Q3_K panel layout (qmatmul_panel_layout.h): scalar repack / unpack and the scalar reference
// GEMV over it.
#include "kernels/cpu/qmatmul_panel_layout.h"

#include <cmath>
#include <cstring>

#include "core/checked.h"
#include "core/error.h"
#include "core/fp16.h"

namespace moe::kernels::panel {

namespace {

void check_k(int64_t K) {
    if (K <= 0 || K % 256 != 0)
        throw_error("kernels", "Q3_K panel: K = ", K, " is not a positive multiple of 256 (the Q3_K super-block); only whole super-blocks can be repacked");
}
void check_rows(int nrows) {
    if (nrows < 1 || nrows > 16) throw_error("kernels", "Q3_K panel: ", nrows, " rows; a panel holds 1 to 16 rows");
}

// Q3_K block (110 bytes): hmask[32], qs[64], scales[12], d (f16). Value k = 128 h + 32 j + l
// (l < 32): level = ((qs[32 h + l] >> 2 j) & 3) + 4 x bit (4 h + j) of hmask[l].
void block_levels(const uint8_t* b, uint8_t lev[256]) {
    for (int k = 0; k < 256; ++k) {
        const int h = k / 128, j = (k % 128) / 32, l = k % 32;
        lev[k] = static_cast<uint8_t>(((b[32 + 32 * h + l] >> (2 * j)) & 3) | (((b[l] >> (4 * h + j)) & 1) << 2));
    }
}
void levels_block(const uint8_t lev[256], uint8_t* b) {
    std::memset(b, 0, 96);
    for (int k = 0; k < 256; ++k) {
        const int h = k / 128, j = (k % 128) / 32, l = k % 32;
        b[32 + 32 * h + l] = static_cast<uint8_t>(b[32 + 32 * h + l] | ((lev[k] & 3) << (2 * j)));
        b[l] = static_cast<uint8_t>(b[l] | ((lev[k] >> 2) << (4 * h + j)));
    }
}
// The 16 raw 6-bit scales (ref::q3_k_scale + 32) of a block's scales[12], and back.
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
SbRegions regions(int64_t nsb, int64_t sb) {
    const size_t n = static_cast<size_t>(nsb), s = static_cast<size_t>(sb);
    return {s * kQ3kSbLevelBytes, n * kQ3kSbLevelBytes + s * kQ3kSbScaleBytes,
            n * (kQ3kSbLevelBytes + kQ3kSbScaleBytes) + s * kQ3kSbDBytes};
}

// Byte of a level vector for (octet o, quad qi, column c, value i) and its bit b.
inline size_t lev_byte(int o, int qi, int b, int c, int i) { return 192 * o + 64 * kQ3kPanelBits[qi][b].vec + 4 * c + i; }

}  // namespace

size_t q3k_panel_bytes(int64_t K) {
    check_k(K);
    return static_cast<size_t>(checked_mul(static_cast<uint64_t>(K / 256), kQ3kSbPanelBytes, "kernels", "Q3_K panel size"));
}

size_t q3k_panel_matrix_bytes(int64_t N, int64_t K) {
    if (N < 0) throw_error("kernels", "Q3_K panel: negative row count ", N);
    return static_cast<size_t>(checked_mul(static_cast<uint64_t>((N + 15) / 16), q3k_panel_bytes(K), "kernels", "Q3_K panel matrix size"));
}

void repack_q3k_panel(const uint8_t* rows, size_t row_stride, int64_t K, int nrows, uint8_t* out) {
    check_rows(nrows);
    const int64_t nsb = K / 256;
    std::memset(out, 0, q3k_panel_bytes(K));
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const SbRegions r = regions(nsb, sb);
        uint8_t* L = out + r.lev;
        int8_t* S = reinterpret_cast<int8_t*>(out + r.sc);
        for (int c = 0; c < nrows; ++c) {
            const uint8_t* b = rows + c * row_stride + sb * kQ3kBlockBytes;
            uint8_t lev[256];
            block_levels(b, lev);
            for (int k = 0; k < 256; ++k) {
                const int o = k / 32, qi = (k % 32) / 4, i = k % 4;
                for (int bit = 0; bit < 3; ++bit)
                    L[lev_byte(o, qi, bit, c, i)] = static_cast<uint8_t>(L[lev_byte(o, qi, bit, c, i)] |
                                                                         (((lev[k] >> bit) & 1) << kQ3kPanelBits[qi][bit].bit));
            }
            for (int g = 0; g < 16; ++g) S[32 * (g / 2) + 2 * c + g % 2] = static_cast<int8_t>(raw_scale(b + 96, g) - 32);
            std::memcpy(out + r.d + 2 * c, b + 108, 2);
        }
    }
}

void unpack_q3k_panel(const uint8_t* panel, int64_t K, int nrows, uint8_t* rows, size_t row_stride) {
    check_rows(nrows);
    check_k(K);
    const int64_t nsb = K / 256;
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const SbRegions r = regions(nsb, sb);
        const uint8_t* L = panel + r.lev;
        const int8_t* S = reinterpret_cast<const int8_t*>(panel + r.sc);
        for (int c = 0; c < nrows; ++c) {
            uint8_t* b = rows + c * row_stride + sb * kQ3kBlockBytes;
            uint8_t lev[256];
            for (int k = 0; k < 256; ++k) {
                const int o = k / 32, qi = (k % 32) / 4, i = k % 4;
                int v = 0;
                for (int bit = 0; bit < 3; ++bit) v |= ((L[lev_byte(o, qi, bit, c, i)] >> kQ3kPanelBits[qi][bit].bit) & 1) << bit;
                lev[k] = static_cast<uint8_t>(v);
            }
            levels_block(lev, b);
            int u[16];
            for (int g = 0; g < 16; ++g) u[g] = S[32 * (g / 2) + 2 * c + g % 2] + 32;
            pack_raw_scales(u, b + 96);
            std::memcpy(b + 108, panel + r.d + 2 * c, 2);
        }
    }
}

void repack_q3k_matrix(const uint8_t* w, size_t row_stride, int64_t N, int64_t K, uint8_t* out) {
    const size_t pb = q3k_panel_bytes(K);
    for (int64_t n = 0; n < N; n += 16)
        repack_q3k_panel(w + n * row_stride, row_stride, K, static_cast<int>(N - n < 16 ? N - n : 16), out + (n / 16) * pb);
}

bool q3k_panel_gemv_usable() {
    // portable code (this file has no AVX-512 target): safe to call on any CPU
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("gfni");
    return ok;
}

void check_range(const Q3kPanelMatrix& w, int64_t n0, int64_t n1) {
    if (n0 < 0 || n1 > w.N || n0 > n1 || n0 % 16 != 0)
        throw_error("kernels", "Q3_K panel GEMV: rows [", n0, ", ", n1, ") of ", w.N, "; the range must lie in the matrix and start at a multiple of 16 (a panel)");
}

void q3k_panel_gemv_ref(const Q3kPanelMatrix& w, const ref::ActQ8Row& x, int64_t n0, int64_t n1, float* y) {
    const size_t pb = q3k_panel_bytes(w.K);
    check_range(w, n0, n1);
    const int64_t nsb = w.K / 256;
    for (int64_t n = n0; n < n1; ++n) {
        const uint8_t* P = w.panels + (n / 16) * pb;
        const int c = static_cast<int>(n % 16);
        float acc = 0.0f;
        for (int64_t sb = 0; sb < nsb; ++sb) {
            const SbRegions r = regions(nsb, sb);
            int32_t S = 0;
            for (int g = 0; g < 16; ++g) {
                int32_t I = 0;
                for (int k = 16 * g; k < 16 * g + 16; ++k) {
                    const int o = k / 32, qi = (k % 32) / 4, i = k % 4;
                    int v = 0;
                    for (int bit = 0; bit < 3; ++bit) v |= ((P[r.lev + lev_byte(o, qi, bit, c, i)] >> kQ3kPanelBits[qi][bit].bit) & 1) << bit;
                    I += (v - 4) * x.qs[256 * sb + k];
                }
                S += static_cast<int8_t>(P[r.sc + 32 * (g / 2) + 2 * c + g % 2]) * I;
            }
            uint16_t h;
            std::memcpy(&h, P + r.d + 2 * c, 2);
            acc = std::fma(static_cast<float>(S), fp16_to_fp32(h) * x.dxv[64 * sb], acc);
        }
        y[n - n0] = acc;
    }
}

}  // namespace moe::kernels::panel
