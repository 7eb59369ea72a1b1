// The AMX-INT8 Q4_K, Q5_K and Q6_K panel GEMMs with the granule scales folded into the tile operands.
//
// Why not one tile product per 32-value granule (the scheme qmatmul_panel_amx.cpp keeps for the
// other types): each granule's int32 sums then leave the tiles through memory and are scaled by
// AVX-512 (load, vpmulld, add per token row and panel), about 5x the tile work; on a Xeon with AMX
// that ran at 5 % of the measured TDPBUSD peak, 0.73x the VNNI panel GEMM (docs/PERFORMANCE.md).
//
// Here the tiles sum a whole 256-value super-block. S = sum_g sc_g I_g (I_g = the granule's
// integer dot product, sc_g the 6-bit scale) is exact in int32 either way, and with sc_g = 16 h_g + l_g
// (l_g < 16, h_g < 4):
//   S = 16 x (x . Bh) + x . Bl,   Bh[k] = q_k h_g(k),  Bl[k] = q_k l_g(k)   (q_k < 16: <= 45, <= 225)
// so both operands are uint8 levels for TDPBSUD (activations signed), made per call and panel from
// the stored nibbles (fill_k45_folded; K x 16 bytes each). The mins' term M = sum_g m_g nsum_g is
// taken by vpdpwssd from the layout's word pairs, as the VNNI kernel does. Then, per super-block, the
// same f32 chain as panel_gemm_avx512 (acc = fma(float(S), d dx, acc); acc = fma(float(M), dmin dx,
// acc)), so the output bits are the VNNI path's (tests/kernels/test_panel_amx.cpp checks them on
// the emulator everywhere and on real tiles where the CPU has them).
//
// Tiles: C0 = A0 . Bh, C1 = A0 . Bl, C2 = A1 . Bh, C3 = A1 . Bl (A0 / A1: tokens r0 .. r0 + 15 /
// r0 + 16 .. r0 + 31 as 16 x 64 bytes, tile 4 / 5; Bh / Bl: 16 quad rows x 64 bytes, tiles 6 / 7),
// 4 TDPBSUD of 64 values per super-block step, 4 steps per super-block, one store of each C per
// super-block (against per granule: 8x fewer stores and scalings).
//
// Q5_K (Q4_K's scales, mins, scale and d regions and chain; levels q < 32, read as the VNNI
// fill_q5k reads them): the same with base-8 digits, sc_g = 8 h_g + l_g (h_g, l_g < 8), so that
//   S = 8 x (x . Bh) + x . Bl,   q_k h_g(k), q_k l_g(k) <= 31 x 7 = 217   (uint8)
// (16 h + l would give q l up to 465). Same tiles, same mins' term, same chain. On a Xeon with AMX
// 1.5x the VNNI panel GEMM, as Q4_K (docs/PERFORMANCE.md), so a panel_amx_default type.
//
// Q6_K (value d sc_g (q - 32), q < 64, sc_g int8 per 16 values): S = sum_g sc_g sum_k x_k (q_k - 32).
// With sc_g = 64 s2 + 8 s1 + s0, every digit in -3 .. 4 (a complete residue set mod 8, so each int8
// has one such form):
//   S = 64 x (x . B2) + 8 x (x . B1) + x . B0,   Bi[k] = (q_k - 32) si_g(k)   (in -128 .. 124: int8)
// by TDPBSSD (both signed) into C0, C1, C2 from A tile 4 (16 tokens) and B tiles 6, 7, 5; then
// acc = fma(float(S), d dx, acc) per super-block, the VNNI kernel's chain.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/isa_target.h"
#include "kernels/cpu/panel_prefetch.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_amx_folded.h"
#include "kernels/ref/quantize_act.h"

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2,bmi2,amx-tile,amx-int8")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 false positive in _mm512_cvtph_ps, as qmatmul_panel_gemm.cpp
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace moe::kernels::panel {

namespace {

// Q4_K / Q5_K: the low digit's bits of the folded scale sc_g = 2^kDigit h_g + l_g, so that every
// level x digit fits uint8 (Q4_K: q < 16, h < 4, l < 16: <= 225; Q5_K: q < 32, h, l < 8: <= 217).
template <DType T>
constexpr int k45_digit() {
    return T == DType::Q5_K ? 3 : 4;
}

// Bytes q * s (q, s uint8 with every product < 256) by two 16-bit multiplies: the low byte of
// q_even * s_even in each word, and q_odd * s_odd shifted into the high byte.
inline __m512i mul_u8(__m512i q, __m512i s_even, __m512i s_odd_hi) {
    const __m512i lo = _mm512_and_si512(_mm512_mullo_epi16(q, s_even), _mm512_set1_epi16(0x00FF));
    return _mm512_or_si512(lo, _mm512_mullo_epi16(_mm512_srli_epi16(q, 8), s_odd_hi));
}

// Q4_K / Q5_K panel pp of nsb super-blocks -> Bh, Bl: quad row r = 64 sb + 8 g + 2 v (+ 1) of
// granule g, the levels of values 32 g + 8 v .. + 3 (+ 4 .. + 7) times the scale's high (low) digit
// h_g (l_g) of each column (bytes 4 c .. 4 c + 3 = column c; sc_g = 2^kDigit h_g + l_g: Q4_K 16,
// Q5_K 8); wd [nsb][2][16] f32 d, dmin. Levels: Q4_K the low (high) nibbles of stored vector v; Q5_K
// (vector v & 7) | side bits 2 v, 2 v + 1 at bits 3-4 (v >> 3), as the VNNI fill_q5k.
template <DType T>
void fill_k45_folded(const PanelParts& pp, int64_t nsb, uint8_t* bh, uint8_t* bl, float* wd) {
    constexpr bool kQ5 = T == DType::Q5_K;
    constexpr int kLev = kQ5 ? kQ5kSbLevelBytes : kQ4kSbLevelBytes;
    const __m512i nib = _mm512_set1_epi8(0x0F), dig = _mm512_set1_epi8(static_cast<char>((1 << k45_digit<T>()) - 1)),
                  rep = _mm512_set1_epi32(0x01010101), even = _mm512_set1_epi16(0x00FF), odd = _mm512_set1_epi16(static_cast<short>(0xFF00)),
                  m7 = _mm512_set1_epi8(7), m18 = _mm512_set1_epi8(0x18), m1f = _mm512_set1_epi8(0x1F);
    for (int64_t sb = 0; sb < nsb; ++sb) {
        static_assert(kQ5kSbScaleBytes == kQ4kSbScaleBytes && kQ5kSbDBytes == kQ4kSbDBytes, "Q5_K's scale and d regions are Q4_K's");
        const uint8_t* S = pp.sc + sb * kQ4kSbScaleBytes;
        const uint8_t* L = pp.lev + sb * kLev;
        for (int g = 0; g < 8; ++g) {
            // sc_g of the 16 columns, each in the 4 bytes of its column
            const __m512i sc = _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(S + 16 * g))), rep);
            const __m512i l = _mm512_and_si512(sc, dig), h = _mm512_and_si512(_mm512_srli_epi32(sc, k45_digit<T>()), dig);
            const __m512i le = _mm512_and_si512(l, even), lo = _mm512_and_si512(l, odd), he = _mm512_and_si512(h, even),
                          ho = _mm512_and_si512(h, odd);
            [[maybe_unused]] __m512i side[4];
            if constexpr (kQ5) {
                const __m512i H = _mm512_loadu_si512(L + q5k_side_at(g));  // bits 2 v, 2 v + 1 -> bits 3-4
                side[0] = _mm512_slli_epi16(H, 3), side[1] = _mm512_slli_epi16(H, 1), side[2] = _mm512_srli_epi16(H, 1),
                side[3] = _mm512_srli_epi16(H, 3);
            }
            for (int v = 0; v < 4; ++v) {
                __m512i q0, q1;
                if constexpr (kQ5) {
                    const __m512i V = _mm512_loadu_si512(L + q5k_lev_at(g, v));
                    q0 = _mm512_ternarylogic_epi32(_mm512_and_si512(V, m7), side[v], m18, 0xF8);
                    q1 = _mm512_and_si512(_mm512_srli_epi16(V, 3), m1f);
                } else {
                    const __m512i V = _mm512_loadu_si512(L + 256 * g + 64 * v);
                    q0 = _mm512_and_si512(V, nib);
                    q1 = _mm512_and_si512(_mm512_srli_epi16(V, 4), nib);
                }
                const size_t r = static_cast<size_t>(sb * 64 + 8 * g + 2 * v) * 64;
                _mm512_store_si512(bh + r, mul_u8(q0, he, ho));
                _mm512_store_si512(bh + r + 64, mul_u8(q1, he, ho));
                _mm512_store_si512(bl + r, mul_u8(q0, le, lo));
                _mm512_store_si512(bl + r + 64, mul_u8(q1, le, lo));
            }
        }
        const uint8_t* D = pp.d + sb * kQ4kSbDBytes;
        _mm512_store_ps(wd + sb * 32, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D))));
        _mm512_store_ps(wd + sb * 32 + 16, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D + 32))));
    }
}

// Q6_K panel pp -> B0, B1, B2: quad row r = 64 sb + 8 o + qi (values 32 o + 4 qi .. + 3 of the
// super-block, granule 2 o + qi / 4) = (level - 32) times digit i of the granule's scale per column;
// wd [nsb][16] f32 d.
void fill_q6k_folded(const PanelParts& pp, int64_t nsb, uint8_t* const b[3], float* wd) {
    const __m512i nib = _mm512_set1_epi8(0x0F), three = _mm512_set1_epi8(3), off = _mm512_set1_epi8(32),
                  rep = _mm512_set1_epi32(0x01010101), byte = _mm512_set1_epi32(0xFF), even = _mm512_set1_epi16(0x00FF),
                  odd = _mm512_set1_epi16(static_cast<short>(0xFF00)), d3 = _mm512_set1_epi32(3), d7 = _mm512_set1_epi32(7);
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* L = pp.lev + sb * kQ6kSbLevelBytes;
        for (int o = 0; o < 8; ++o) {
            __m512i se[2][3], so[2][3];  // per granule 2 o + j, digit i: the even / odd-high operands of mul_u8
            for (int j = 0; j < 2; ++j) {
                __m512i r = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pp.sc + sb * kQ6kSbScaleBytes + 16 * (2 * o + j))));
                for (int i = 0; i < 3; ++i) {
                    const __m512i dg = _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(r, d3), d7), d3);  // in -3 .. 4
                    r = _mm512_srai_epi32(_mm512_sub_epi32(r, dg), 3);                                    // exact
                    const __m512i bytes = _mm512_mullo_epi32(_mm512_and_si512(dg, byte), rep);
                    se[j][i] = _mm512_and_si512(bytes, even);
                    so[j][i] = _mm512_and_si512(bytes, odd);
                }
            }
            for (int qi = 0; qi < 8; ++qi) {
                const __m512i V = _mm512_loadu_si512(L + q6k_nib_at(o, qi / 2)), H = _mm512_loadu_si512(L + q6k_top_at(o, qi / 4));
                const __m512i lo = _mm512_and_si512(qi % 2 ? _mm512_srli_epi16(V, 4) : V, nib);
                const __m512i hi = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(H, 2 * (qi % 4)), three), 4);
                const __m512i q = _mm512_sub_epi8(_mm512_or_si512(lo, hi), off);
                const size_t row = static_cast<size_t>(sb * 64 + 8 * o + qi) * 64;
                const int j = qi / 4;
                for (int i = 0; i < 3; ++i) _mm512_store_si512(b[i] + row, mul_u8(q, se[j][i], so[j][i]));
            }
        }
        _mm512_store_ps(wd + sb * 16, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pp.d + sb * kQ6kSbDBytes))));
    }
}

// Every tile 16 rows x 64 bytes (the folded kernels' only shape).
amx::TileConfig full_tiles() {
    amx::TileConfig cfg;
    for (int i = 0; i < 8; ++i) cfg.rows[i] = 16, cfg.colsb[i] = 64;
    return cfg;
}

// Q4_K / Q5_K (T): S = 2^kDigit x.Bh + x.Bl and the mins' term per super-block (the header comment).
template <DType T, class Tiles>
void gemm_k45_folded(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    size_t act_stride = 0;
    const unsigned char* act = qmm_activations(a, Isa::Avx512, act_quant(w.type), &act_stride);
    const int64_t K = w.K, nsb = K / 256, Kp = ref::act_q8_padded(K), n_panels = (w.N + 15) / 16;
    // scratch: the tail rows' zero-padded activations [16][Kp], Bh and Bl [K / 4][64], wd [nsb][32],
    // the rows' mins pairs [m][nsb][4] (int32)
    const size_t pad_b = 16 * static_cast<size_t>(Kp), b_b = static_cast<size_t>(K) * 16, d_b = static_cast<size_t>(nsb) * 128,
                 pr_b = static_cast<size_t>(a.m) * static_cast<size_t>(nsb) * 16;
    unsigned char* scratch = amx_scratch(pad_b + 2 * b_b + d_b + pr_b);
    uint8_t* pad = scratch;
    uint8_t* bh = scratch + pad_b;
    uint8_t* bl = bh + b_b;
    float* wd = reinterpret_cast<float*>(bl + b_b);
    int32_t* prs = reinterpret_cast<int32_t*>(bl + b_b + d_b);
    pad_tail_rows(act, act_stride, a.m, K, Kp, pad);

    // the mins' activation pairs (nsum of granules 2k, 2k + 1 as int16: mins32's operand in
    // qmatmul_avx512_panel.h) of every row and super-block, once per call
    for (int64_t r = 0; r < a.m; ++r) {
        const ref::ActQ8Row xr = ref::act_q8_row(const_cast<unsigned char*>(act + r * act_stride), K);
        for (int64_t g = 0; g < 8 * nsb; g += 2) {
            const int32_t n0 = xr.nsum[8 * g] + xr.nsum[8 * g + 4], n1 = xr.nsum[8 * g + 8] + xr.nsum[8 * g + 12];
            prs[r * nsb * 4 + g / 2] = static_cast<int32_t>((static_cast<uint32_t>(n0) & 0xFFFFu) | (static_cast<uint32_t>(n1) << 16));
        }
    }

    t.config(full_tiles());

    alignas(64) int32_t cbuf[4][16][16];
    alignas(64) float acc[32][16];
    ref::ActQ8Row x[32];
    for (int64_t n = a.n0; n < a.n1; n += 16) {
        const int nc = static_cast<int>(a.n1 - n >= 16 ? 16 : a.n1 - n);
        const PanelParts pp = panel_parts(w.type, K, w.panels, n_panels, n / 16);
        fill_k45_folded<T>(pp, nsb, bh, bl, wd);
        // the next panel, a slice per row block and super-block while this one computes
        SlicedPrefetch pf(o.prefetch_next && n + 16 < a.n1 ? next_panels(w, n / 16 + 1, 1) : NextPanels{}, (a.m + 31) / 32 * nsb);
        for (int64_t r0 = 0; r0 < a.m; r0 += 32) {
            const int nt = static_cast<int>(a.m - r0 >= 32 ? 32 : a.m - r0), nh = nt > 16 ? 2 : 1;
            const TileRows A[2] = {tile_rows(act, act_stride, pad, Kp, a.m, r0), tile_rows(act, act_stride, pad, Kp, a.m, r0 + 16)};
            for (int i = 0; i < nt; ++i) {
                x[i] = ref::act_q8_row(const_cast<unsigned char*>(act + (r0 + i) * act_stride), K);
                _mm512_store_ps(acc[i], _mm512_setzero_ps());
            }
            for (int64_t sb = 0; sb < nsb; ++sb) {
                pf.step();
                t.template zero<0>();
                t.template zero<1>();
                if (nh == 2) {
                    t.template zero<2>();
                    t.template zero<3>();
                }
                for (int s = 0; s < 4; ++s) {
                    const int64_t k0 = sb * 256 + 64 * s;  // values k0 .. k0 + 63: quad rows k0 / 4 ..
                    t.template load<6>(bh + k0 * 16, 64);
                    t.template load<7>(bl + k0 * 16, 64);
                    t.template load<4>(A[0].base + k0, A[0].stride);
                    t.template dpbsud<0, 4, 6>();
                    t.template dpbsud<1, 4, 7>();
                    if (nh == 2) {
                        t.template load<5>(A[1].base + k0, A[1].stride);
                        t.template dpbsud<2, 5, 6>();
                        t.template dpbsud<3, 5, 7>();
                    }
                }
                t.template store<0>(cbuf[0], 64);
                t.template store<1>(cbuf[1], 64);
                if (nh == 2) {
                    t.template store<2>(cbuf[2], 64);
                    t.template store<3>(cbuf[3], 64);
                }
                const uint8_t* Sm = pp.sc + sb * kQ4kSbScaleBytes + 128;
                __m512i mp[4];
                for (int k = 0; k < 4; ++k) mp[k] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(Sm + 32 * k)));
                const __m512 d = _mm512_load_ps(wd + sb * 32), dmin = _mm512_load_ps(wd + sb * 32 + 16);
                for (int i = 0; i < nt; ++i) {
                    const int h = i / 16, r = i % 16;
                    const __m512i S = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(cbuf[2 * h][r]), k45_digit<T>()),
                                                      _mm512_load_si512(cbuf[2 * h + 1][r]));
                    __m512i M = _mm512_setzero_si512();
                    for (int k = 0; k < 4; ++k) M = _mm512_dpwssd_epi32(M, mp[k], _mm512_set1_epi32(prs[((r0 + i) * nsb + sb) * 4 + k]));
                    const __m512 dx = _mm512_set1_ps(x[i].dxv[64 * sb]);
                    __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d, dx), _mm512_load_ps(acc[i]));
                    v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(M), _mm512_mul_ps(dmin, dx), v);
                    _mm512_store_ps(acc[i], v);
                }
            }
            const __mmask16 keep = static_cast<__mmask16>((1u << nc) - 1u);
            for (int i = 0; i < nt; ++i) _mm512_mask_storeu_ps(a.y + (r0 + i) * a.ldy + (n - a.n0), keep, _mm512_load_ps(acc[i]));
        }
    }
    t.release();
}

}  // namespace

template <class Tiles>
void panel_gemm_q4k_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    gemm_k45_folded<DType::Q4_K>(t, w, a, o);
}

template <class Tiles>
void panel_gemm_q5k_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    gemm_k45_folded<DType::Q5_K>(t, w, a, o);
}

template <class Tiles>
void panel_gemm_q6k_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    size_t act_stride = 0;
    const unsigned char* act = qmm_activations(a, Isa::Avx512, act_quant(w.type), &act_stride);
    const int64_t K = w.K, nsb = K / 256, Kp = ref::act_q8_padded(K), n_panels = (w.N + 15) / 16;
    // scratch: the tail rows' zero-padded activations [16][Kp], B0, B1, B2 [K / 4][64], wd [nsb][16]
    const size_t pad_b = 16 * static_cast<size_t>(Kp), b_b = static_cast<size_t>(K) * 16, d_b = static_cast<size_t>(nsb) * 64;
    unsigned char* scratch = amx_scratch(pad_b + 3 * b_b + d_b);
    uint8_t* pad = scratch;
    uint8_t* const b[3] = {scratch + pad_b, scratch + pad_b + b_b, scratch + pad_b + 2 * b_b};
    float* wd = reinterpret_cast<float*>(scratch + pad_b + 3 * b_b);
    pad_tail_rows(act, act_stride, a.m, K, Kp, pad);

    t.config(full_tiles());

    alignas(64) int32_t cbuf[3][16][16];
    alignas(64) float acc[16][16];
    ref::ActQ8Row x[16];
    for (int64_t n = a.n0; n < a.n1; n += 16) {
        const int nc = static_cast<int>(a.n1 - n >= 16 ? 16 : a.n1 - n);
        fill_q6k_folded(panel_parts(w.type, K, w.panels, n_panels, n / 16), nsb, b, wd);
        SlicedPrefetch pf(o.prefetch_next && n + 16 < a.n1 ? next_panels(w, n / 16 + 1, 1) : NextPanels{}, (a.m + 15) / 16 * nsb);
        for (int64_t r0 = 0; r0 < a.m; r0 += 16) {
            const int nt = static_cast<int>(a.m - r0 >= 16 ? 16 : a.m - r0);
            const TileRows A = tile_rows(act, act_stride, pad, Kp, a.m, r0);
            for (int i = 0; i < nt; ++i) {
                x[i] = ref::act_q8_row(const_cast<unsigned char*>(act + (r0 + i) * act_stride), K);
                _mm512_store_ps(acc[i], _mm512_setzero_ps());
            }
            for (int64_t sb = 0; sb < nsb; ++sb) {
                pf.step();
                t.template zero<0>();
                t.template zero<1>();
                t.template zero<2>();
                for (int s = 0; s < 4; ++s) {
                    const int64_t k0 = sb * 256 + 64 * s;
                    t.template load<4>(A.base + k0, A.stride);
                    t.template load<6>(b[0] + k0 * 16, 64);
                    t.template load<7>(b[1] + k0 * 16, 64);
                    t.template load<5>(b[2] + k0 * 16, 64);
                    t.template dpbssd<0, 4, 6>();
                    t.template dpbssd<1, 4, 7>();
                    t.template dpbssd<2, 4, 5>();
                }
                t.template store<0>(cbuf[0], 64);
                t.template store<1>(cbuf[1], 64);
                t.template store<2>(cbuf[2], 64);
                const __m512 d = _mm512_load_ps(wd + sb * 16);
                for (int i = 0; i < nt; ++i) {
                    const __m512i S = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(cbuf[2][i]), 6),
                                                                        _mm512_slli_epi32(_mm512_load_si512(cbuf[1][i]), 3)),
                                                       _mm512_load_si512(cbuf[0][i]));
                    const __m512 dx = _mm512_set1_ps(x[i].dxv[64 * sb]);
                    _mm512_store_ps(acc[i], _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d, dx), _mm512_load_ps(acc[i])));
                }
            }
            const __mmask16 keep = static_cast<__mmask16>((1u << nc) - 1u);
            for (int i = 0; i < nt; ++i) _mm512_mask_storeu_ps(a.y + (r0 + i) * a.ldy + (n - a.n0), keep, _mm512_load_ps(acc[i]));
        }
    }
    t.release();
}

#if defined(__x86_64__)
template void panel_gemm_q4k_tiles<amx::AmxTiles>(amx::AmxTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);
template void panel_gemm_q5k_tiles<amx::AmxTiles>(amx::AmxTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);
template void panel_gemm_q6k_tiles<amx::AmxTiles>(amx::AmxTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);
#endif
template void panel_gemm_q4k_tiles<amx::EmuTiles>(amx::EmuTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);
template void panel_gemm_q5k_tiles<amx::EmuTiles>(amx::EmuTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);
template void panel_gemm_q6k_tiles<amx::EmuTiles>(amx::EmuTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);

}  // namespace moe::kernels::panel

#pragma GCC diagnostic pop
MOE_TARGET_POP
