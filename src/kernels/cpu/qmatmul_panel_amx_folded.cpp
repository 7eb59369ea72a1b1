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
// so both operands are uint8 levels for TDPBSUD (activations signed), made per call, panel and
// super-block from the stored nibbles (fill_k45_granule; 4 KB each). The mins' term M = sum_g m_g nsum_g is
// taken by vpdpwssd from the layout's word pairs, as the VNNI kernel does. Then, per super-block, the
// same f32 chain as panel_gemm_avx512 (acc = fma(float(S), d dx, acc); acc = fma(float(M), dmin dx,
// acc)), so the output bits are the VNNI path's (tests/kernels/test_panel_amx.cpp checks them on
// the emulator everywhere and on real tiles where the CPU has them).
//
// Tiles: C0 = A0 . Bh, C1 = A0 . Bl, C2 = A1 . Bh, C3 = A1 . Bl (A0 / A1: tokens r0 .. r0 + 15 /
// r0 + 16 .. r0 + 31 as 16 x 64 bytes, tile 4 / 5; Bh / Bl: 16 quad rows x 64 bytes, tiles 6 / 7),
// 4 TDPBSUD of 64 values per tile step, 4 steps per super-block, one store of each C per
// super-block (against per granule: 8x fewer stores and scalings).
//
// On a Xeon with AMX (docs/PERFORMANCE.md, session 44) AVX-512 work run as one block between tile
// steps leaves the tiles idle, spread between the tile products it partly overlaps them, and B tiles
// load faster from L1 than from L2. So the loops are software-pipelined: each super-block's
// operands sit in one of two small buffers, and the next super-block's are made, and the previous
// step's f32 chain runs, a few rows at a time between this step's tile products (gemm_k45_folded).
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

#include <algorithm>
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

#include "kernels/cpu/q4k_scales_avx512.inc"  // q4k_scales_unpack, q4k_scales_g

// Q4_K / Q5_K: the low digit's bits of the folded scale sc_g = 2^kDigit h_g + l_g, so that every
// level x digit fits uint8 (Q4_K: q < 16, h < 4, l < 16: <= 225; Q5_K: q < 32, h, l < 8: <= 217).
template <DType T>
constexpr int k45_digit() {
    return T == DType::Q5_K ? 3 : 4;
}

// Bytes q * s where both bytes of every 16-bit word share s (s_word: each word = s): one vpmullw,
// exact while every product < 256 (nothing carries into the high byte). Holds for the folded
// operands because a quad row's bytes 4 c .. 4 c + 3 are all column c's, so a word never spans
// two columns' digits.
inline __m512i mul_u8_word(__m512i q, __m512i s_word) { return _mm512_mullo_epi16(q, s_word); }

// Q4_K / Q5_K super-block sb of panel pp, granule g -> Bh, Bl (the super-block's operands, 64 quad
// rows x 64 bytes each): quad row r = 8 g + 2 v (+ 1), the levels of values 32 g + 8 v .. + 3
// (+ 4 .. + 7) times the scale's high (low) digit h_g (l_g) of each column (bytes 4 c .. 4 c + 3 =
// column c; sc_g = 2^kDigit h_g + l_g: Q4_K 16, Q5_K 8). Levels: Q4_K the low (high) nibbles of stored
// vector v; Q5_K (vector v & 7) | side bits 2 v, 2 v + 1 at bits 3-4 (v >> 3), as the VNNI fill_q5k.
template <DType T>
inline void fill_k45_granule(const PanelParts& pp, int64_t sb, int g, uint8_t* bh, uint8_t* bl) {
    constexpr bool kQ5 = T == DType::Q5_K;
    constexpr int kLev = kQ5 ? kQ5kSbLevelBytes : kQ4kSbLevelBytes;
    static_assert(kQ5kSbScaleBytes == kQ4kSbScaleBytes && kQ5kSbDBytes == kQ4kSbDBytes, "Q5_K's scale and d regions are Q4_K's");
    const __m512i nib = _mm512_set1_epi8(0x0F), dig = _mm512_set1_epi32((1 << k45_digit<T>()) - 1), m7 = _mm512_set1_epi8(7),
                  m18 = _mm512_set1_epi8(0x18), m1f = _mm512_set1_epi8(0x1F);
    const uint8_t* L = pp.lev + sb * kLev;
    // sc_g (< 64) of the 16 columns, one per dword; its digits in both 16-bit words of the column's dword
    const __m512i sc = _mm512_cvtepu8_epi32(q4k_scales_g(pp.sc + sb * kQ4kSbScaleBytes, g));
    const __m512i l = _mm512_and_si512(sc, dig), h = _mm512_srli_epi32(sc, k45_digit<T>());
    const __m512i lw = _mm512_or_si512(l, _mm512_slli_epi32(l, 16)), hw = _mm512_or_si512(h, _mm512_slli_epi32(h, 16));
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
        const size_t r = static_cast<size_t>(8 * g + 2 * v) * 64;
        _mm512_store_si512(bh + r, mul_u8_word(q0, hw));
        _mm512_store_si512(bh + r + 64, mul_u8_word(q1, hw));
        _mm512_store_si512(bl + r, mul_u8_word(q0, lw));
        _mm512_store_si512(bl + r + 64, mul_u8_word(q1, lw));
    }
}

// Q6_K super-block sb of panel pp, quad rows 8 o .. 8 o + 7 -> B0, B1, B2 (the super-block's
// operands, 64 quad rows x 64 bytes each): quad row 8 o + qi (values 32 o + 4 qi .. + 3 of the
// super-block, granule 2 o + qi / 4) = (level - 32) times digit i of the granule's scale per column.
// One vpmullw per digit (mul_u8_word): the level q (0 .. 63) times |digit| (<= 4: <= 252, no carry),
// with q -> 63 - q in the columns whose digit is negative ((q - 32) digit = (63 - q) |digit| - 31
// |digit| there, q |digit| - 32 |digit| elsewhere); bytewise mod 256 that is (q - 32) digit, which
// fits int8.
inline void fill_q6k_rows(const PanelParts& pp, int64_t sb, int o, uint8_t* const b[3]) {
    const __m512i nib = _mm512_set1_epi8(0x0F), three = _mm512_set1_epi8(3), d3 = _mm512_set1_epi32(3), d7 = _mm512_set1_epi32(7),
                  m63 = _mm512_set1_epi32(63);
    // vpshufb patterns: each dword's byte 0 to its 4 bytes (b4), to the low byte of both its words (w2)
    const __m512i b4 = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12)),
                  w2 = _mm512_broadcast_i32x4(_mm_setr_epi8(0, -128, 0, -128, 4, -128, 4, -128, 8, -128, 8, -128, 12, -128, 12, -128));
    const uint8_t* L = pp.lev + sb * kQ6kSbLevelBytes;
    for (int j = 0; j < 2; ++j) {
        // granule 2 o + j, digit i: |digit| per word; per byte 63 where the digit is negative (q -> 63 - q,
        // so (q - 32) digit = (63 - q) |digit| - 31 |digit|), else 0; and the subtrahend 31 or 32 x |digit|
        __m512i aw[3], fx[3], sub[3];
        __m512i r = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pp.sc + sb * kQ6kSbScaleBytes + 16 * (2 * o + j))));
        for (int i = 0; i < 3; ++i) {
            const __m512i dg = _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(r, d3), d7), d3);  // in -3 .. 4
            r = _mm512_srai_epi32(_mm512_sub_epi32(r, dg), 3);                                    // exact
            const __m512i ad = _mm512_abs_epi32(dg), ng = _mm512_srai_epi32(dg, 31);            // ng: -1 where negative
            aw[i] = _mm512_shuffle_epi8(ad, w2);
            fx[i] = _mm512_shuffle_epi8(_mm512_and_si512(ng, m63), b4);
            sub[i] = _mm512_shuffle_epi8(_mm512_sub_epi32(_mm512_slli_epi32(ad, 5), _mm512_and_si512(ng, ad)), b4);
        }
        for (int qi = 4 * j; qi < 4 * j + 4; ++qi) {
            const __m512i V = _mm512_loadu_si512(L + q6k_nib_at(o, qi / 2)), H = _mm512_loadu_si512(L + q6k_top_at(o, qi / 4));
            const __m512i lo = _mm512_and_si512(qi % 2 ? _mm512_srli_epi16(V, 4) : V, nib);
            const __m512i q = _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(H, 2 * (qi % 4)), three), 4));
            const size_t row = static_cast<size_t>(8 * o + qi) * 64;
            for (int i = 0; i < 3; ++i)
                _mm512_store_si512(b[i] + row, _mm512_sub_epi8(mul_u8_word(_mm512_xor_si512(q, fx[i]), aw[i]), sub[i]));
        }
    }
}

// Every tile 16 rows x 64 bytes (the folded kernels' only shape).
amx::TileConfig full_tiles() {
    amx::TileConfig cfg;
    for (int i = 0; i < 8; ++i) cfg.rows[i] = 16, cfg.colsb[i] = 64;
    return cfg;
}

// dxs [m][nsb]: each activation row's scale at super-block sb (its chain's dx), once per call.
inline void rows_dx(const unsigned char* act, size_t act_stride, int64_t m, int64_t K, float* dxs) {
    const int64_t nsb = K / 256;
    for (int64_t r = 0; r < m; ++r) {
        const ref::ActQ8Row xr = ref::act_q8_row(const_cast<unsigned char*>(act + r * act_stride), K);
        for (int64_t sb = 0; sb < nsb; ++sb) dxs[r * nsb + sb] = xr.dxv[64 * sb];
    }
}

// The next super-block's 8 operand units (granules; Q6_K: groups of 8 quad rows) made during tile
// step j of `steps`: units [first, last).
struct StepUnits {
    int64_t first, last;
};
inline StepUnits step_units(int64_t j, int64_t steps) { return {8 * j / steps, 8 * (j + 1) / steps}; }

// acc [m][16] -> columns n .. n + nc - 1 of y (nc <= 16).
inline void store_panel(const float* acc, const MatmulArgs& a, int64_t n, int nc) {
    const __mmask16 keep = static_cast<__mmask16>((1u << nc) - 1u);
    for (int64_t i = 0; i < a.m; ++i) _mm512_mask_storeu_ps(a.y + i * a.ldy + (n - a.n0), keep, _mm512_load_ps(acc + i * 16));
}

// One (super-block, row block) step's int32 sums waiting in cbuf for their f32 chain, and what scales
// them (the panel's d, dmin and mins of that super-block, in registers: the operand buffers they
// came from are refilled meanwhile).
struct K45Pending {
    const int32_t (*cb)[16][16] = nullptr;  // [4][16][16]: C0 .. C3
    int64_t r0 = 0, sb = 0;
    int nt = 0;
    __m512 d, dmin;
    __m512i mp[4];
};

// Rows i0 .. i1 - 1 (of p.nt) of a pending step: S = 2^kDigit C_h + C_l and the mins' term M, then
// acc = fma(float(S), d dx, acc); acc = fma(float(M), dmin dx, acc), the VNNI kernel's chain.
template <DType T>
inline void k45_chain_rows(const K45Pending& p, int i0, int i1, const int32_t* prs, const float* dxs, int64_t nsb, float* acc) {
    // Pointers stepped per row (no per-row index arithmetic: the scalar work shares ports with the
    // chain); rows i0 .. i1 - 1 may span both 16-row halves of the step.
    const size_t u0 = static_cast<size_t>(i0), u1 = static_cast<size_t>(i1);
    const int32_t* pr = prs + (static_cast<size_t>(p.r0 + i0) * static_cast<size_t>(nsb) + static_cast<size_t>(p.sb)) * 4;
    const float* dx = dxs + static_cast<size_t>(p.r0 + i0) * static_cast<size_t>(nsb) + static_cast<size_t>(p.sb);
    float* ar = acc + static_cast<size_t>(p.r0 + i0) * 16;
    const size_t pr_step = static_cast<size_t>(nsb) * 4, dx_step = static_cast<size_t>(nsb);
    for (size_t i = u0; i < u1;) {
        const size_t h = i / 16, e = std::min(u1, 16 * h + 16);
        const int32_t* ch = p.cb[2 * h][i % 16];
        const int32_t* cl = p.cb[2 * h + 1][i % 16];
        for (; i < e; ++i, ch += 16, cl += 16, pr += pr_step, dx += dx_step, ar += 16) {
            const __m512i S = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(ch), k45_digit<T>()), _mm512_load_si512(cl));
            __m512i M = _mm512_setzero_si512();
            for (int k = 0; k < 4; ++k) M = _mm512_dpwssd_epi32(M, p.mp[k], _mm512_set1_epi32(pr[k]));
            const __m512 vdx = _mm512_set1_ps(*dx);
            __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(p.d, vdx), _mm512_load_ps(ar));
            v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(M), _mm512_mul_ps(p.dmin, vdx), v);
            _mm512_store_ps(ar, v);
        }
    }
}

// Q4_K / Q5_K (T): S = 2^kDigit x.Bh + x.Bl and the mins' term per super-block (the header comment).
// Per panel, super-block by super-block, every 32-row block in turn. The loop is software-pipelined
// in program order, because on a Xeon with AMX (docs/PERFORMANCE.md, session 44) the tiles idle
// while a block of AVX-512 work runs between tile steps:
// - the super-block's operands (8 KB) live in one of two L1-sized buffers; the next super-block's
//   are made a granule or two at a time between this one's tile steps (tile loads from L1 instead
//   of a 64 KB per-panel buffer);
// - a step's f32 chain runs 8 rows at a time between the next step's tile products (it has read the
//   C buffer before that step stores its tiles there).
// The order of every row's f32 chain over the super-blocks is unchanged, so are the bits.
template <DType T, class Tiles>
void gemm_k45_folded(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    size_t act_stride = 0;
    const unsigned char* act = qmm_activations(a, Isa::Avx512, act_quant(w.type), &act_stride);
    const int64_t K = w.K, nsb = K / 256, Kp = ref::act_q8_padded(K), n_panels = (w.N + 15) / 16;
    const int64_t nrb = (a.m + 31) / 32, steps = nrb * 4;
    // scratch: the tail rows' zero-padded activations [16][Kp]; two super-block operand buffers
    // (Bh, Bl [64][64] and d, dmin [32] f32 each); the C buffer [4][16][16] int32 (a step's chain
    // has read it all before the next step stores); acc [m][16] f32; the rows' mins pairs
    // [m][nsb][4] int32 and dx [m][nsb] f32
    constexpr size_t kOp = 2 * 4096 + 128, kCb = 4 * 16 * 16 * 4;
    const size_t pad_b = 16 * static_cast<size_t>(Kp), m = static_cast<size_t>(a.m), ns = static_cast<size_t>(nsb);
    unsigned char* scratch = amx_scratch(pad_b + 2 * kOp + kCb + m * 64 + m * ns * 16 + (m * ns * 4 + 63) / 64 * 64);
    uint8_t* pad = scratch;
    uint8_t* ops = scratch + pad_b;
    int32_t(*cb)[16][16] = reinterpret_cast<int32_t(*)[16][16]>(ops + 2 * kOp);
    float* acc = reinterpret_cast<float*>(ops + 2 * kOp + kCb);
    int32_t* prs = reinterpret_cast<int32_t*>(acc + m * 16);
    float* dxs = reinterpret_cast<float*>(prs + m * ns * 4);
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
    rows_dx(act, act_stride, a.m, K, dxs);
    const auto op_bh = [&](int64_t sb) { return ops + (sb & 1) * kOp; };
    const auto op_wd = [&](int64_t sb) { return reinterpret_cast<float*>(ops + (sb & 1) * kOp + 8192); };
    const auto fill_d = [&](const PanelParts& pp, int64_t sb) {
        const uint8_t* D = pp.d + sb * kQ4kSbDBytes;
        float* wd = op_wd(sb);
        _mm512_store_ps(wd, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D))));
        _mm512_store_ps(wd + 16, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D + 32))));
    };

    t.config(full_tiles());

    for (int64_t n = a.n0; n < a.n1; n += 16) {
        const int nc = static_cast<int>(a.n1 - n >= 16 ? 16 : a.n1 - n);
        const PanelParts pp = panel_parts(w.type, K, w.panels, n_panels, n / 16);
        for (int g = 0; g < 8; ++g) fill_k45_granule<T>(pp, 0, g, op_bh(0), op_bh(0) + 4096);
        fill_d(pp, 0);
        for (size_t i = 0; i < m * 16; i += 16) _mm512_store_ps(acc + i, _mm512_setzero_ps());
        // the next panel, a slice per row block and super-block while this one computes
        SlicedPrefetch pf(o.prefetch_next && n + 16 < a.n1 ? next_panels(w, n / 16 + 1, 1) : NextPanels{}, nrb * nsb);
        K45Pending pend;
        for (int64_t sb = 0; sb < nsb; ++sb) {
            const uint8_t* bh = op_bh(sb);
            const uint8_t* bl = bh + 4096;
            uint8_t* nbh = op_bh(sb + 1);
            const bool fill_next = sb + 1 < nsb;
            if (fill_next) fill_d(pp, sb + 1);
            const float* wd = op_wd(sb);
            const __m512 d = _mm512_load_ps(wd), dmin = _mm512_load_ps(wd + 16);
            alignas(64) uint8_t su[kQ4kScalesUnpacked];
            q4k_scales_unpack(pp.sc + sb * kQ4kSbScaleBytes, su);
            const uint8_t* Sm = su + 128;
            __m512i mp[4];
            for (int k = 0; k < 4; ++k) mp[k] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(Sm + 32 * k)));
            for (int64_t rb = 0; rb < nrb; ++rb) {
                pf.step();
                const int64_t r0 = rb * 32;
                const int nt = static_cast<int>(a.m - r0 >= 32 ? 32 : a.m - r0), nh = nt > 16 ? 2 : 1;
                const TileRows A[2] = {tile_rows(act, act_stride, pad, Kp, a.m, r0), tile_rows(act, act_stride, pad, Kp, a.m, r0 + 16)};
                t.template zero<0>();
                t.template zero<1>();
                if (nh == 2) {
                    t.template zero<2>();
                    t.template zero<3>();
                }
                for (int s = 0; s < 4; ++s) {
                    const int64_t k0 = 64 * s;  // values sb * 256 + k0 .. + 63: the buffer's quad rows k0 / 4 ..
                    t.template load<6>(bh + k0 * 16, 64);
                    t.template load<7>(bl + k0 * 16, 64);
                    t.template load<4>(A[0].base + sb * 256 + k0, A[0].stride);
                    t.template dpbsud<0, 4, 6>();
                    t.template dpbsud<1, 4, 7>();
                    if (nh == 2) {
                        t.template load<5>(A[1].base + sb * 256 + k0, A[1].stride);
                        t.template dpbsud<2, 5, 6>();
                        t.template dpbsud<3, 5, 7>();
                    }
                    // the previous step's f32 chain, 8 rows, and the next super-block's granules
                    // 8 j / steps .. 8 (j + 1) / steps - 1 (j: this tile step of the super-block)
                    if (pend.cb) k45_chain_rows<T>(pend, std::min(8 * s, pend.nt), std::min(8 * s + 8, pend.nt), prs, dxs, nsb, acc);
                    if (fill_next)
                        for (auto [g, g1] = step_units(rb * 4 + s, steps); g < g1; ++g)
                            fill_k45_granule<T>(pp, sb + 1, static_cast<int>(g), nbh, nbh + 4096);
                }
                t.template store<0>(cb[0], 64);
                t.template store<1>(cb[1], 64);
                if (nh == 2) {
                    t.template store<2>(cb[2], 64);
                    t.template store<3>(cb[3], 64);
                }
                pend.cb = cb, pend.r0 = r0, pend.sb = sb, pend.nt = nt, pend.d = d, pend.dmin = dmin;
                for (int k = 0; k < 4; ++k) pend.mp[k] = mp[k];
            }
        }
        k45_chain_rows<T>(pend, 0, pend.nt, prs, dxs, nsb, acc);
        store_panel(acc, a, n, nc);
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

// Q6_K: S = 64 x.B2 + 8 x.B1 + x.B0 per super-block (the header comment), 16-row blocks (three C,
// one A and three B tiles), software-pipelined as the Q4_K / Q5_K loop (gemm_k45_folded): the
// super-block's operands (12 KB) in one of two buffers, the next one's made between tile steps, and
// each step's f32 chain run 4 rows at a time between the next step's tile products.
template <class Tiles>
void panel_gemm_q6k_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    size_t act_stride = 0;
    const unsigned char* act = qmm_activations(a, Isa::Avx512, act_quant(w.type), &act_stride);
    const int64_t K = w.K, nsb = K / 256, Kp = ref::act_q8_padded(K), n_panels = (w.N + 15) / 16;
    const int64_t nrb = (a.m + 15) / 16, steps = nrb * 4;
    // scratch: the tail rows' zero-padded activations [16][Kp]; two super-block operand buffers
    // (B0, B1, B2 [64][64] and d [16] f32 each); the C buffer [3][16][16] int32; acc [m][16] f32;
    // dx [m][nsb] f32
    constexpr size_t kOp = 3 * 4096 + 64, kCb = 3 * 16 * 16 * 4;
    const size_t pad_b = 16 * static_cast<size_t>(Kp), m = static_cast<size_t>(a.m), ns = static_cast<size_t>(nsb);
    unsigned char* scratch = amx_scratch(pad_b + 2 * kOp + kCb + m * 64 + (m * ns * 4 + 63) / 64 * 64);
    uint8_t* pad = scratch;
    uint8_t* ops = scratch + pad_b;
    int32_t(*cb)[16][16] = reinterpret_cast<int32_t(*)[16][16]>(ops + 2 * kOp);
    float* acc = reinterpret_cast<float*>(ops + 2 * kOp + kCb);
    float* dxs = acc + m * 16;
    pad_tail_rows(act, act_stride, a.m, K, Kp, pad);
    rows_dx(act, act_stride, a.m, K, dxs);
    const auto op_b = [&](int64_t sb, int i) { return ops + (sb & 1) * kOp + i * 4096; };
    const auto op_wd = [&](int64_t sb) { return reinterpret_cast<float*>(ops + (sb & 1) * kOp + 3 * 4096); };
    const auto fill_d = [&](const PanelParts& pp, int64_t sb) {
        _mm512_store_ps(op_wd(sb), _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pp.d + sb * kQ6kSbDBytes))));
    };

    t.config(full_tiles());

    for (int64_t n = a.n0; n < a.n1; n += 16) {
        const int nc = static_cast<int>(a.n1 - n >= 16 ? 16 : a.n1 - n);
        const PanelParts pp = panel_parts(w.type, K, w.panels, n_panels, n / 16);
        {
            uint8_t* const b0[3] = {op_b(0, 0), op_b(0, 1), op_b(0, 2)};
            for (int oo = 0; oo < 8; ++oo) fill_q6k_rows(pp, 0, oo, b0);
            fill_d(pp, 0);
        }
        for (size_t i = 0; i < m * 16; i += 16) _mm512_store_ps(acc + i, _mm512_setzero_ps());
        SlicedPrefetch pf(o.prefetch_next && n + 16 < a.n1 ? next_panels(w, n / 16 + 1, 1) : NextPanels{}, nrb * nsb);
        // the pending step: its C buffer, rows and super-block's d
        const int32_t(*pcb)[16][16] = nullptr;
        int64_t pr0 = 0, psb = 0;
        int pnt = 0;
        __m512 pd = _mm512_setzero_ps();
        const auto chain_rows = [&](int i0, int i1) {
            for (int i = i0; i < i1; ++i) {
                const int64_t row = pr0 + i;
                const __m512i S = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(pcb[2][i]), 6),
                                                                    _mm512_slli_epi32(_mm512_load_si512(pcb[1][i]), 3)),
                                                   _mm512_load_si512(pcb[0][i]));
                const __m512 dx = _mm512_set1_ps(dxs[row * nsb + psb]);
                float* ar = acc + row * 16;
                _mm512_store_ps(ar, _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(pd, dx), _mm512_load_ps(ar)));
            }
        };
        for (int64_t sb = 0; sb < nsb; ++sb) {
            const uint8_t *b0 = op_b(sb, 0), *b1 = op_b(sb, 1), *b2 = op_b(sb, 2);
            uint8_t* const nb[3] = {op_b(sb + 1, 0), op_b(sb + 1, 1), op_b(sb + 1, 2)};
            const bool fill_next = sb + 1 < nsb;
            if (fill_next) fill_d(pp, sb + 1);
            const __m512 d = _mm512_load_ps(op_wd(sb));
            for (int64_t rb = 0; rb < nrb; ++rb) {
                pf.step();
                const int64_t r0 = rb * 16;
                const int nt = static_cast<int>(a.m - r0 >= 16 ? 16 : a.m - r0);
                const TileRows A = tile_rows(act, act_stride, pad, Kp, a.m, r0);
                t.template zero<0>();
                t.template zero<1>();
                t.template zero<2>();
                for (int s = 0; s < 4; ++s) {
                    const int64_t k0 = 64 * s;
                    t.template load<4>(A.base + sb * 256 + k0, A.stride);
                    t.template load<6>(b0 + k0 * 16, 64);
                    t.template load<7>(b1 + k0 * 16, 64);
                    t.template load<5>(b2 + k0 * 16, 64);
                    t.template dpbssd<0, 4, 6>();
                    t.template dpbssd<1, 4, 7>();
                    t.template dpbssd<2, 4, 5>();
                    if (pcb) chain_rows(std::min(4 * s, pnt), std::min(4 * s + 4, pnt));
                    if (fill_next)
                        for (auto [u, u1] = step_units(rb * 4 + s, steps); u < u1; ++u) fill_q6k_rows(pp, sb + 1, static_cast<int>(u), nb);
                }
                t.template store<0>(cb[0], 64);
                t.template store<1>(cb[1], 64);
                t.template store<2>(cb[2], 64);
                pcb = cb, pr0 = r0, psb = sb, pnt = nt, pd = d;
            }
        }
        chain_rows(0, pnt);
        store_panel(acc, a, n, nc);
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
