// AVX-512 VNNI decode GEMV (m <= 2 calls) of Q6_K: 16 weight rows n.. against the activation row
// quantized once (Q8_K), in 128-value steps (one half of a 256-value super-block: 64 ql bytes give
// the low nibbles of units L = values 0..63 and H = 64..127, 32 qh bytes their top two bits).
//
// Why not gemv16_q4k's shape: Q6_K's granules are 16 values (one int8 scale each), i.e. exactly
// the 4 dwords of one 128-bit lane of a vpdpbusd, so two units cannot share one reduction as Q4_K's
// 32-value granules do, and the 16 rows -> [granule][row] reduction (add/unpack tree, 32 shuffles
// per 16 rows x 64 values in granule_sums) is what bounds this GEMV on Zen 4, whose vector shifts
// and shuffles share two pipes. So the first tree level is folded into the loads: per pair of rows
// (a, b) two "virtual rows"
//     P = [a.d0, a.d1, b.d2, b.d3] and Q = [a.d2, a.d3, b.d0, b.d1]   (dwords of each 16-byte lane)
// are read by merge-masked qword loads (b's -8 bytes never touch memory before the row: masked
// lanes do not fault), decoded like any row (the decode is bytewise; qh goes through the same
// masked loads), and dpbusd(dpbusd(0, P, x), Q, x'), x' = x with its qwords swapped in each
// 128-bit lane, gives per lane [a, a, b, b] partial sums with no shuffle. Two shuffles and an add
// per four rows finish the lane sums (level 2) and the 4 x 4 lane transposition of granule_sums
// (level 3) gives one vector per granule, lane c = row c. The -32 offset is added per granule as
// 32 * nsum (exact), and the super-block integer chain of qmatmul.h follows (S += sc_j I_j in int32,
// one f32 FMA per super-block), so the bits equal the panel path and the scalar chain
// (tests/kernels/test_matmul_quant.cpp DecodeGemvEqualsBatchedAndScalar).
#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/fp16.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_decode.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quantize_act.h"
#include "kernels/cpu/isa_target.h"

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2,bmi2")
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm*_undefined_* helpers (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/qmatmul_avx512.h"

namespace moe::kernels::avx512 {

namespace {

constexpr int kQ6Bytes = 210;  // ql[128] qh[64] scales[16] d

// Levels of one (virtual) row's 128-value step: L = ql & 15 | qh bits 0-1 (values 0..31) / 2-3
// (32..63) at bits 4-5; H = ql >> 4 | qh bits 4-5 / 6-7. qh holds the 32 qh bytes in both 256-bit
// halves (the half's ql bytes 0..31 / 32..63 share them).
inline void q6_levels(__m512i ql, __m512i qh, __m512i& L, __m512i& H) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const __m512i hl = _mm512_sllv_epi16(qh, cat256(_mm256_set1_epi16(4), _mm256_set1_epi16(2)));
    const __m512i hh = _mm512_srlv_epi16(qh, cat256(_mm256_setzero_si256(), _mm256_set1_epi16(2)));
    L = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4), hl, m30, 0xF8);  // A | (B & C)
    H = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), hh, m30, 0xF8);
}

// One pair of rows (a, b) for half h of super-block sb: [a, a, b, b] partial sums per 128-bit lane
// of units L (tL) and H (tH).
inline void q6_pair(const uint8_t* A, const uint8_t* B, int h, __m512i xL, __m512i xLs, __m512i xH, __m512i xHs,
                    __m512i& tL, __m512i& tH) {
    constexpr __mmask8 kOdd = 0xAA;  // qwords 1, 3, 5, 7 = dwords 2, 3 of every 128-bit lane
    const uint8_t* qa = A + 64 * h;
    const uint8_t* qb = B + 64 * h;
    const uint8_t* ha = A + 128 + 32 * h;
    const uint8_t* hb = B + 128 + 32 * h;
    const __m512i qlP = _mm512_mask_loadu_epi64(_mm512_loadu_si512(qa), kOdd, qb);
    const __m512i qlQ = _mm512_mask_loadu_epi64(_mm512_loadu_si512(qa + 8), kOdd, qb - 8);
    const __m256i* pa = reinterpret_cast<const __m256i*>(ha);
    const __m256i* pb = reinterpret_cast<const __m256i*>(hb);
    const __m512i qhP = _mm512_mask_broadcast_i64x4(_mm512_broadcast_i64x4(_mm256_loadu_si256(pa)), kOdd,
                                                    _mm256_loadu_si256(pb));
    const __m512i qhQ = _mm512_mask_broadcast_i64x4(
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ha + 8))), kOdd,
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hb - 8)));
    __m512i LP, HP, LQ, HQ;
    q6_levels(qlP, qhP, LP, HP);
    q6_levels(qlQ, qhQ, LQ, HQ);
    const __m512i z = _mm512_setzero_si512();
    tL = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, LP, xL), LQ, xLs);
    tH = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, HP, xH), HQ, xHs);
}

// Level 2: pairs (a, b), (c, d) as [a, a, b, b], [c, c, d, d] -> [a, b, c, d] per 128-bit lane.
inline __m512i q6_quad(__m512i t0, __m512i t1) {
    const __m512 f0 = _mm512_castsi512_ps(t0), f1 = _mm512_castsi512_ps(t1);
    const __m512i e = _mm512_castps_si512(_mm512_shuffle_ps(f0, f1, _MM_SHUFFLE(2, 0, 2, 0)));
    const __m512i o = _mm512_castps_si512(_mm512_shuffle_ps(f0, f1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_epi32(e, o);
}

}  // namespace

void gemv16_q6k(const MatmulArgs& a, const ref::ActQ8Row& x, int64_t r, int64_t n, int nc) {
    const Rows16 rw(a, n, nc);
    const uint8_t* const* w = rw.w;
    const __m512i rows = rw.offsets();
    const int64_t nsb = a.K / 256;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const PanelShare ps = panel_share(a, n, sb, nsb);
        if (n == a.n0) prefetch_first_panel(w, sb, nsb, kQ6Bytes, 2);
        const int64_t off = sb * kQ6Bytes;
        __m512i T[4];
        dwords16(w, off + 192, 0xFFFF, T);  // T[k] lane c: scales 4k..4k+3 of row c
        // d: bytes 208-209, read as the high half of the dword at 206 (stays inside the block)
        const __m512 d = f16_lo(_mm512_srli_epi32(_mm512_i32gather_epi32(rows, w[0] + off + 206, 1), 16));
        __m512i S = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            const int8_t* xq = x.qs + 256 * sb + 128 * h;
            const __m512i xL = _mm512_loadu_si512(xq), xH = _mm512_loadu_si512(xq + 64);
            const __m512i xLs = _mm512_shuffle_epi32(xL, _MM_PERM_BADC), xHs = _mm512_shuffle_epi32(xH, _MM_PERM_BADC);
            __m512i uL[4], uH[4];
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
                __m512i tL[2], tH[2];
#pragma GCC unroll 2
                for (int p = 0; p < 2; ++p) {
                    const int c = 4 * q + 2 * p;
                    prefetch_share(ps, 8 * h + 2 * q + p, 16);
                    q6_pair(w[c] + off, w[c + 1] + off, h, xL, xLs, xH, xHs, tL[p], tH[p]);
                }
                uL[q] = q6_quad(tL[0], tL[1]);
                uH[q] = q6_quad(tH[0], tH[1]);
            }
#pragma GCC unroll 2
            for (int unit = 0; unit < 2; ++unit) {
                __m512i R[4];
                granule_lanes(unit == 0 ? uL : uH, R);
#pragma GCC unroll 4
                for (int i = 0; i < 4; ++i) {
                    const int jj = 8 * h + 4 * unit + i;  // granule within the super-block
                    const int64_t g = sb * 16 + jj;       // granule within the row
                    const int k = jj / 4, j = jj % 4;
                    // the signed scale byte j: moved to the top byte, then shifted down arithmetically
                    const __m512i sc = _mm512_srai_epi32(j == 3 ? T[k] : _mm512_slli_epi32(T[k], 24 - 8 * j), 24);
                    const __m512i I = _mm512_add_epi32(R[i], _mm512_set1_epi32(x.nsum[4 * g] * 32));
                    S = _mm512_add_epi32(S, _mm512_mullo_epi32(I, sc));
                }
            }
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d, _mm512_set1_ps(x.dxv[64 * sb])), acc);
    }
    store_row16(a, r, n, nc, acc);
}

}  // namespace moe::kernels::avx512

#pragma GCC diagnostic pop
MOE_TARGET_POP
