// Quantized block formats: dequantization bit-exact against the format definitions (FACTS.md
// section 3), written out here element by element (index -> value) independently of the reference
// loops in src/kernels/ref/quant_*.cpp; quantize -> dequantize error within the step-size bound;
// the generic dequant_row entries; the ActQ8 activation quantizer (SIMD == reference bytes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "kernels/cpu/dequant_row.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/ref/dequant_row.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quantize_act.h"

namespace moe {
namespace {

uint16_t h(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
double hd(const uint8_t* p) { return fp16_to_fp32(h(p)); }

// A random fp16 with exponent in [2^-10, 2^5): keeps every product/difference below exactly
// representable in double, so (float)(exact double) is the one correctly rounded f32 result.
void put_half(Rng& rng, uint8_t* p, bool allow_neg = false) {
    const double v = std::ldexp(1.0 + rng.uniform(), static_cast<int>(rng.next() % 15) - 10) *
                     (allow_neg && (rng.next() & 1) ? -1.0 : 1.0);
    const uint16_t b = fp32_to_fp16(static_cast<float>(v));
    p[0] = static_cast<uint8_t>(b & 0xFF);
    p[1] = static_cast<uint8_t>(b >> 8);
}

// ---- element i of one block, straight from the definitions ----
float q8_0(const uint8_t* b, int i) { return static_cast<float>(hd(b) * static_cast<int8_t>(b[2 + i])); }
int nib(const uint8_t* qs, int i) { return i < 16 ? (qs[i] & 15) : (qs[i - 16] >> 4); }  // Q4_0 placement
float q4_0(const uint8_t* b, int i) { return static_cast<float>(hd(b) * (nib(b + 2, i) - 8)); }
float q4_1(const uint8_t* b, int i) { return static_cast<float>(hd(b) * nib(b + 4, i) + hd(b + 2)); }
int bit5(const uint8_t* qh, int i) { return (qh[i / 8] >> (i % 8)) & 1; }  // bit i of the LE u32
float q5_0(const uint8_t* b, int i) { return static_cast<float>(hd(b) * ((nib(b + 6, i) | bit5(b + 2, i) << 4) - 16)); }
float q5_1(const uint8_t* b, int i) {
    return static_cast<float>(hd(b) * (nib(b + 8, i) | bit5(b + 4, i) << 4) + hd(b + 2));
}
float mxfp4(const uint8_t* b, int i) {
    static const double e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    const int n = nib(b + 1, i);
    const double v = (n & 8 ? -1 : 1) * e2m1[n & 7] + 0.0;  // the table's int8 0 for nibble 8 is +0
    return static_cast<float>(v * std::ldexp(1.0, b[0] - 127));
}
// 6-bit (scale, min) j of Q4_K/Q5_K, FACTS.md get_scale_min_k4.
void scmin(const uint8_t* q, int j, int* sc, int* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}
float q4_k(const uint8_t* b, int i) {
    const int c = i / 64, hi = (i % 64) / 32, l = i % 32, j = 2 * c + hi;
    const int byte = b[16 + 32 * c + l], q = hi ? byte >> 4 : byte & 15;
    int sc, m;
    scmin(b + 4, j, &sc, &m);
    return static_cast<float>(hd(b) * sc * q - hd(b + 2) * m);
}
float q5_k(const uint8_t* b, int i) {
    const int c = i / 64, hi = (i % 64) / 32, l = i % 32, j = 2 * c + hi;
    const int byte = b[48 + 32 * c + l];
    const int q = (hi ? byte >> 4 : byte & 15) | (((b[16 + l] >> j) & 1) << 4);
    int sc, m;
    scmin(b + 4, j, &sc, &m);
    return static_cast<float>(hd(b) * sc * q - hd(b + 2) * m);
}
float q6_k(const uint8_t* b, int i) {
    const int half = i / 128, r = i % 128, sub = r / 32, l = r % 32;
    const int byte = b[64 * half + l + 32 * (sub & 1)];
    const int lo = sub < 2 ? byte & 15 : byte >> 4;
    const int hb = (b[128 + 32 * half + l] >> (2 * sub)) & 3;
    const int sc = static_cast<int8_t>(b[192 + 8 * half + l / 16 + 2 * sub]);
    return static_cast<float>(hd(b + 208) * sc * ((lo | hb << 4) - 32));
}
float q2_k(const uint8_t* b, int i) {
    const int half = i / 128, r = i % 128, s = r / 32, part = (r % 32) / 16, l = r % 16;
    const int q = (b[16 + 32 * half + 16 * part + l] >> (2 * s)) & 3;
    const int sc = b[8 * half + 2 * s + part];
    return static_cast<float>(hd(b + 80) * (sc & 15) * q - hd(b + 82) * (sc >> 4));
}
float q3_k(const uint8_t* b, int i) {
    const int half = i / 128, r = i % 128, s = r / 32, part = (r % 32) / 16, l = r % 16, j = 8 * half + 2 * s + part;
    const int q2 = (b[32 + 32 * half + 16 * part + l] >> (2 * s)) & 3;
    const bool hbit = (b[16 * part + l] >> (4 * half + s)) & 1;
    const uint8_t* sc = b + 96;
    const int lo = j < 8 ? (sc[j] & 15) : (sc[j - 8] >> 4), hi2 = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    return static_cast<float>(hd(b + 108) * ((lo | hi2 << 4) - 32) * (q2 - (hbit ? 0 : 4)));
}

struct Fmt {
    DType t;
    float (*elem)(const uint8_t*, int);
    std::vector<int> half_at;  // byte offsets of fp16 fields (set to moderate random values)
};

const std::vector<Fmt>& formats() {
    static const std::vector<Fmt> f = {
        {DType::Q8_0, q8_0, {0}},   {DType::Q4_0, q4_0, {0}},   {DType::Q4_1, q4_1, {0, 2}},
        {DType::Q5_0, q5_0, {0}},   {DType::Q5_1, q5_1, {0, 2}}, {DType::MXFP4, mxfp4, {}},
        {DType::Q2_K, q2_k, {80, 82}}, {DType::Q3_K, q3_k, {108}}, {DType::Q4_K, q4_k, {0, 2}},
        {DType::Q5_K, q5_k, {0, 2}}, {DType::Q6_K, q6_k, {208}},
    };
    return f;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

TEST(Dequant, RandomBlocksMatchTheDefinitionsBitForBit) {
    Rng rng(0xdeb1);
    for (const Fmt& f : formats()) {
        const DTypeInfo& info = dtype_info(f.t);
        const int nblk = 5;
        std::vector<uint8_t> data(info.bytes * nblk);
        for (int trial = 0; trial < 40; ++trial) {
            for (auto& b : data) b = static_cast<uint8_t>(rng.next());
            for (int k = 0; k < nblk; ++k)
                for (int off : f.half_at) put_half(rng, data.data() + k * info.bytes + off, f.t == DType::Q4_1 || f.t == DType::Q5_1);
            const int64_t n = static_cast<int64_t>(info.block) * nblk;
            std::vector<float> y(n), y2(n), y3(n);
            ASSERT_TRUE(ref::dequantize_row(f.t, data.data(), y.data(), n)) << dtype_name(f.t);
            ref::dequant_row(f.t, data.data(), y2.data(), n);
            for (kernels::Isa isa : kernels::supported_isas()) {  // every cpu::dequant_row path this CPU has
                std::fill(y3.begin(), y3.end(), -1.0f);
                cpu::dequant_row(f.t, data.data(), y3.data(), n, isa);
                for (int k = 0; k < nblk; ++k)
                    for (uint32_t i = 0; i < info.block; ++i) {
                        const int64_t e = k * info.block + i;
                        const float want = f.elem(data.data() + k * info.bytes, static_cast<int>(i));
                        ASSERT_TRUE(same_bits(y[e], want)) << dtype_name(f.t) << " block " << k << " element " << i
                                                           << ": got " << y[e] << " want " << want;
                        ASSERT_TRUE(same_bits(y2[e], want) && same_bits(y3[e], want))
                            << dtype_name(f.t) << " isa " << kernels::isa_name(isa) << " element " << e;
                    }
            }
        }
    }
}

// Hand-built Q4_K block: scales/mins chosen, packed by the FACTS.md rules, every element written out.
TEST(Dequant, HandBuiltQ4KBlock) {
    const int sc[8] = {1, 63, 17, 32, 40, 5, 63, 0}, mn[8] = {0, 2, 63, 33, 16, 48, 1, 62};
    uint8_t b[144] = {};
    const uint16_t d = fp32_to_fp16(0.25f), dmin = fp32_to_fp16(0.125f);
    std::memcpy(b, &d, 2);
    std::memcpy(b + 2, &dmin, 2);
    uint8_t* s = b + 4;
    for (int j = 0; j < 4; ++j) {
        s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));       // low 6 bits + top bits of j+4
        s[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
        s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
    for (int l = 0; l < 128; ++l) b[16 + l] = static_cast<uint8_t>((l * 7) & 0xFF);  // nibbles 0..15 all appear
    float y[256];
    ref::dequantize_row_q4_k(b, y, 256);
    for (int i = 0; i < 256; ++i) {
        const int c = i / 64, hi = (i % 64) / 32, l = i % 32, j = 2 * c + hi;
        const int byte = (((32 * c + l) * 7) & 0xFF), q = hi ? byte >> 4 : byte & 15;
        EXPECT_EQ(y[i], static_cast<float>(0.25 * sc[j] * q - 0.125 * mn[j])) << "element " << i;
    }
    // Round trip of the packing helper used by the quantizers.
    uint8_t packed[12];
    uint8_t scu[8], mnu[8];
    for (int j = 0; j < 8; ++j) scu[j] = static_cast<uint8_t>(sc[j]), mnu[j] = static_cast<uint8_t>(mn[j]);
    ref::pack_scale_min_k4(scu, mnu, packed);
    EXPECT_EQ(0, std::memcmp(packed, s, 12));
}

// Hand-built Q6_K and Q8_0 / Q4_0 spot values.
TEST(Dequant, HandBuiltSpotValues) {
    uint8_t b6[210] = {};
    b6[0] = 0x3F;          // ql[0]: low nibble 15 (element 0), high nibble 3 (element 64)
    b6[128] = 0b11100100;  // qh[0]: element 0 bits 00, element 32 bits 01, element 64 bits 10, element 96 bits 11
    b6[32] = 0xA5;         // ql[32]: element 32 low nibble 5, element 96 high nibble 10
    b6[192] = static_cast<uint8_t>(-3);
    b6[194] = 7;
    b6[196] = 2;
    b6[198] = static_cast<uint8_t>(-128);
    const uint16_t d = fp32_to_fp16(0.5f);
    std::memcpy(b6 + 208, &d, 2);
    float y[256];
    ref::dequantize_row_q6_k(b6, y, 256);
    EXPECT_EQ(y[0], 0.5f * -3 * (15 - 32));
    EXPECT_EQ(y[32], 0.5f * 7 * ((5 | 1 << 4) - 32));
    EXPECT_EQ(y[64], 0.5f * 2 * ((3 | 2 << 4) - 32));
    EXPECT_EQ(y[96], 0.5f * -128 * ((10 | 3 << 4) - 32));
    EXPECT_EQ(y[1], 0.5f * -3 * -32);

    uint8_t b4[18] = {};
    const uint16_t d4 = fp32_to_fp16(-1.5f);
    std::memcpy(b4, &d4, 2);
    b4[2] = 0xF0;  // element 0 = 0 - 8, element 16 = 15 - 8
    float y4[32];
    ref::dequantize_row_q4_0(b4, y4, 32);
    EXPECT_EQ(y4[0], 12.0f);
    EXPECT_EQ(y4[16], -10.5f);
    EXPECT_EQ(y4[1], 12.0f);

    uint8_t bm[17] = {};
    bm[0] = 130;   // 2^(130-127) = 8
    bm[1] = 0x9F;  // element 0: low nibble 15, element 16: high nibble 9
    float ym[32];
    ref::dequantize_row_mxfp4(bm, ym, 32);
    EXPECT_EQ(ym[0], -48.0f);  // kvalues[15] = -12, 2^(130-128) = 4
    EXPECT_EQ(ym[16], -4.0f);  // nibble 9 -> kvalues -1 -> -4
    EXPECT_EQ(ym[1], 0.0f);
}

// Quantize -> dequantize: every element within the step-size bound derived in quant_*.cpp.
TEST(Dequant, QuantizeRoundTripWithinStepBound) {
    Rng rng(0x9a11);
    const int64_t n = 1024;
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        for (int trial = 0; trial < 20; ++trial) {
            std::vector<float> x(n);
            const float scale = std::ldexp(1.0f, static_cast<int>(rng.next() % 8) - 4);
            for (auto& v : x) v = rng.uniform(-1.0f, 1.0f) * scale + (trial % 3 == 0 ? 0.3f * scale : 0.0f);
            const DTypeInfo& info = dtype_info(t);
            std::vector<uint8_t> q(n / info.block * info.bytes);
            std::vector<float> y(n);
            ASSERT_TRUE(ref::quantize_row(t, x.data(), q.data(), n));
            ref::dequant_row(t, q.data(), y.data(), n);
            double se = 0, sx = 0;
            for (int64_t i = 0; i < n; ++i) {
                const uint8_t* b = q.data() + (i / info.block) * info.bytes;
                const int e = static_cast<int>(i % info.block);
                double bound = 0;
                // fp16 rounding of a scale moves a level-q value by <= |q| * 2^-11 * scale: folded in below.
                if (t == DType::Q8_0) {
                    bound = hd(b) * (0.5 + 127.0 / 2048);
                } else if (t == DType::Q4_0) {
                    bound = std::fabs(hd(b)) * (nib(b + 2, e) == 15 ? 1.0 : 0.5);  // +7 clamp: <= |d|
                } else if (t == DType::Q6_K) {
                    const double d = hd(b + 208);
                    const int half = e / 128, sub = (e % 128) / 32, l = e % 32;
                    const int sc = static_cast<int8_t>(b[192 + 8 * half + l / 16 + 2 * sub]);
                    const int lo = (b[64 * half + l + 32 * (sub & 1)] >> (sub < 2 ? 0 : 4)) & 15;
                    const int level = lo | (((b[128 + 32 * half + l] >> (2 * sub)) & 3) << 4);
                    // Inside the grid |S|/2. The largest-magnitude value v maps to -32; values of
                    // the other sign reach +32 and clamp at +31: one step |S|, plus the scale's
                    // 8-bit rounding moving the end by 32 * |s - S| <= 16 d.
                    bound = level == 0 || level == 63 ? std::fabs(d * sc) + 16 * d : std::fabs(d * sc) / 2;
                } else {
                    const int levels = t == DType::Q4_K ? 15 : 31;
                    int sc, m;
                    scmin(b + 4, e / 32, &sc, &m);
                    // S/2 inside the grid; at the clamps the grid ends are off by <= dmin/2 (min) and
                    // levels * d/2 (scale rounding).
                    bound = hd(b) * sc / 2 + hd(b + 2) / 2 + levels * hd(b) / 2;
                }
                bound = bound * (1 + 1e-6) + 1e-7 * std::fabs(x[i]);
                ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound)
                    << dtype_name(t) << " element " << i << " x=" << x[i] << " y=" << y[i];
                se += (y[i] - x[i]) * (y[i] - x[i]);
                sx += static_cast<double>(x[i]) * x[i];
            }
            // Overall: uniform data over ~2^bits levels gives relative RMS ~ 1 / (sqrt(12) * levels/2).
            const double max_rel = t == DType::Q8_0 ? 0.01 : t == DType::Q6_K ? 0.03 : t == DType::Q5_K ? 0.05 : 0.12;
            EXPECT_LT(std::sqrt(se / sx), max_rel) << dtype_name(t);
        }
    }
}

TEST(Dequant, GenericEntriesAndErrors) {
    for (const Fmt& f : formats()) EXPECT_TRUE(ref::dequant_row_supported(f.t)) << dtype_name(f.t);
    std::vector<uint8_t> q(300);
    std::vector<float> y(256);
    EXPECT_THROW(ref::dequant_row(DType::Q8_K, q.data(), y.data(), 256), moe::Error);
    EXPECT_THROW(ref::dequant_row(DType::Q4_K, q.data(), y.data(), 128), moe::Error);  // not whole blocks
    EXPECT_FALSE(ref::quantize_row(DType::Q2_K, y.data(), q.data(), 256));
}

// ActQ8, every kind: the per-ISA quantizers give the reference bytes; values within half a step of x.
TEST(ActQ8, SimdMatchesReferenceAndErrorWithinHalfStep) {
    Rng rng(0xac78);
    for (ref::ActQuant kind : {ref::kActQ8_0, ref::kActQ8_1, ref::kActQ8_K}) {
        SCOPED_TRACE(ref::act_quant_name(kind));
        // Q8_0 / Q8_1: levels from the f32 scale d, values with the f16 one (127 |d - d16| <= 127 * 2^-11 d)
        const float half = kind == ref::kActQ8_K ? 0.5f * (1 + 1e-5f) : 0.5f + 127.0f / 2048 + 1e-3f;
        for (int64_t K : {1, 16, 31, 32, 33, 64, 96, 100, 256, 300, 4352}) {
            const int64_t m = 3;
            std::vector<float> x(m * K + 5);
            for (auto& v : x) v = rng.uniform(-3.0f, 3.0f);
            for (int64_t i = 0; i < std::min<int64_t>(K, 32); ++i) x[i] = 0.0f;  // an all-zero group
            if (K >= 300) {  // a whole zero 256-block in row 1, ties of |max| in row 2
                for (int64_t i = 0; i < 256; ++i) x[K + i] = 0.0f;
                x[2 * K + 7] = 5.0f, x[2 * K + 9] = -5.0f;
            }
            const size_t stride = ref::act_q8_row_bytes(K) + 64;
            std::vector<unsigned char> want(stride * m, 0xEE);
            for (int64_t r = 0; r < m; ++r) ref::quantize_act_q8(x.data() + r * K, K, want.data() + r * stride, kind);
            for (kernels::Isa isa : kernels::supported_isas()) {
                std::vector<unsigned char> got(stride * m, 0xEE);
                kernels::quantize_act_rows(isa, kind, x.data(), K, m, K, got.data(), stride);
                for (int64_t r = 0; r < m; ++r)
                    ASSERT_EQ(0, std::memcmp(got.data() + r * stride, want.data() + r * stride, ref::act_q8_row_bytes(K)))
                        << "K=" << K << " isa " << kernels::isa_name(isa);
            }
            for (int64_t r = 0; r < m; ++r) {
                const unsigned char* row = want.data() + r * stride;
                const ref::ActQ8Row q = ref::act_q8_row(const_cast<unsigned char*>(row), K);
                for (int64_t i = 0; i < K; ++i) {
                    const float d = std::fabs(q.dxv[16 * (i / 64) + 8 * ((i / 32) % 2)]);
                    EXPECT_LE(std::fabs(ref::act_q8_value(row, K, i) - x[r * K + i]), d * half + 1e-30f) << K << " " << i;
                }
            }
        }
    }
}

// One row filled column range by column range (kernels::quantize_act_cols, ranges in a random order
// on a buffer of garbage, as the grouped FFN's gate / up tiles fill their h rows) gives the bytes of
// the whole row quantized at once, on every ISA path; misaligned ranges are refused.
TEST(ActQ8, ColumnRangesGiveTheWholeRowsBytes) {
    Rng rng(0xc015);
    for (ref::ActQuant kind : {ref::kActQ8_0, ref::kActQ8_1, ref::kActQ8_K}) {
        SCOPED_TRACE(ref::act_quant_name(kind));
        const int64_t unit = kind == ref::kActQ8_K ? 256 : 64;  // range edges: multiples of 64 and of the block
        for (int64_t K : {64, 100, 300, 1024, 1408, 2880}) {
            std::vector<float> x(static_cast<size_t>(K));
            for (auto& v : x) v = rng.uniform(-4.0f, 4.0f);
            if (K >= 512) std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // a zero block inside a range
            const size_t bytes = ref::act_q8_row_bytes(K);
            std::vector<unsigned char> want(bytes, 0xEE);
            ref::quantize_act_q8(x.data(), K, want.data(), kind);
            for (int trial = 0; trial < 4; ++trial) {
                std::vector<int64_t> edge = {0, K};  // random inner edges, then the ranges in a random order
                for (int64_t c = unit; c < K; c += unit)
                    if (rng.below(2)) edge.push_back(c);
                std::sort(edge.begin(), edge.end());
                std::vector<size_t> order(edge.size() - 1);
                for (size_t i = 0; i < order.size(); ++i) order[i] = i;
                for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(static_cast<uint32_t>(i))]);
                for (kernels::Isa isa : kernels::supported_isas()) {
                    std::vector<unsigned char> got(bytes, 0xEE);
                    for (size_t i : order) {
                        const int64_t c0 = edge[i], c1 = edge[i + 1];
                        ASSERT_TRUE(ref::act_q8_cols_ok(kind, K, c0, c1)) << c0 << " " << c1;
                        kernels::quantize_act_cols(isa, kind, x.data() + c0, K, c0, c1, got.data());
                    }
                    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), bytes))
                        << "K=" << K << " ranges " << order.size() << " isa " << kernels::isa_name(isa);
                }
            }
        }
        EXPECT_FALSE(ref::act_q8_cols_ok(kind, 1024, 32, 256));   // start off 64
        EXPECT_FALSE(ref::act_q8_cols_ok(kind, 1024, 0, 1025));   // past the row
        EXPECT_FALSE(ref::act_q8_cols_ok(kind, 1024, 256, 256));  // empty
        EXPECT_EQ(kind != ref::kActQ8_K, ref::act_q8_cols_ok(kind, 1024, 64, 128));  // inside a 256 block
        EXPECT_TRUE(ref::act_q8_cols_ok(kind, 300, 256, 300));  // the row's short last block
    }
}

// The llama.cpp semantics of each kind (ggml's quantize_row_q8_0 / _q8_1 / _q8_K), by hand.
TEST(ActQ8, KindsFollowGgmlBlockQuantizers) {
    const int64_t K = 512;
    std::vector<float> x(K);
    Rng rng(0x5eed);
    for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
    x[3] = 2.0f;    // block 0's largest |x|, positive: Q8_K scale negative
    x[40] = -2.0f;  // tie in |x| later in the block: the first one sets the sign
    x[300] = -4.0f; // block 1: negative max
    std::vector<unsigned char> row(ref::act_q8_row_bytes(K));
    const ref::ActQ8Row q = ref::act_q8_row(row.data(), K);
    auto d_of = [&](int64_t g) { return q.dxv[16 * (g / 2) + 8 * (g % 2)]; };

    ref::quantize_act_q8(x.data(), K, row.data(), ref::kActQ8_K);
    EXPECT_EQ(d_of(0), 1.0f / (-127.0f / 2.0f));  // d = 1 / iscale, iscale = -127 / max
    EXPECT_EQ(q.qs[3], -127);
    EXPECT_EQ(q.qs[40], 127);
    for (int64_t g = 0; g < 8; ++g) EXPECT_EQ(d_of(g), d_of(0)) << "one scale per 256";
    EXPECT_EQ(d_of(8), 1.0f / (127.0f / 4.0f));
    EXPECT_EQ(q.qs[300], -127);
    EXPECT_EQ(q.qs[5], static_cast<int8_t>(std::nearbyint(x[5] * (-127.0f / 2.0f))));

    ref::quantize_act_q8(x.data(), K, row.data(), ref::kActQ8_0);
    int32_t s = 0;
    float amax = 0.0f;
    for (int64_t i = 32; i < 64; ++i) s += q.qs[i], amax = std::max(amax, std::fabs(x[i]));
    EXPECT_EQ(d_of(1), fp16_to_fp32(fp32_to_fp16(amax / 127.0f)));  // block_q8_0's f16 d
    EXPECT_EQ(q.qs[40], -127);
    EXPECT_EQ(q.qs[33], static_cast<int8_t>(std::nearbyint(x[33] * (127.0f / amax))));
    EXPECT_EQ(q.dxs[1], d_of(1) * static_cast<float>(s));
    EXPECT_NE(d_of(1), d_of(2)) << "one scale per 32";

    ref::quantize_act_q8(x.data(), K, row.data(), ref::kActQ8_1);
    EXPECT_EQ(d_of(1), fp16_to_fp32(fp32_to_fp16(amax / 127.0f)));
    EXPECT_EQ(q.dxs[1], fp16_to_fp32(fp32_to_fp16(amax / 127.0f * static_cast<float>(s))));  // block_q8_1's s

    EXPECT_EQ(kernels::act_quant(DType::Q4_K), ref::kActQ8_K);
    EXPECT_EQ(kernels::act_quant(DType::IQ2_XXS), ref::kActQ8_K);
    EXPECT_EQ(kernels::act_quant(DType::IQ4_NL), ref::kActQ8_0);
    EXPECT_EQ(kernels::act_quant(DType::Q5_1), ref::kActQ8_1);
    EXPECT_EQ(kernels::act_quant(DType::F16), ref::kActNone);
}

}  // namespace
}  // namespace moe
