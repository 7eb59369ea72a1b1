// The AMX-INT8 Q8_0, Q4_0, Q5_0 and MXFP4 panel GEMMs: one scale per 32 values and column (f16 d;
// MXFP4: an E8M0 power of two), so every
// block's int32 dot product has to leave the tiles and be scaled on its own (nothing to fold, as
// qmatmul_panel_amx_folded.cpp does for the K-quants' small integer scales). What makes that pay
// (qmatmul_panel_amx.cpp's per-granule kernel with accumulators in memory ran Q8_0 at 0.78-0.86x
// VNNI) is the scaling's cost per block, 3 AVX-512 instructions per token row and 16 columns:
//   acc_i = fma(float(C[i]), d * dx_i, acc_i)   (vcvtdq2ps from the C buffer, vmulps with a
//                                                broadcast dx from memory, vfmadd231ps)
// with the 16 accumulators of a 16-token x 16-column block in registers over the whole K, and no
// per-block offset correction: each panel's levels are made signed once (Q8_0: the stored quads
// q ^ 0x80 flipped back; Q4_0: the nibbles minus 8; Q5_0: the 5-bit levels minus 16; MXFP4: each
// code's level 2 x E2M1) and one TDPBSSD per block gives C = x.q exactly.
// The f32 chain is the VNNI kernel's (acc = fma(float(I), d dx, acc), blocks in K order, from 0),
// so the output bits are panel_gemm_avx512's and the scalar path's (tests/kernels/test_panel_amx.cpp,
// on the emulator everywhere and on real tiles where the CPU has them).
//
// Per call: one tile configuration (C 0..3: 16 x 64 bytes; A 4, 5: 16 token rows x 32 bytes; B 6,
// 7: 8 quad rows x 64 bytes), the activations regrouped into [row block][block][16][32] and their
// scales into [row block][block][16] (block_rows). Per 16-column panel and per 16 token rows, block
// by block: the tile product of block b into C (b % 4) (A and B tiles alternating), stored to one of
// four C buffers, with block b - 1's scaling spread between those tile instructions (BlockPass). On
// a Xeon with AMX (docs/PERFORMANCE.md, session 46) the tile instructions are the bound: spreading
// the scaling gave 1.12-1.17x, making the next panel's signed levels a block per step of the last
// row block (rather than all before the panel) 1.02-1.21x. Column tails compute the panel's zero
// columns and store nc; rows past m are zero. Any K % 32 == 0 (gpt-oss's 2880).
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

#include "kernels/cpu/e8m0_avx512.inc"  // e8m0_half16

// Per call, the activations as the A tiles read them: ablk [row block][block][16 rows][32] int8
// (each tile load 512 contiguous bytes, not 16 rows act_stride apart; rows past m zero) and dxc
// [row block][block][16] f32, row r0 + i's scale of block b at [r0 / 16][b][i] (rows past m: 0), so
// that the scaling broadcasts them from one base.
void block_rows(const unsigned char* act, size_t act_stride, int64_t m, int64_t K, uint8_t* ablk, float* dxc) {
    const int64_t nb = K / 32, nrb = (m + 15) / 16;
    for (int64_t rb = 0; rb < nrb; ++rb)
        for (int i = 0; i < 16; ++i) {
            const int64_t r = rb * 16 + i;
            uint8_t* o = ablk + (rb * nb * 16 + i) * 32;
            float* d = dxc + rb * nb * 16 + i;
            if (r >= m) {
                for (int64_t b = 0; b < nb; ++b) {
                    _mm256_store_si256(reinterpret_cast<__m256i*>(o + b * 512), _mm256_setzero_si256());
                    d[b * 16] = 0.0f;
                }
                continue;
            }
            const unsigned char* x = act + r * act_stride;
            const ref::ActQ8Row xr = ref::act_q8_row(const_cast<unsigned char*>(x), K);
            for (int64_t b = 0; b < nb; ++b) {
                _mm256_store_si256(reinterpret_cast<__m256i*>(o + b * 512), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32 * b)));
                d[b * 16] = xr.dxv[8 * b];  // dxv: one per 4 values
            }
        }
}

// Level and scale bytes per block of a panel (qmatmul_panel_layout.h): the levels of all blocks,
// then the scales (f16 d; MXFP4: E8M0 bytes) [block][16].
template <DType T>
constexpr int block_level_bytes() {
    return T == DType::Q8_0 ? kQ80BlkLevelBytes : T == DType::Q4_0 ? kQ40BlkLevelBytes : T == DType::Q5_0 ? kQ50BlkLevelBytes : kMxfp4BlockLevelBytes;
}

// Block b of a panel's levels as signed int8 in the VNNI layout, 8 quad rows x 64 bytes at out + 512 b:
// Q8_0: the stored quads are q ^ 0x80; Q4_0: nibble vector v of block b (flat 4 b + v) -> quad rows
// 2 v (low nibbles) and 2 v + 1 (high), minus 8; Q5_0: quad 2 v = (vector v & 7) | the side vector's
// bits 2 v, 2 v + 1 at bits 3-4, quad 2 v + 1 = vector v >> 3 (the VNNI fill_q50), minus 16; MXFP4:
// Q4_0's nibble layout holding codes, each mapped to its level 2 x E2M1 (ref::kMxfp4Values) by vpshufb.
template <DType T>
[[gnu::always_inline]] inline void signed_block(const uint8_t* lev, int64_t b, uint8_t* out) {
    out += 512 * b;
    lev += static_cast<size_t>(block_level_bytes<T>()) * b;
    if constexpr (T == DType::Q8_0) {
        const __m512i x80 = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
        for (int v = 0; v < 8; ++v) _mm512_store_si512(out + 64 * v, _mm512_xor_si512(_mm512_loadu_si512(lev + 64 * v), x80));
    } else if constexpr (T == DType::Q5_0) {
        const __m512i m7 = _mm512_set1_epi8(7), m18 = _mm512_set1_epi8(0x18), m1f = _mm512_set1_epi8(0x1F), off = _mm512_set1_epi8(16);
        const __m512i H = _mm512_loadu_si512(lev + 256);
        const __m512i side[4] = {_mm512_slli_epi16(H, 3), _mm512_slli_epi16(H, 1), _mm512_srli_epi16(H, 1), _mm512_srli_epi16(H, 3)};
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
            const __m512i V = _mm512_loadu_si512(lev + 64 * v);
            _mm512_store_si512(out + 128 * v, _mm512_sub_epi8(_mm512_ternarylogic_epi32(_mm512_and_si512(V, m7), side[v], m18, 0xF8), off));
            _mm512_store_si512(out + 128 * v + 64, _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(V, 3), m1f), off));
        }
    } else {
        const __m512i nib = _mm512_set1_epi8(0x0F);
        // Q4_0: level - 8; MXFP4: the code's signed level (2 x E2M1)
        const __m512i map = T == DType::Q4_0 ? _mm512_broadcast_i32x4(_mm_setr_epi8(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7))
                                             : _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
            const __m512i V = _mm512_loadu_si512(lev + 64 * v);
            _mm512_store_si512(out + 128 * v, _mm512_shuffle_epi8(map, _mm512_and_si512(V, nib)));
            _mm512_store_si512(out + 128 * v + 64, _mm512_shuffle_epi8(map, _mm512_and_si512(_mm512_srli_epi16(V, 4), nib)));
        }
    }
}

// Block b's 16 column scales as f32 from the panel's scale region D: f16 d (Q8_0, Q4_0, Q5_0), or
// MXFP4's E8M0 bytes as ref::e8m0_half (e8m0_half16), the same floats the VNNI kernel's fill makes.
template <DType T>
[[gnu::always_inline]] inline __m512 block_scales(const uint8_t* D, int64_t b) {
    if constexpr (T == DType::MXFP4) return e8m0_half16(D + 16 * b);
    else return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(D + 32 * b)));
}

// Rows I0 .. I1 - 1 of one block: acc_i = fma(float(C[i]), d * dx_i, acc_i) (d: the panel's 16 f16
// scales of the block, dx: the 16 rows' scales of the block).
template <int I0, int I1>
[[gnu::always_inline]] inline void scale_rows(__m512 (&acc)[16], const int32_t (*c)[16], __m512 ws, const float* dx) {
#pragma GCC unroll 16
    for (int i = I0; i < I1; ++i)
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[i])), _mm512_mul_ps(ws, _mm512_set1_ps(dx[i])), acc[i]);
}

// One 16-row block's pass over K, block b's tile product in C (b % 4) (A 4 + b % 2, B 6 + b % 2),
// stored to cb[b % 4], with block b - 1's scaling spread between its tile instructions (on a Xeon
// with AMX 1.12-1.17x the same work run as one block after them: docs/PERFORMANCE.md, session 46).
template <DType T, class Tiles>
struct BlockPass {
    Tiles& t;
    const uint8_t* A;  // ablk of the row block
    const uint8_t* B;  // the panel's signed levels
    const uint8_t* D;  // the panel's scales [block][16] (block_scales)
    const float* dx;   // dxc of the row block
    int32_t (*cb)[16][16];
    SlicedPrefetch* pf;  // the next panel's requests (first row block only), else null
    // the next panel's stored levels (last row block only, else null): block b - fill_lag made into
    // fill_dst at step b, the last fill_lag blocks after the pass
    const uint8_t* fill_src;
    uint8_t* fill_dst;
    int64_t fill_lag;
    __m512 acc[16];

    template <int J, bool kScale>
    [[gnu::always_inline]] inline void step(int64_t b) {
        const int32_t(*pc)[16] = cb[(J + 3) & 3];
        const __m512 pd = block_scales<T>(D, b - 1);
        const float* px = dx + 16 * (b - 1);
        t.template load<4 + J % 2>(A + 512 * b, 32);
        if constexpr (kScale) scale_rows<0, 4>(acc, pc, pd, px);
        t.template load<6 + J % 2>(B + 512 * b, 64);
        if constexpr (kScale) scale_rows<4, 8>(acc, pc, pd, px);
        t.template zero<J>();
        t.template dpbssd<J, 4 + J % 2, 6 + J % 2>();
        if constexpr (kScale) scale_rows<8, 12>(acc, pc, pd, px);
        t.template store<J>(cb[J], 64);
        if constexpr (kScale) scale_rows<12, 16>(acc, pc, pd, px);
        if (pf) pf->step();
        if (fill_src && b >= fill_lag) signed_block<T>(fill_src, b - fill_lag, fill_dst);
    }
    [[gnu::always_inline]] inline void run(int64_t nb) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
        step<0, false>(0);
        int64_t b = 1;
        for (; b + 3 < nb; b += 4) {
            step<1, true>(b);
            step<2, true>(b + 1);
            step<3, true>(b + 2);
            step<0, true>(b + 3);
        }
        for (; b < nb; ++b) {
            switch (b & 3) {
                case 0: step<0, true>(b); break;
                case 1: step<1, true>(b); break;
                case 2: step<2, true>(b); break;
                default: step<3, true>(b); break;
            }
        }
        scale_rows<0, 16>(acc, cb[(nb - 1) & 3], block_scales<T>(D, nb - 1), dx + 16 * (nb - 1));
        if (fill_src)
            for (int64_t f = nb - fill_lag < 0 ? 0 : nb - fill_lag; f < nb; ++f) signed_block<T>(fill_src, f, fill_dst);
    }
};

template <DType T, class Tiles>
void gemm_blocks(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    constexpr int kLev = block_level_bytes<T>();
    size_t act_stride = 0;
    const unsigned char* act = qmm_activations(a, Isa::Avx512, act_quant(w.type), &act_stride);
    const int64_t K = w.K, nb = K / 32, n_panels = (w.N + 15) / 16, nrb = (a.m + 15) / 16;
    // scratch: C buffers [4][16][16] int32; two panels' signed levels [K / 4][64] (this one's, the
    // next one's); ablk [nrb][nb][16][32] int8; dxc [nrb][nb][16] f32
    const size_t cb_b = 4 * 1024, lev_b = 2 * static_cast<size_t>(K) * 16, a_b = static_cast<size_t>(nrb * nb) * 512,
                 dx_b = static_cast<size_t>(nrb * nb) * 64;
    unsigned char* scratch = amx_scratch(cb_b + lev_b + a_b + dx_b);
    int32_t(*cb)[16][16] = reinterpret_cast<int32_t(*)[16][16]>(scratch);
    uint8_t* lev = scratch + cb_b;
    uint8_t* ablk = lev + lev_b;
    float* dxc = reinterpret_cast<float*>(ablk + a_b);
    block_rows(act, act_stride, a.m, K, ablk, dxc);

    amx::TileConfig cfg;
    for (int i = 0; i < 4; ++i) cfg.rows[i] = 16, cfg.colsb[i] = 64;
    for (int i = 4; i < 6; ++i) cfg.rows[i] = 16, cfg.colsb[i] = 32;
    for (int i = 6; i < 8; ++i) cfg.rows[i] = 8, cfg.colsb[i] = 64;
    t.config(cfg);

    const uint8_t* first = panel_parts(w.type, K, w.panels, n_panels, a.n0 / 16).lev;
    for (int64_t b = 0; b < nb; ++b) signed_block<T>(first, b, lev);
    for (int64_t n = a.n0; n < a.n1; n += 16) {
        const int nc = static_cast<int>(a.n1 - n >= 16 ? 16 : a.n1 - n);
        const __mmask16 keep = static_cast<__mmask16>((1u << nc) - 1u);
        const PanelParts pp = panel_parts(w.type, K, w.panels, n_panels, n / 16);
        const bool more = n + 16 < a.n1;
        uint8_t* const cur = lev + (((n - a.n0) / 16) & 1) * lev_b / 2;
        uint8_t* const nxt = lev + ((((n - a.n0) / 16) & 1) ^ 1) * lev_b / 2;
        // the next panel: its stored bytes requested a slice per block step of the first row block, its
        // signed levels made a block per step of the last (8 steps behind where that is the first)
        SlicedPrefetch pf(o.prefetch_next && more ? next_panels(w, n / 16 + 1, 1) : NextPanels{}, nb);
        const uint8_t* next_lev = more ? panel_parts(w.type, K, w.panels, n_panels, n / 16 + 1).lev : nullptr;
        for (int64_t rb = 0; rb < nrb; ++rb) {
            BlockPass<T, Tiles> p{t, ablk + rb * nb * 512, cur, pp.lev + static_cast<size_t>(nb) * kLev, dxc + rb * nb * 16, cb,
                                  rb == 0 ? &pf : nullptr, rb == nrb - 1 ? next_lev : nullptr, nxt, nrb == 1 ? 8 : 0, {}};
            p.run(nb);
            const int nt = static_cast<int>(a.m - rb * 16 >= 16 ? 16 : a.m - rb * 16);
            float* y = a.y + rb * 16 * a.ldy + (n - a.n0);
#pragma GCC unroll 16
            for (int i = 0; i < 16; ++i)
                if (i < nt) _mm512_mask_storeu_ps(y + i * a.ldy, keep, p.acc[i]);
        }
    }
    t.release();
}

}  // namespace

template <class Tiles>
void panel_gemm_q80_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    gemm_blocks<DType::Q8_0>(t, w, a, o);
}

template <class Tiles>
void panel_gemm_q40_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    gemm_blocks<DType::Q4_0>(t, w, a, o);
}

template <class Tiles>
void panel_gemm_q50_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    gemm_blocks<DType::Q5_0>(t, w, a, o);
}

template <class Tiles>
void panel_gemm_mxfp4_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    gemm_blocks<DType::MXFP4>(t, w, a, o);
}

#if defined(__x86_64__)
template void panel_gemm_q80_tiles<amx::AmxTiles>(amx::AmxTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);
template void panel_gemm_q40_tiles<amx::AmxTiles>(amx::AmxTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);
template void panel_gemm_q50_tiles<amx::AmxTiles>(amx::AmxTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);
template void panel_gemm_mxfp4_tiles<amx::AmxTiles>(amx::AmxTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);
#endif
template void panel_gemm_q80_tiles<amx::EmuTiles>(amx::EmuTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);
template void panel_gemm_q40_tiles<amx::EmuTiles>(amx::EmuTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);
template void panel_gemm_q50_tiles<amx::EmuTiles>(amx::EmuTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);
template void panel_gemm_mxfp4_tiles<amx::EmuTiles>(amx::EmuTiles&, const PanelMatrix&, const MatmulArgs&, const AmxGemmOptions&);

}  // namespace moe::kernels::panel

#pragma GCC diagnostic pop
MOE_TARGET_POP
