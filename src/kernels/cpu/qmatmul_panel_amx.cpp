// AMX-INT8 prefill GEMM over the Q8_0, Q4_0, Q5_0, MXFP4, Q4_K, Q5_K, Q6_K, Q3_K and Q2_K panel layouts
// (qmatmul_panel_layout.h), issue 15: on Sapphire Rapids and later one TDPBSUD multiplies 16 tokens
// x 16 columns x 64 values (16384 int8 products per instruction, against 64 per vpdpbusd), for the
// prefill of a repacked expert stack (--repack-experts) and of repacked dense projections (--repack).
//
// One template, panel_gemm_tiles<Tiles>, over the tile policies of amx_tiles.h: AmxTiles (the
// intrinsics) and EmuTiles (a scalar emulator of the same instructions). Q4_K, Q5_K and Q6_K run
// their own kernels with the granule scales folded into the tile operands
// (qmatmul_panel_amx_folded.cpp: one tile store per super-block, not per granule); Q8_0, Q4_0, Q5_0
// and MXFP4 theirs with signed levels and register accumulators (qmatmul_panel_amx_blocks.cpp). Q3_K and Q2_K
// (the first AMX kernel, gemm_tiles below, only with MOE_FORCE_ISA=amx), per call: one tile
// configuration (released at the end; it is per thread), then per pair of 16-column panels (n, n + 16)
// and per group of up to 32 tokens, for each 16-value granule g:
//   tiles 4, 5   A: 16 token rows x 16 bytes  int8 activations (ActQ8Row::qs, act_stride apart)
//   tiles 6, 7   B: 4 rows x 64 bytes          uint8 levels of 16 columns in the panels' VNNI
//                layout (byte 4c + i of row k = the level of column c at value 4k + i), unpacked
//                per call from the bit fields into a buffer (fill_k23)
//   tiles 0..3   C: 16 tokens x 16 columns int32, C[2h + j] = token group h x panel j,
//                zeroed, one TDPBSUD (A signed, B unsigned), stored
// so C holds exactly the dot products vpdpbusd accumulates in granule_isums (qmatmul_avx512.h).
// Then, as rows_block: I = C - 2^kShift x the activation granule sum (the level offset, Q3_K), S =
// sum_g sc_g I_g per super-block in int32, acc = fma(float(S), d * dx, acc), then the mins' term
// (Q2_K), so the output bits equal panel_gemm_avx512's (and the scalar path's) whatever m or the
// columns.
// Token groups of fewer than 16 rows read a zero-padded copy of their rows (one per call); column
// tails (nc < 16) compute the panel's zero columns and store only nc.
//
// What is verified where (tests/kernels/test_panel_amx.cpp): the EmuTiles instantiation against
// panel_gemm_avx512 and the scalar kernel, bit for bit, on every machine with AVX-512 VNNI (layout,
// signedness, offsets, scales, tails); the emulator's instructions against plain loops. The
// AmxTiles instantiation (the mapping to the real instructions) runs in the same tests only on a
// CPU with AMX whose kernel grants the tile permission; elsewhere the tests say it is absent.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_amx.h"
#include "kernels/cpu/qmatmul_panel_amx_folded.h"
#include "kernels/cpu/qmatmul_panel_gemm.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/quantize_act.h"
#include "kernels/cpu/isa_target.h"

namespace moe::kernels::panel {

// Outside the AVX-512 pragma so that std::vector's code stays portable.
unsigned char* amx_scratch(size_t bytes) {
    thread_local std::vector<unsigned char> buf;
    if (buf.size() < bytes + 64) buf.resize(bytes + 64);
    return reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
}

bool panel_amx_default(DType t) {
    return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K || t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q5_0 ||
           t == DType::MXFP4;
}

int64_t panel_amx_min_rows(DType t) {
    if (t == DType::Q4_K) return 12;
    if (t == DType::Q5_K) return 10;
    if (t == DType::Q6_K) return 24;
    if (t == DType::Q8_0) return 10;
    if (t == DType::Q4_0) return 12;
    if (t == DType::Q5_0) return 8;
    if (t == DType::MXFP4) return 10;
    return 1;  // the MOE_FORCE_ISA=amx types: on tiles whenever forced
}

bool panel_amx_supported(DType t) {
    return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K || t == DType::Q3_K ||
           t == DType::Q2_K || t == DType::Q5_0 || t == DType::MXFP4;
}

}  // namespace moe::kernels::panel

// AVX-512 for the f32 chain and the fills; AMX so that AmxTiles' methods inline (the compiler never
// emits tile instructions of its own: only AmxTiles' run, and only where amx_usable()).
MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2,bmi2,amx-tile,amx-int8")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 false positive in _mm512_cvtph_ps, as qmatmul_panel_gemm.cpp
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace moe::kernels::panel {

namespace {

using amx::TileConfig;

// Per type: granule kG (values per integer sum), level offset 2^kShift (kShift < 0: none) and a min
// term per granule (kMin: Q2_K per 16); both chain S = sum_g sc_g I_g per super-block.
struct AmxQ3K {
    static constexpr int kG = 16, kShift = 2;
    static constexpr bool kMin = false;
};
struct AmxQ2K {
    static constexpr int kG = 16, kShift = -1;
    static constexpr bool kMin = true;
};

// One panel's operands for the kernel: the B quads [K/4][64] (uint8 levels, VNNI layout), ws
// [K/kG][16] int32 granule scales, wm [K/kG][16] int32 mins, wd [K/256][2][16] f32 d, dmin.
struct Fill {
    const uint8_t* q;
    uint8_t* qbuf;
    float* ws;
    int32_t* wm;
    float* wd;
};

inline void f16x16(const uint8_t* p, float* out) {
    _mm512_store_ps(out, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
}

// Q3_K / Q2_K: quad qi of octet o from its bit fields (kQ3kPanelBits; Q2_K: bits 2 (qi % 4) of
// vector qi / 4); ws the scales of granules 2o, 2o + 1 (Q3_K sc - 32 from its packed region, Q2_K
// sc), Q2_K wm m;
// wd d (Q2_K and dmin).
template <bool kQ3>
void fill_k23(const PanelParts& pp, int64_t nsb, Fill& f) {
    const uint8_t* P = pp.lev;
    constexpr int kLev = kQ3 ? kQ3kSbLevelBytes : kQ2kSbLevelBytes, kSc = kQ3 ? kQ3kSbScaleBytes : kQ2kSbScaleBytes,
                  kD = kQ3 ? kQ3kSbDBytes : kQ2kSbDBytes, kOctet = kLev / 8;
    const uint8_t* S0 = pp.sc;  // Q3_K and Q2_K are region-major (qmatmul_panel_layout.h)
    const uint8_t* D0 = pp.d;
    int32_t* ws = reinterpret_cast<int32_t*>(f.ws);
    for (int64_t sb = 0; sb < nsb; ++sb) {
        for (int o = 0; o < 8; ++o) {
            const uint8_t* L = P + sb * kLev + kOctet * o;
            for (int qi = 0; qi < 8; ++qi) {
                uint8_t* q = f.qbuf + (sb * 64 + 8 * o + qi) * 64;
                for (int p = 0; p < 64; ++p) {
                    if constexpr (kQ3) {
                        int lev = 0;
                        for (int b = 0; b < 3; ++b) lev |= ((L[64 * kQ3kPanelBits[qi][b].vec + p] >> kQ3kPanelBits[qi][b].bit) & 1) << b;
                        q[p] = static_cast<uint8_t>(lev);
                    } else {
                        q[p] = static_cast<uint8_t>((L[64 * (qi / 4) + p] >> (2 * (qi % 4))) & 3);
                    }
                }
            }
            for (int j = 0; j < 2; ++j)
                for (int c = 0; c < 16; ++c) {
                    const int64_t at = (sb * 16 + 2 * o + j) * 16 + c;
                    if constexpr (kQ3) {
                        ws[at] = q4k_scale_get(S0 + sb * kSc, q3k_sc_at(2 * o + j, c)) - 32;
                    } else {
                        const uint8_t s = S0[sb * kSc + 32 * o + 2 * c + j];
                        ws[at] = s & 0x0F;
                        f.wm[at] = s >> 4;
                    }
                }
        }
        f16x16(D0 + sb * kD, f.wd + sb * 32);
        if constexpr (kQ3) _mm512_store_ps(f.wd + sb * 32 + 16, _mm512_setzero_ps());
        else f16x16(D0 + sb * kD + 32, f.wd + sb * 32 + 16);
    }
}

// One granule's tile products: C[2h + j] = A[h] . B[j] for the nh token groups and np panels.
template <class Tiles>
[[gnu::always_inline]] inline void granule_tiles(Tiles& t, const uint8_t* const* A, const size_t* as, const uint8_t* const* B, int nh,
                                                 int np, int32_t (*cbuf)[16][16]) {
    t.template load<6>(B[0], 64);
    if (np == 2) t.template load<7>(B[1], 64);
    t.template load<4>(A[0], as[0]);
    t.template zero<0>();
    t.template dpbsud<0, 4, 6>();
    t.template store<0>(cbuf[0], 64);
    if (np == 2) {
        t.template zero<1>();
        t.template dpbsud<1, 4, 7>();
        t.template store<1>(cbuf[1], 64);
    }
    if (nh == 2) {
        t.template load<5>(A[1], as[1]);
        t.template zero<2>();
        t.template dpbsud<2, 5, 6>();
        t.template store<2>(cbuf[2], 64);
        if (np == 2) {
            t.template zero<3>();
            t.template dpbsud<3, 5, 7>();
            t.template store<3>(cbuf[3], 64);
        }
    }
}

template <class D, class Tiles>
void gemm_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, void (*fill)(const PanelParts&, int64_t, Fill&)) {
    constexpr int kG = D::kG, kGps = 256 / kG;  // granules per super-block
    size_t act_stride = 0;
    const unsigned char* act = qmm_activations(a, Isa::Avx512, act_quant(w.type), &act_stride);
    // nsb: super-blocks of kGps granules (the K-quants' K is a multiple of 256); fill's count is
    // K / panel_k_step
    const int64_t K = w.K, nsb = K / 256, ng = K / kG, Kp = ref::act_q8_padded(K), nstep = K / panel_k_step(w.type);
    // scratch: the tail rows' zero-padded activations [16][Kp], then per panel quads, ws, wm, wd
    const size_t pad_b = 16 * static_cast<size_t>(Kp), q_b = static_cast<size_t>(K) * 16, s_b = static_cast<size_t>(ng) * 64,
                 d_b = static_cast<size_t>(nsb) * 128, fill_b = q_b + 2 * s_b + d_b;
    unsigned char* scratch = amx_scratch(pad_b + 2 * fill_b);
    uint8_t* pad = scratch;
    Fill f[2];
    for (int j = 0; j < 2; ++j) {
        unsigned char* b = scratch + pad_b + j * fill_b;
        f[j] = Fill{b, b, reinterpret_cast<float*>(b + q_b), reinterpret_cast<int32_t*>(b + q_b + s_b),
                    reinterpret_cast<float*>(b + q_b + 2 * s_b)};
    }
    pad_tail_rows(act, act_stride, a.m, K, Kp, pad);

    TileConfig cfg;
    for (int i = 0; i < 4; ++i) cfg.rows[i] = 16, cfg.colsb[i] = 64;
    for (int i = 4; i < 6; ++i) cfg.rows[i] = 16, cfg.colsb[i] = kG;
    for (int i = 6; i < 8; ++i) cfg.rows[i] = kG / 4, cfg.colsb[i] = 64;
    t.config(cfg);

    alignas(64) int32_t cbuf[4][16][16];
    alignas(64) float acc[32][2][16];
    alignas(64) int32_t S[32][2][16];
    ref::ActQ8Row x[32];
    int32_t ns[32];
    for (int64_t n = a.n0; n < a.n1; n += 32) {
        int nc[2];
        nc[0] = static_cast<int>(a.n1 - n >= 16 ? 16 : a.n1 - n);
        nc[1] = static_cast<int>(a.n1 - n - 16 >= 16 ? 16 : (a.n1 - n - 16 > 0 ? a.n1 - n - 16 : 0));
        const int np = nc[1] > 0 ? 2 : 1;
        for (int j = 0; j < np; ++j) fill(panel_parts(w.type, K, w.panels, (w.N + 15) / 16, n / 16 + j), nstep, f[j]);
        for (int64_t r0 = 0; r0 < a.m; r0 += 32) {
            const int nt = static_cast<int>(a.m - r0 >= 32 ? 32 : a.m - r0), nh = nt > 16 ? 2 : 1;
            const TileRows rows[2] = {tile_rows(act, act_stride, pad, Kp, a.m, r0), tile_rows(act, act_stride, pad, Kp, a.m, r0 + 16)};
            const uint8_t* A[2] = {rows[0].base, rows[1].base};
            const size_t as[2] = {rows[0].stride, rows[1].stride};
            for (int i = 0; i < nt; ++i) x[i] = ref::act_q8_row(const_cast<unsigned char*>(act + (r0 + i) * act_stride), K);
            for (int i = 0; i < nt; ++i)
                for (int j = 0; j < np; ++j) _mm512_store_ps(acc[i][j], _mm512_setzero_ps());
            for (int64_t sb = 0; sb < nsb; ++sb) {
                for (int i = 0; i < nt; ++i)
                    for (int j = 0; j < np; ++j) _mm512_store_si512(S[i][j], _mm512_setzero_si512());
                [[maybe_unused]] __m512i M[32][2];  // the mins' int32 sums of this super-block (D::kMin)
                if constexpr (D::kMin)
                    for (int i = 0; i < nt; ++i)
                        for (int j = 0; j < np; ++j) M[i][j] = _mm512_setzero_si512();
                for (int k = 0; k < kGps; ++k) {
                    const int64_t g = sb * kGps + k, i16 = g * kG / 16;
                    const uint8_t* Ag[2] = {A[0] + g * kG, nh == 2 ? A[1] + g * kG : nullptr};
                    const uint8_t* Bg[2] = {f[0].q + g * kG * 16, f[1].q + g * kG * 16};
                    granule_tiles(t, Ag, as, Bg, nh, np, cbuf);
                    for (int i = 0; i < nt; ++i) ns[i] = x[i].nsum[4 * i16];
                    for (int j = 0; j < np; ++j) {
                        const __m512i sc = _mm512_load_si512(f[j].ws + g * 16);
                        for (int i = 0; i < nt; ++i) {
                            __m512i I = _mm512_load_si512(cbuf[2 * (i / 16) + j][i % 16]);
                            if constexpr (D::kShift >= 0) I = _mm512_add_epi32(I, _mm512_set1_epi32(ns[i] * (1 << (D::kShift >= 0 ? D::kShift : 0))));
                            _mm512_store_si512(S[i][j], _mm512_add_epi32(_mm512_load_si512(S[i][j]), _mm512_mullo_epi32(I, sc)));
                            if constexpr (D::kMin)
                                M[i][j] = _mm512_add_epi32(M[i][j], _mm512_mullo_epi32(_mm512_load_si512(f[j].wm + g * 16), _mm512_set1_epi32(ns[i])));
                        }
                    }
                }
                for (int j = 0; j < np; ++j) {
                    const __m512 d = _mm512_load_ps(f[j].wd + sb * 32);
                    for (int i = 0; i < nt; ++i) {
                        const __m512 dx = _mm512_set1_ps(x[i].dxv[64 * sb]);
                        __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(S[i][j])), _mm512_mul_ps(d, dx), _mm512_load_ps(acc[i][j]));
                        if constexpr (D::kMin)
                            v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(M[i][j]), _mm512_mul_ps(_mm512_load_ps(f[j].wd + sb * 32 + 16), dx), v);
                        _mm512_store_ps(acc[i][j], v);
                    }
                }
            }
            for (int j = 0; j < np; ++j) {
                const __mmask16 keep = static_cast<__mmask16>((1u << nc[j]) - 1u);
                for (int i = 0; i < nt; ++i) _mm512_mask_storeu_ps(a.y + (r0 + i) * a.ldy + (n + 16 * j - a.n0), keep, _mm512_load_ps(acc[i][j]));
            }
        }
    }
    t.release();
}

template <class Tiles>
void panel_gemm_tiles(Tiles& t, const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    check_range(w, a.n0, a.n1);
    if (!panel_amx_supported(w.type))
        throw_error("kernels", "AMX panel GEMM: weight type ", dtype_name(w.type), " has none (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q3_K, Q2_K, Q5_0, MXFP4)");
    if (a.K != w.K) throw_error("kernels", "AMX panel GEMM: K = ", a.K, " but the panels hold rows of ", w.K);
    if (a.m <= 0 || a.n1 <= a.n0) return;
    switch (w.type) {
        case DType::Q8_0: panel_gemm_q80_tiles(t, w, a, o); break;  // register accumulators (qmatmul_panel_amx_blocks.cpp)
        case DType::Q4_0: panel_gemm_q40_tiles(t, w, a, o); break;
        case DType::Q5_0: panel_gemm_q50_tiles(t, w, a, o); break;
        case DType::MXFP4: panel_gemm_mxfp4_tiles(t, w, a, o); break;
        case DType::Q4_K: panel_gemm_q4k_tiles(t, w, a, o); break;  // scales folded (qmatmul_panel_amx_folded.cpp)
        case DType::Q5_K: panel_gemm_q5k_tiles(t, w, a, o); break;
        case DType::Q6_K: panel_gemm_q6k_tiles(t, w, a, o); break;
        case DType::Q3_K: gemm_tiles<AmxQ3K>(t, w, a, fill_k23<true>); break;
        default: gemm_tiles<AmxQ2K>(t, w, a, fill_k23<false>); break;
    }
}

}  // namespace

void panel_gemm_amx(const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    amx::AmxTiles t;
    panel_gemm_tiles(t, w, a, o);
}
void panel_gemm_amx(const PanelMatrix& w, const MatmulArgs& a) {
    panel_gemm_amx(w, a, AmxGemmOptions{});
}

void panel_gemm_amx_emulated(const PanelMatrix& w, const MatmulArgs& a, const AmxGemmOptions& o) {
    amx::EmuTiles t;
    panel_gemm_tiles(t, w, a, o);
}
void panel_gemm_amx_emulated(const PanelMatrix& w, const MatmulArgs& a) {
    panel_gemm_amx_emulated(w, a, AmxGemmOptions{});
}

}  // namespace moe::kernels::panel

#pragma GCC diagnostic pop
MOE_TARGET_POP
