// Matmul kernels for F16, BF16 and every int8-kernel weight type (kQmmTypes) on every ISA path this CPU
// runs, against an fp64 dot product over the dequantized weights (reference dequantizer) and the
// activations the kernel multiplies (the int8 kernels: the ActQ8-quantized activations), at awkward
// sizes; plus the activation-quantization error against the f32 activations, determinism (same bits
// whatever m, the column range or the prepared-activation path) and kernel lookup.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quant_random.h"
#include "kernels/ref/quantize_act.h"

namespace moe {
namespace {

using kernels::Isa;

constexpr double kU = 1.0 / (1 << 24);  // f32 unit roundoff

struct Weights {
    DType t;
    int64_t N, K;
    size_t stride;
    std::vector<uint8_t> bytes;
    std::vector<float> deq;   // [N, K] reference dequantization
    std::vector<double> mn;   // [N, K] |min offset| of each element (Q4_K/Q5_K), else 0
};

double h16(const uint8_t* p) { return fp16_to_fp32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

// Overwrite a K-quant row's blocks with (mostly) saturated fields: levels, scales and mins at their
// maxima (Q6_K scales +127 / -128 at random), d and dmin random in [2^-8, 2^-7): the integer sums
// of the super-block chain at their bounds (qmatmul.h: |S| > 2^24 for Q4_K..Q6_K).
void saturate_blocks(Rng& rng, DType t, uint8_t* row, int64_t K) {
    const size_t bb = dtype_info(t).bytes;
    const auto f16 = [&](uint8_t* p) {
        const uint16_t h = fp32_to_fp16(std::ldexp(1.0f + rng.uniform(0.0f, 1.0f), -8));
        p[0] = static_cast<uint8_t>(h & 0xFF);
        p[1] = static_cast<uint8_t>(h >> 8);
    };
    for (int64_t b = 0; b < K / 256; ++b) {
        uint8_t* blk = row + b * bb;
        for (size_t i = 0; i < bb; ++i) blk[i] = rng.next() % 4 ? 0xFF : static_cast<uint8_t>(rng.next());
        switch (t) {
            case DType::Q2_K: f16(blk + 80); f16(blk + 82); break;
            case DType::Q3_K: f16(blk + 108); break;
            case DType::Q4_K:
            case DType::Q5_K: f16(blk); f16(blk + 2); break;
            case DType::Q6_K:
                for (int j = 0; j < 16; ++j) blk[192 + j] = rng.next() % 2 ? 0x7F : 0x80;
                f16(blk + 208);
                break;
            default: FAIL() << "saturate_blocks: not a K-quant";
        }
    }
}

Weights make_weights(Rng& rng, DType t, int64_t N, int64_t K, bool saturate = false) {
    Weights w{t, N, K, 0, {}, {}, {}};
    const uint64_t rb = row_bytes(t, static_cast<uint64_t>(K));
    w.stride = rb + 24;  // rows not packed back to back: the kernels must use w_row_stride
    w.bytes.assign(w.stride * N, 0xCD);
    w.deq.resize(N * K);
    w.mn.assign(N * K, 0.0);
    std::vector<float> x(K);
    for (int64_t n = 0; n < N; ++n) {
        const float scale = std::ldexp(1.0f, static_cast<int>(rng.next() % 5) - 2);
        const float shift = (n % 3 == 0) ? 0.4f * scale : 0.0f;  // some rows not centred (mins matter)
        for (auto& v : x) v = rng.uniform(-1.0f, 1.0f) * scale + shift;
        uint8_t* row = w.bytes.data() + n * w.stride;
        if (ref::can_quantize(t)) {
            EXPECT_TRUE(ref::quantize_row(t, x.data(), row, K));
        } else {  // no quantizer here: random valid blocks (every field pattern is a valid block)
            EXPECT_TRUE(ref::fill_random_blocks(t, rng, row, K / dtype_info(t).block, scale));
        }
        if (saturate) saturate_blocks(rng, t, row, K);
        ref::dequantize_row(t, row, w.deq.data() + n * K, K);
        // |min offset| per element for the types with a min term: Q4_1 / Q5_1 m, Q2_K dmin * m.
        if (t == DType::Q4_1 || t == DType::Q5_1) {
            for (int64_t i = 0; i < K; ++i) w.mn[n * K + i] = std::fabs(h16(row + (i / 32) * dtype_info(t).bytes + 2));
        } else if (t == DType::Q2_K) {
            for (int64_t i = 0; i < K; ++i) {
                const uint8_t* b = row + (i / 256) * 84;
                w.mn[n * K + i] = h16(b + 82) * (b[(i % 256) / 16] >> 4);
            }
        }
        if (t == DType::Q4_K || t == DType::Q5_K) {
            const size_t bb = t == DType::Q4_K ? 144 : 176;
            for (int64_t i = 0; i < K; ++i) {
                const uint8_t* b = row + (i / 256) * bb;
                uint8_t sc, m;
                ref::get_scale_min_k4(static_cast<int>((i % 256) / 32), b + 4, &sc, &m);
                w.mn[n * K + i] = h16(b + 2) * m;
            }
        }
    }
    return w;
}

bool int8_type(DType t) { return kernels::qmm_supported(t); }

// Activations the kernel multiplies: ActQ8 values for the int8 kernels, x itself otherwise.
std::vector<float> effective_x(DType t, const std::vector<float>& x, int64_t m, int64_t K, int64_t ldx,
                               std::vector<float>* step) {
    std::vector<float> xe(m * K);
    step->assign(m * K, 0.0f);
    std::vector<unsigned char> row(ref::act_q8_row_bytes(K));
    for (int64_t r = 0; r < m; ++r) {
        if (!int8_type(t)) {
            for (int64_t i = 0; i < K; ++i) xe[r * K + i] = x[r * ldx + i];
            continue;
        }
        ref::quantize_act_q8(x.data() + r * ldx, K, row.data(), kernels::act_quant(t));
        const ref::ActQ8Row q = ref::act_q8_row(row.data(), K);
        for (int64_t i = 0; i < K; ++i) {
            xe[r * K + i] = ref::act_q8_value(row.data(), K, i);
            (*step)[r * K + i] = std::fabs(q.dxv[16 * (i / 64) + 8 * ((i / 32) % 2)]);
        }
    }
    return xe;
}

// Rounding steps one output passes through (see qmatmul.h / matmul_half.cpp). int8: integer sums
// exact; per granule of 16 or 32 values one scale product and one FMA of a sequential chain, plus
// one FMA per 32 values for the min term (Q4_1/Q5_1): <= K/8 + 2, plus the reference's one rounding
// of each dequantized weight. The K-quants (the super-block integer chain): per 256 values float(S)
// (Q4_K..Q6_K), two products (d*dx, dmin*dx) and two FMAs: <= 5K/256 + 4. f16/bf16: exact weight
// conversion, then the f32 dot: K sequential adds (scalar) or K/8 FMAs per lane + 3 horizontal adds
// (avx2; avx512 fewer).
double roundings(DType t, Isa isa, int64_t K) {
    if (t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K)
        return 5.0 * static_cast<double>(K) / 256 + 4;
    if (int8_type(t)) return static_cast<double>(K) / 8 + 4;
    return isa == Isa::Scalar ? static_cast<double>(K) + 2 : static_cast<double>(K) / 8 + 6;
}

std::vector<DType> all_types() {
    std::vector<DType> v = {DType::F16, DType::BF16};
    for (DType t : kernels::kQmmTypes) v.push_back(t);
    return v;
}
const std::vector<DType> kTypes = all_types();

std::vector<int64_t> ks_for(DType t) {
    if (dtype_info(t).block == 32) return {32, 96, 256, 4096 + 256};
    if (t == DType::F16 || t == DType::BF16) return {1, 17, 96, 256, 4096 + 256};
    return {256, 512, 4096 + 256};
}

void call(const kernels::MatmulKernel& k, const Weights& w, const float* x, int64_t ldx, int64_t m, float* y,
          int64_t ldy, int64_t n0, int64_t n1, const void* xq = nullptr, size_t xq_stride = 0) {
    kernels::MatmulArgs a;
    a.w = w.bytes.data();
    a.w_row_stride = w.stride;
    a.x = x;
    a.ldx = ldx;
    a.y = y;
    a.ldy = ldy;
    a.m = m;
    a.K = w.K;
    a.n0 = n0;
    a.n1 = n1;
    a.xq = xq;
    a.xq_stride = xq_stride;
    k(a);
}

TEST(MatmulQuant, EveryTypeEveryPathAgainstFp64) {
    Rng rng(0x51a7);
    int cases = 0;
    for (DType t : kTypes) {
        for (int64_t K : ks_for(t)) {
            for (int64_t N : {1, 3, 17, 67}) {
                const Weights w = make_weights(rng, t, N, K);
                for (int64_t m : {1, 2, 5, 33}) {
                    if (K > 1000 && (N == 67 || m == 33)) continue;  // keep the big-K cases small
                    const int64_t ldx = K + 3, ldy = N + 2;
                    std::vector<float> x(m * ldx);
                    for (auto& v : x) v = rng.uniform(-2.0f, 2.0f);
                    std::vector<float> step;
                    const std::vector<float> xe = effective_x(t, x, m, K, ldx, &step);
                    // |x - xq| <= d/2 per value, d the f32 scale; Q8_0 / Q8_1 activations (f16 scale d16,
                    // levels from the f32 one): + 127 |d - d16| <= 127 * 2^-11 d.
                    const ref::ActQuant aq = kernels::act_quant(t);
                    const double qhalf = aq == ref::kActQ8_0 || aq == ref::kActQ8_1 ? 0.5 + 127.0 / 2048 + 1e-3 : 0.5;
                    // Q8_1 (Q4_1 / Q5_1): the min term reads block_q8_1's s = fp16(d * sum q) where the
                    // reference has d16 * sum q: <= 2^-10 relative, on the min part of S.
                    const double smin = aq == ref::kActQ8_1 ? 1.0 / 1024 : 0.0;
                    // fp64 references: exact (what the kernel multiplies) and true (f32 activations).
                    std::vector<double> ref(m * N), truth(m * N), S(m * N), Q(m * N), M(m * N);
                    for (int64_t r = 0; r < m; ++r)
                        for (int64_t n = 0; n < N; ++n) {
                            double s = 0, tr = 0, mag = 0, qe = 0, mins = 0;
                            for (int64_t i = 0; i < K; ++i) {
                                const double wi = w.deq[n * K + i];
                                s += wi * xe[r * K + i];
                                tr += wi * x[r * ldx + i];
                                mag += (std::fabs(wi) + 2 * w.mn[n * K + i]) * std::fabs(xe[r * K + i]);
                                mins += w.mn[n * K + i] * std::fabs(xe[r * K + i]);
                                qe += std::fabs(wi) * step[r * K + i] * qhalf;  // |x - xq| per value
                            }
                            ref[r * N + n] = s;
                            truth[r * N + n] = tr;
                            S[r * N + n] = mag;
                            M[r * N + n] = 1.01 * smin * mins;
                            Q[r * N + n] = qe;
                        }
                    for (Isa isa : kernels::supported_isas()) {
                        const kernels::CpuKernels ks(isa);
                        const kernels::MatmulKernel& k = ks.matmul(t, "blk.0.test");
                        const std::string name = std::string(dtype_name(t)) + "_K" + std::to_string(K) + "_N" +
                                                 std::to_string(N) + "_m" + std::to_string(m) + "_" + k.name;
                        SCOPED_TRACE(name);
                        std::vector<float> y(m * ldy, -7.0f);
                        call(k, w, x.data(), ldx, m, y.data(), ldy, 0, N);
                        const double g = roundings(t, isa, K) * kU;
                        for (int64_t r = 0; r < m; ++r) {
                            for (int64_t n = 0; n < N; ++n) {
                                const double got = y[r * ldy + n];
                                // (1.01: the first-order bound n*u*S; 1e-30 for all-zero rows)
                                const double bound = 1.01 * g * S[r * N + n] + M[r * N + n] + 1e-30;
                                ASSERT_LE(std::fabs(got - ref[r * N + n]), bound) << "r=" << r << " n=" << n;
                                // vs f32 activations: plus the activation quantization error.
                                ASSERT_LE(std::fabs(got - truth[r * N + n]), bound + 1.0001 * Q[r * N + n]);
                            }
                            EXPECT_EQ(y[r * ldy + N], -7.0f) << "wrote past n1";
                        }
                        ++cases;
                    }
                }
            }
        }
    }
    EXPECT_GT(cases, 300);
}

// Same bits for y[r][n] whatever the batch (m), the column range [n0, n1), and whether the caller
// prepared the activations (MatmulArgs::xq); for the int8 kernels also whatever the ISA path.
TEST(MatmulQuant, DeterministicAcrossBatchTileAndPreparedActivations) {
    Rng rng(0xde7e);
    for (DType t : kTypes) {
        const int64_t K = dtype_info(t).block == 32 ? 96 : 512, N = 37, m = 9;
        const Weights w = make_weights(rng, t, N, K);
        std::vector<float> x(m * K);
        for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
        for (Isa isa : kernels::supported_isas()) {
            const kernels::CpuKernels ks(isa);
            const kernels::MatmulKernel& k = ks.matmul(t, "t");
            SCOPED_TRACE(k.name);
            std::vector<float> all(m * N), one(N), col(1);
            call(k, w, x.data(), K, m, all.data(), N, 0, N);
            for (int64_t r = 0; r < m; ++r) {
                call(k, w, x.data() + r * K, K, 1, one.data(), N, 0, N);
                ASSERT_EQ(0, std::memcmp(one.data(), all.data() + r * N, N * sizeof(float))) << "row " << r << " alone";
                for (int64_t n = 0; n < N; n += 5) {
                    call(k, w, x.data() + r * K, K, 1, col.data(), 1, n, n + 1);
                    ASSERT_EQ(0, std::memcmp(col.data(), all.data() + r * N + n, sizeof(float))) << "col " << n;
                }
            }
            // Rows in a different batch (reversed order, with other rows around them).
            std::vector<float> xr(m * K), yr(m * N);
            for (int64_t r = 0; r < m; ++r) std::memcpy(xr.data() + r * K, x.data() + (m - 1 - r) * K, K * sizeof(float));
            call(k, w, xr.data(), K, m, yr.data(), N, 0, N);
            for (int64_t r = 0; r < m; ++r)
                ASSERT_EQ(0, std::memcmp(yr.data() + r * N, all.data() + (m - 1 - r) * N, N * sizeof(float)));
            if (k.act_q8) {
                // The int8 kernels compute one canonical chain on every path: same bits as scalar.
                std::vector<float> ys(m * N);
                call(kernels::CpuKernels(Isa::Scalar).matmul(t, "t"), w, x.data(), K, m, ys.data(), N, 0, N);
                ASSERT_EQ(0, std::memcmp(ys.data(), all.data(), ys.size() * sizeof(float))) << "differs from scalar";
                const size_t stride = ref::act_q8_row_bytes(K);
                std::vector<unsigned char> xq(stride * m);
                kernels::quantize_act_rows(isa, k.act_q8, x.data(), K, m, K, xq.data(), stride);
                std::vector<float> yp(m * N, 0.0f);
                call(k, w, nullptr, K, m, yp.data(), N, 0, N, xq.data(), stride);
                ASSERT_EQ(0, std::memcmp(yp.data(), all.data(), yp.size() * sizeof(float))) << "prepared xq";
            }
        }
    }
}

// The decode-sized calls (m = 1 and 2: the AVX-512 GEMV, 16 weight rows x 128 values per step)
// give the bits of the batched panel path (m = 33) and of the scalar reference chain, at K = one,
// three and 17 super-blocks, N not a multiple of 16 and column ranges not starting at 0.
TEST(MatmulQuant, DecodeGemvEqualsBatchedAndScalar) {
    Rng rng(0x9e3f);
    for (DType t : kernels::kQmmTypes) {
        std::vector<int64_t> ks = {256, 4096 + 256};
        // 32-value blocks: 160 and 2880 (gpt-oss) are not multiples of 128; their last 128-value
        // step has 1 and 2 of 4 blocks; 96: 3 blocks and no full step
        if (dtype_info(t).block == 32) ks.insert(ks.end(), {96, 128, 160, 2880});
        else ks.push_back(768);  // an odd number of super-blocks (the GEMVs' 128-value steps)
        for (int64_t K : ks) {
            const int64_t N = 67, m = 33;
            const Weights w = make_weights(rng, t, N, K);
            std::vector<float> x(m * K);
            for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
            std::vector<float> ys(m * N);
            call(kernels::CpuKernels(Isa::Scalar).matmul(t, "t"), w, x.data(), K, m, ys.data(), N, 0, N);
            // every path this CPU runs, plus the AVX-512 variant a CPU without GFNI / VBMI runs
            std::vector<kernels::MatmulKernel> paths;
            for (Isa isa : kernels::supported_isas()) paths.push_back(kernels::CpuKernels(isa).matmul(t, "t"));
            if (kernels::MatmulFn f = kernels::qmm_avx512_baseline_kernel(t))
                paths.push_back({t, Isa::Avx512, "avx512 without GFNI/VBMI", f, kernels::act_quant(t)});
            for (const kernels::MatmulKernel& k : paths) {
                SCOPED_TRACE(std::string(k.name) + " K=" + std::to_string(K));
                std::vector<float> all(m * N);
                call(k, w, x.data(), K, m, all.data(), N, 0, N);
                ASSERT_EQ(0, std::memcmp(ys.data(), all.data(), ys.size() * sizeof(float))) << "m = 33 differs from scalar";
                for (int64_t r = 0; r + 1 < m; r += 4) {
                    std::vector<float> one(N), two(2 * N);
                    call(k, w, x.data() + r * K, K, 1, one.data(), N, 0, N);
                    ASSERT_EQ(0, std::memcmp(one.data(), all.data() + r * N, N * sizeof(float))) << "m = 1, row " << r;
                    call(k, w, x.data() + r * K, K, 2, two.data(), N, 0, N);
                    ASSERT_EQ(0, std::memcmp(two.data(), all.data() + r * N, 2 * N * sizeof(float))) << "m = 2, row " << r;
                    const int64_t n0 = 5 + r % 11, n1 = N - r % 7;  // groups of 16 start off the matrix's
                    std::vector<float> part(n1 - n0);
                    call(k, w, x.data() + r * K, K, 1, part.data(), n1 - n0, n0, n1);
                    ASSERT_EQ(0, std::memcmp(part.data(), all.data() + r * N + n0, part.size() * sizeof(float)))
                        << "m = 1, columns [" << n0 << ", " << n1 << "), row " << r;
                }
            }
        }
    }
}

// The Q6_K decode GEMV (qmatmul_avx512_q6k_gemv.cpp) reads pairs of rows with merge-masked loads
// starting 8 bytes before a row (the masked lanes are never accessed): here the rows are packed back
// to back with row 0 at the start of its allocation, the blocks are random bit patterns (every
// ql/qh bit, scales -128..127), and calls of one or a few columns (a pair made of the same row)
// start at column 0 or end at the last row; the bits equal the scalar path's, also with every
// activation at the int8 maximum.
// The K-quants' super-block integer chain at its bounds: saturated blocks (every level, scale and
// min at its maximum) against activations of equal magnitude, so the per-super-block sums S reach
// 2^26..2^27 (Q4_K..Q6_K: float(S) rounds). Every path, batched (m = 5) and decode (m = 1), gives
// the scalar chain's bits, and all of them stay within the rounding bound of the fp64 dot product
// (an int32 overflow or a lost mins term would miss it by orders of magnitude).
TEST(MatmulQuant, KQuantSuperBlockChainAtItsBounds) {
    Rng rng(0x5b1d);
    for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        for (int64_t K : {256, 4096 + 256}) {
            const int64_t N = 35, m = 5;
            const Weights w = make_weights(rng, t, N, K, true);
            for (int xcase = 0; xcase < 3; ++xcase) {
                std::vector<float> x(m * K);
                for (int64_t i = 0; i < m * K; ++i)
                    x[i] = xcase == 0 ? 1.0f : xcase == 1 ? -1.0f : (rng.next() % 2 ? 1.0f : -1.0f);
                std::vector<float> step;
                const std::vector<float> xe = effective_x(t, x, m, K, K, &step);
                std::vector<float> ys(m * N);
                call(kernels::CpuKernels(Isa::Scalar).matmul(t, "t"), w, x.data(), K, m, ys.data(), N, 0, N);
                for (int64_t r = 0; r < m; ++r)
                    for (int64_t n = 0; n < N; ++n) {
                        double ref = 0, mag = 0;
                        for (int64_t i = 0; i < K; ++i) {
                            ref += static_cast<double>(w.deq[n * K + i]) * xe[r * K + i];
                            mag += (std::fabs(w.deq[n * K + i]) + 2 * w.mn[n * K + i]) * std::fabs(xe[r * K + i]);
                        }
                        const double bound = 1.01 * roundings(t, Isa::Scalar, K) * kU * mag;
                        ASSERT_LE(std::fabs(ys[r * N + n] - ref), bound)
                            << dtype_name(t) << " K=" << K << " x case " << xcase << " r=" << r << " n=" << n;
                    }
                for (Isa isa : kernels::supported_isas()) {
                    const kernels::CpuKernels kc(isa);
                    const kernels::MatmulKernel& k = kc.matmul(t, "t");
                    SCOPED_TRACE(std::string(k.name) + " K=" + std::to_string(K) + " x case " + std::to_string(xcase));
                    std::vector<float> y(m * N), one(N);
                    call(k, w, x.data(), K, m, y.data(), N, 0, N);
                    ASSERT_EQ(0, std::memcmp(ys.data(), y.data(), y.size() * sizeof(float))) << "m = 5";
                    for (int64_t r = 0; r < m; ++r) {
                        call(k, w, x.data() + r * K, K, 1, one.data(), N, 0, N);
                        ASSERT_EQ(0, std::memcmp(ys.data() + r * N, one.data(), N * sizeof(float))) << "m = 1, row " << r;
                    }
                }
            }
        }
    }
}

TEST(MatmulQuant, Q6kDecodeGemvPackedRowsRandomBlocks) {
    Rng rng(0x6b61);
    const DType t = DType::Q6_K;
    bool avx512 = false;
    for (Isa isa : kernels::supported_isas()) avx512 = avx512 || isa == Isa::Avx512;
    if (!avx512) std::printf("note: no AVX-512 path on this CPU, the Q6_K GEMV runs only its scalar/AVX2 twins here\n");
    for (int64_t K : {256, 512, 1280}) {
        for (int64_t N : {1, 2, 3, 17, 40}) {
            Weights w{t, N, K, static_cast<size_t>(row_bytes(t, static_cast<uint64_t>(K))), {}, {}, {}};
            w.bytes.resize(w.stride * N);
            ASSERT_TRUE(ref::fill_random_blocks(t, rng, w.bytes.data(), N * K / 256, 1.0f));
            for (int xcase = 0; xcase < 2; ++xcase) {
                std::vector<float> x(K);
                for (auto& v : x) v = xcase == 0 ? rng.normal() : 1.0f;
                std::vector<float> ys(N);
                call(kernels::CpuKernels(Isa::Scalar).matmul(t, "t"), w, x.data(), K, 1, ys.data(), N, 0, N);
                for (Isa isa : kernels::supported_isas()) {
                    const kernels::CpuKernels kc(isa);
                    const kernels::MatmulKernel& k = kc.matmul(t, "t");
                    SCOPED_TRACE(std::string(k.name) + " K=" + std::to_string(K) + " N=" + std::to_string(N));
                    std::vector<float> y(N);
                    call(k, w, x.data(), K, 1, y.data(), N, 0, N);
                    ASSERT_EQ(0, std::memcmp(ys.data(), y.data(), N * sizeof(float)));
                    for (int64_t n0 : {int64_t{0}, N - 1, N / 2}) {
                        const int64_t n1 = std::min(N, n0 + 1 + (N - n0) / 3);
                        std::vector<float> part(n1 - n0);
                        call(k, w, x.data(), K, 1, part.data(), n1 - n0, n0, n1);
                        ASSERT_EQ(0, std::memcmp(ys.data() + n0, part.data(), part.size() * sizeof(float)))
                            << "columns [" << n0 << ", " << n1 << ")";
                    }
                }
            }
        }
    }
}

// The IQ2_XXS decode GEMV (qmatmul_avx512_kq_gemv.cpp: grid look-up per 4 rows, signs as bit
// masks) on random blocks (every grid index, sign field and scale nibble) with rows packed back to
// back, activations random or at the int8 extremes (all +127, alternating +-127: the sign masks
// negate them), N not a multiple of 4 or 16: the bits equal the scalar path's.
TEST(MatmulQuant, Iq2xxsDecodeGemvRandomBlocksExtremeActivations) {
    Rng rng(0x1a2c);
    const DType t = DType::IQ2_XXS;
    for (int64_t K : {256, 768}) {
        for (int64_t N : {1, 6, 17, 35}) {
            Weights w{t, N, K, static_cast<size_t>(row_bytes(t, static_cast<uint64_t>(K))), {}, {}, {}};
            w.bytes.resize(w.stride * N);
            ASSERT_TRUE(ref::fill_random_blocks(t, rng, w.bytes.data(), N * K / 256, 1.0f));
            for (int xcase = 0; xcase < 3; ++xcase) {
                std::vector<float> x(K);
                for (int64_t i = 0; i < K; ++i) x[i] = xcase == 0 ? rng.normal() : xcase == 1 ? 1.0f : (i % 3 ? -1.0f : 1.0f);
                std::vector<float> ys(N);
                call(kernels::CpuKernels(Isa::Scalar).matmul(t, "t"), w, x.data(), K, 1, ys.data(), N, 0, N);
                for (Isa isa : kernels::supported_isas()) {
                    const kernels::CpuKernels kc(isa);
                    const kernels::MatmulKernel& k = kc.matmul(t, "t");
                    SCOPED_TRACE(std::string(k.name) + " K=" + std::to_string(K) + " N=" + std::to_string(N) + " x case " + std::to_string(xcase));
                    std::vector<float> y(N);
                    call(k, w, x.data(), K, 1, y.data(), N, 0, N);
                    ASSERT_EQ(0, std::memcmp(ys.data(), y.data(), N * sizeof(float)));
                }
            }
        }
    }
}

// F16/BF16 weights give exactly the f32 kernel's bits on the converted weights (same path).
TEST(MatmulQuant, HalfKernelsEqualF32KernelsOnConvertedWeights) {
    Rng rng(0x4a1f);
    for (DType t : {DType::F16, DType::BF16}) {
        for (int64_t K : {7, 64, 333}) {
            const int64_t N = 9, m = 6;
            const Weights w = make_weights(rng, t, N, K);
            std::vector<float> x(m * K);
            for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
            for (Isa isa : kernels::supported_isas()) {
                const kernels::CpuKernels ks(isa);
                std::vector<float> yh(m * N), yf(m * N);
                call(ks.matmul(t, "t"), w, x.data(), K, m, yh.data(), N, 0, N);
                kernels::MatmulArgs a;
                a.w = w.deq.data();
                a.w_row_stride = K * sizeof(float);
                a.x = x.data();
                a.ldx = K;
                a.y = yf.data();
                a.ldy = N;
                a.m = m;
                a.K = K;
                a.n0 = 0;
                a.n1 = N;
                ks.matmul(DType::F32, "t")(a);
                EXPECT_EQ(0, std::memcmp(yh.data(), yf.data(), yh.size() * sizeof(float)))
                    << dtype_name(t) << " K=" << K << " " << kernels::isa_name(isa);
            }
        }
    }
}

TEST(MatmulQuant, KernelLookup) {
    const kernels::CpuKernels ks(kernels::best_isa());
    for (DType t : kTypes) {
        EXPECT_TRUE(ks.has_matmul(t));
        EXPECT_EQ(ks.matmul(t, "x").weight_type, t);
        EXPECT_EQ(ks.matmul(t, "x").act_q8 != ref::kActNone, int8_type(t));
        EXPECT_EQ(ks.matmul(t, "x").act_q8, kernels::act_quant(t));
    }
    // The types with an AVX-512 VNNI decoder run it where the CPU has VNNI (the others: AVX2).
    if (ks.isa() == Isa::Avx512 && kernels::qmm_has_avx512(DType::Q8_0)) {
        for (DType t : {DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS,
                        DType::IQ3_S, DType::IQ3_XXS, DType::IQ2_S, DType::IQ2_XS, DType::IQ2_XXS, DType::IQ1_M, DType::IQ1_S,
                        DType::MXFP4, DType::TQ2_0})
            EXPECT_NE(std::string(ks.matmul(t, "x").name).find("avx512vnni"), std::string::npos) << dtype_name(t);
    }
    EXPECT_FALSE(ks.has_matmul(DType::Q8_K));
    try {
        ks.matmul(DType::Q8_1, "blk.3.ffn_down_exps.weight");
        FAIL() << "no throw";
    } catch (const moe::Error& e) {
        EXPECT_NE(std::string(e.what()).find("blk.3.ffn_down_exps.weight"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("q8_1"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("iq2_xxs"), std::string::npos);  // the supported list
    }
}

}  // namespace
}  // namespace moe
