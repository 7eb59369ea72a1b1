#pragma once
// AVX2 int8 kernels that read the weight blocks in place: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_0, Q4_0,
// Q5_0, MXFP4, IQ4_NL, IQ4_XS and the grid IQ types (the types of Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K,
// Q8_0, Q4_0, IQ4_NL, IQ4_XS, IQ1_S .. IQ3_M and gpt-oss MXFP4 files). The generic AVX2 path (qmatmul_generic.cpp) decodes each
// weight row to bytes with scalar code first, ~0.2 GB/s; CPUs without AVX-512 VNNI (Zen 2/3,
// Haswell..Alder Lake; F16C is required, as on all of them) run these instead. Hand-written because no library computes the engine's
// canonical chain (qmatmul.h), which every path must reproduce bit for bit.
//
// Shape of the work: 4 weight rows at a time against one ActQ8 activation row. Per 256-value
// super-block (K-quants) or 32-value block (Q8_0) each row's exact int32 sum is formed in a ymm
// (vpmaddubsw on unsigned levels x int8 activations: |pair| <= 2 * 31 * 128 for Q5_K, 2 * 63 *
// 128 for Q6_K, no int16 saturation; then vpmaddwd by the granule's integer scale), the four are
// reduced together, and the chain's FMAs run on the 4 outputs as one xmm, lane r doing exactly
// the scalar path's std::fma sequence for its row. The min / offset terms use the activations'
//
// This header: the shared parts (activation context, reductions, the driver over 4-row weight
// groups); the steps per type family are in qmatmul_avx2_kquants.cpp (Q2_K..Q6_K),
// qmatmul_avx2_blocks.cpp (the 32-value block types, IQ4_XS) and qmatmul_avx2_iq.cpp (IQ1/IQ2/IQ3). Internal to src/kernels/cpu.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/ref/quant_formats.h"

namespace moe::kernels::avx2_blocks {

#define MOE_AVX2_BLK __attribute__((target("avx2,fma,f16c")))

constexpr int kRows = 4;       // weight rows per step (one 4-way reduction)
constexpr int64_t kActBlock = 16;  // activation rows per pass over the weight rows (prefill: they stay in L2)
constexpr int64_t kPrefetchRows = 2 * kRows;  // software prefetch distance (run_rows)

// Per-call int16 sums of the activations (-sum of each 16 or 32 int8 values), K/16 or K/32 per row.
inline thread_local std::vector<int16_t> tls_ns;
// Per-call copy of the int8 activations in a kernel's order (Permute), K per row (64-byte aligned).
inline thread_local std::vector<int8_t> tls_qs;

struct Ctx {
    const unsigned char* act;
    size_t act_stride;
    const int16_t* ns;  // [m][ns_per_row]
    int64_t ns_per_row;
    const int8_t* qs;  // permuted int8 activations [m][K], or null (the ActQ8Row's own)
};

// The activations in sb_sum45's vector order: per 64 values, the same unpacks as the weights'
// (unpacklo_epi64 / unpackhi_epi64 of the two 32-value halves: values 0..7, 32..39, 16..23, 48..55,
// then 8..15, 40..47, 24..31, 56..63).
MOE_AVX2_BLK inline void permute_q8k(const int8_t* x, int64_t K, int8_t* out) {
    for (int64_t i = 0; i < K; i += 64) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 32));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_unpacklo_epi64(a, b));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 32), _mm256_unpackhi_epi64(a, b));
    }
}

// The activations in Signed32::step2's order: per pair of 32-value blocks (64 values) the 16-value
// quarters 0, 2, 1, 3 ([block g values 0..15 | g + 1 0..15], then 16..31 of each); an odd last block
// stays as it is.
MOE_AVX2_BLK inline void permute_pairs(const int8_t* x, int64_t K, int8_t* out) {
    int64_t i = 0;
    for (; i + 64 <= K; i += 64) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 32));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permute2x128_si256(a, b, 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 32), _mm256_permute2x128_si256(a, b, 0x31));
    }
    if (i < K) std::memcpy(out + i, x + i, static_cast<size_t>(K - i));
}

enum class Permute { None, Q45K, Pairs };

// The call's activation rows and, for group 16 or 32 (0: none), nsum (ActQ8Row, one int32 per 16
// values at index 4 * i16) as int16 sums per group. |sum| <= 32 * 128: fits int16.
MOE_AVX2_BLK inline Ctx make_ctx(const MatmulArgs& a, ref::ActQuant kind, int group, Permute permute) {
    size_t stride = 0;
    const unsigned char* act = qmm_activations(a, Isa::Avx2, kind, &stride);
    const int8_t* qs = nullptr;
    if (permute != Permute::None) {  // K: whole super-blocks (Q45K), whole 32-value blocks (Pairs)
        if (static_cast<int64_t>(tls_qs.size()) < a.m * a.K + 64) tls_qs.resize(static_cast<size_t>(a.m * a.K + 64));
        int8_t* base = tls_qs.data() + (64 - reinterpret_cast<uintptr_t>(tls_qs.data()) % 64) % 64;  // whole-line loads
        for (int64_t r = 0; r < a.m; ++r) {
            const int8_t* x = ref::act_q8_row(const_cast<unsigned char*>(act + r * stride), a.K).qs;
            if (permute == Permute::Q45K) permute_q8k(x, a.K, base + r * a.K);
            else permute_pairs(x, a.K, base + r * a.K);
        }
        qs = base;
    }
    if (group == 0) return {act, stride, nullptr, 0, qs};
    const int64_t per = a.K / group;
    if (static_cast<int64_t>(tls_ns.size()) < a.m * per) tls_ns.resize(static_cast<size_t>(a.m * per));
    for (int64_t r = 0; r < a.m; ++r) {
        const ref::ActQ8Row x = ref::act_q8_row(const_cast<unsigned char*>(act + r * stride), a.K);
        int16_t* o = tls_ns.data() + r * per;
        for (int64_t g = 0; g < per; ++g)
            o[g] = static_cast<int16_t>(group == 16 ? x.nsum[4 * g] : x.nsum[8 * g] + x.nsum[8 * g + 4]);
    }
    return {act, stride, tls_ns.data(), per, qs};
}

MOE_AVX2_BLK inline __m128i reduce4(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}
MOE_AVX2_BLK inline __m128i reduce4(__m128i a, __m128i b, __m128i c, __m128i d) {
    return _mm_hadd_epi32(_mm_hadd_epi32(a, b), _mm_hadd_epi32(c, d));
}

inline void store_lanes(float* y, __m128 v, int count) {
    alignas(16) float t[4];
    _mm_store_ps(t, v);
    for (int i = 0; i < count; ++i) y[i] = t[i];
}

// The f16 at byte `off` of the 4 rows' current blocks as 4 floats (F16C: exact, as fp16_to_fp32).
MOE_AVX2_BLK inline __m128 halves4(const uint8_t* const* blk, size_t off) {
    uint16_t h[4];
    for (int i = 0; i < 4; ++i) std::memcpy(&h[i], blk[i] + off, 2);
    return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(h)));
}

// One activation row as the block steps read it.
struct XRow {
    const int8_t* qs;
    const float* dxv;
    const int16_t* ns;  // Ctx::ns row (K-quants)
};

// 16 bytes of nibbles at p as 32 levels [low nibbles | high nibbles], optionally through a 16-entry
// int8 table (MXFP4, IQ4_NL, IQ4_XS values).
MOE_AVX2_BLK inline __m256i nibbles32(const uint8_t* p) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}
MOE_AVX2_BLK inline __m256i table16(const int8_t* t) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
}

// ---------------------------------------------------------------- driver
// Activation rows in blocks of kActBlock (they stay in L2 while every 4-row weight group of the
// call passes over them), four at a time (the weight levels are split once for the four).
template <class Ty, int RM>
MOE_AVX2_BLK inline void run_rows(const MatmulArgs& a, const Ctx& c, const uint8_t* const* row, int64_t r, int64_t n, int count) {
    XRow x[RM];
    __m128 acc[RM];
    for (int k = 0; k < RM; ++k) {
        const ref::ActQ8Row q = ref::act_q8_row(const_cast<unsigned char*>(c.act + (r + k) * c.act_stride), a.K);
        x[k] = {c.qs ? c.qs + (r + k) * a.K : q.qs, q.dxv, c.ns ? c.ns + (r + k) * c.ns_per_row : nullptr};
        acc[k] = _mm_setzero_ps();
    }
    const int64_t nb = a.K / Ty::kValues;
    // Decode streams the rows from DRAM; the 4 interleaved row streams defeat this CPU's
    // prefetchers (Zen 3: 4.1 GB/s on one thread without, 11.3 with, `moe bench --membw` 13.6):
    // fetch, spread over the group's steps, the group two ahead (rows are w_row_stride apart).
    // (Addresses past the matrix are only prefetched, never read: integer arithmetic, no pointer.)
    auto prefetch = [&](int64_t b, int64_t blocks) MOE_AVX2_BLK {
        const uintptr_t p = reinterpret_cast<uintptr_t>(row[0]) + kPrefetchRows * a.w_row_stride + b * kRows * Ty::kBytes;
        for (size_t o = 0; o < blocks * kRows * Ty::kBytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
    };
    int64_t b = 0;
    if constexpr (Ty::kPermute == Permute::Pairs)
        for (; b + 2 <= nb; b += 2) prefetch(b, 2), Ty::template step2<RM>(row, b, x, acc);
    for (; b < nb; ++b) prefetch(b, 1), Ty::template step<RM>(row, b, x, acc);
    for (int k = 0; k < RM; ++k) store_lanes(a.y + (r + k) * a.ldy + (n - a.n0), acc[k], count);
}

template <class Ty>
MOE_AVX2_BLK inline void qmm_blocks(const MatmulArgs& a) {
    const Ctx c = make_ctx(a, Ty::kAct, Ty::kNsGroup, Ty::kPermute);
    for (int64_t r0 = 0; r0 < a.m; r0 += kActBlock) {
        const int64_t r1 = std::min(a.m, r0 + kActBlock);
        for (int64_t n = a.n0; n < a.n1; n += kRows) {
            const int count = static_cast<int>(std::min<int64_t>(kRows, a.n1 - n));
            const uint8_t* row[kRows];  // a short last group repeats its last row
            for (int i = 0; i < kRows; ++i)
                row[i] = static_cast<const uint8_t*>(a.w) + (n + std::min(i, count - 1)) * static_cast<int64_t>(a.w_row_stride);
            int64_t r = r0;
            for (; r + 4 <= r1; r += 4) run_rows<Ty, 4>(a, c, row, r, n, count);
            if (r + 2 <= r1) run_rows<Ty, 2>(a, c, row, r, n, count), r += 2;
            if (r < r1) run_rows<Ty, 1>(a, c, row, r, n, count);
        }
    }
}

}  // namespace moe::kernels::avx2_blocks
