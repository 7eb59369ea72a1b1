// IQ family and ternary formats: dequantization bit-exact against the format definitions, written
// out here element by element (index -> value, signs from the parity rule computed here) apart from
// the reference loops in src/kernels/ref/quant_iq*.cpp / quant_tq.cpp; the codebook tables checked
// by property (size, value set, order, entries derived by hand from the format description); the
// random-block generator gives finite blocks of the requested amplitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <set>
#include <iterator>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "kernels/cpu/dequant_row.h"
#include "kernels/ref/dequant_row.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quant_random.h"

namespace moe {
namespace {

double hd(const uint8_t* p) { return fp16_to_fp32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }
uint32_t u16(const uint8_t* p) { return p[0] | (p[1] << 8); }
uint32_t u32(const uint8_t* p) { return u16(p) | (u16(p + 2) << 16); }
int nib(const uint8_t* qs, int i) { return i < 16 ? (qs[i] & 15) : (qs[i - 16] >> 4); }
int byte_of(uint64_t e, int j) { return static_cast<int>((e >> (8 * j)) & 0xFF); }
// Sign of element j of a group of 8 from 7 stored bits: bit j for j < 7, even parity for j = 7.
bool neg7(uint32_t bits7, int j) { return j < 7 ? (bits7 >> j) & 1 : std::popcount(bits7 & 127u) % 2 == 1; }
float sgn(bool neg, double v) { const float f = static_cast<float>(v); return neg ? -f : f; }

float iq4_nl(const uint8_t* b, int i) { return static_cast<float>(hd(b) * ref::kIq4nlValues[nib(b + 2, i)]); }
float iq4_xs(const uint8_t* b, int i) {
    const int ib = i / 32;
    const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((u16(b + 2) >> (2 * ib)) & 3) << 4);
    const float dl = static_cast<float>(hd(b) * (ls - 32));
    return static_cast<float>(static_cast<double>(dl) * ref::kIq4nlValues[nib(b + 8 + 16 * ib, i % 32)]);
}
float db_quarter(double d, int s) { return static_cast<float>(static_cast<double>(static_cast<float>(d * (s + 0.5))) * 0.25); }
float iq2_xxs(const uint8_t* b, int i) {
    const int ib = i / 32, l = (i % 32) / 8, j = i % 8;
    const uint32_t a0 = u32(b + 2 + 8 * ib), a1 = u32(b + 6 + 8 * ib);
    const float db = db_quarter(hd(b), static_cast<int>(a1 >> 28));
    return sgn(neg7(a1 >> (7 * l), j), static_cast<double>(db) * byte_of(ref::kIq2xxsGrid[(a0 >> (8 * l)) & 255], j));
}
float iq2_xs(const uint8_t* b, int i) {
    const uint32_t q = u16(b + 2 + 2 * (i / 8));
    const float db = db_quarter(hd(b), (b[66 + i / 32] >> (4 * ((i % 32) / 16))) & 15);
    return sgn(neg7(q >> 9, i % 8), static_cast<double>(db) * byte_of(ref::kIq2xsGrid[q & 511], i % 8));
}
float iq2_s(const uint8_t* b, int i) {  // d | qs[32] @2 | signs[32] @34 | qh[8] @66 | scales[8] @74
    const int g = i / 8, j = i % 8;
    const int idx = b[2 + g] | (((b[66 + g / 4] >> (2 * (g % 4))) & 3) << 8);
    const float db = db_quarter(hd(b), (b[74 + i / 32] >> (4 * ((i % 32) / 16))) & 15);
    return sgn((b[34 + g] >> j) & 1, static_cast<double>(db) * byte_of(ref::kIq2sGrid[idx], j));
}
float iq3_xxs(const uint8_t* b, int i) {  // d | qs[64] @2 | 8 x u32 scale+signs @66
    const int ib = i / 32, l = (i % 32) / 8, j = i % 8;
    const uint32_t w = u32(b + 66 + 4 * ib);
    const float db = static_cast<float>(static_cast<double>(static_cast<float>(hd(b) * ((w >> 28) + 0.5))) * 0.5);
    const uint32_t e = ref::kIq3xxsGrid[b[2 + 8 * ib + 2 * l + j / 4]];
    return sgn(neg7(w >> (7 * l), j), static_cast<double>(db) * byte_of(e, j % 4));
}
float iq3_s(const uint8_t* b, int i) {  // d | qs[64] @2 | qh[8] @66 | signs[32] @74 | scales[4] @106
    const int ib = i / 32, t = (i % 32) / 4;
    const int idx = b[2 + 8 * ib + t] | (((b[66 + ib] >> t) & 1) << 8);
    const float db = static_cast<float>(hd(b) * (1 + 2 * ((b[106 + ib / 2] >> (4 * (ib % 2))) & 15)));
    return sgn((b[74 + i / 8] >> (i % 8)) & 1, static_cast<double>(db) * byte_of(ref::kIq3sGrid[idx], i % 4));
}
float iq1(double dl_exact, uint64_t e, int j, bool neg) {
    const float dl = static_cast<float>(dl_exact);
    return static_cast<float>(static_cast<double>(dl) * (static_cast<int8_t>(byte_of(e, j)) + (neg ? -0.125 : 0.125)));
}
float iq1_s(const uint8_t* b, int i) {  // d | qs[32] @2 | qh[8] (u16) @34
    const int g = i / 8;
    const uint32_t qh = u16(b + 34 + 2 * (i / 32));
    const int idx = b[2 + g] | (((qh >> (3 * (g % 4))) & 7) << 8);
    return iq1(hd(b) * (2 * ((qh >> 12) & 7) + 1), ref::kIq1sGrid[idx], i % 8, qh & 0x8000);
}
float iq1_m(const uint8_t* b, int i) {  // qs[32] @0 | qh[16] @32 | scales[8] (4 x u16) @48
    uint32_t bits = 0;
    for (int k = 0; k < 4; ++k) bits |= (u16(b + 48 + 2 * k) >> 12) << (4 * k);
    const double d = fp16_to_fp32(static_cast<uint16_t>(bits));
    const int g = i / 8, ib = i / 32;
    const int s = (u16(b + 48 + 2 * (ib / 2)) >> (6 * (ib % 2) + 3 * ((i % 32) / 16))) & 7;
    const int h = b[32 + g / 2] >> (4 * (g % 2));
    return iq1(d * (2 * s + 1), ref::kIq1sGrid[b[g] | ((h & 7) << 8)], i % 8, h & 8);
}
int trit(uint8_t q, int n) {  // TQ1_0 (FACTS.md): the n-th base-3 digit, most significant first
    int p = 1;
    for (int k = 0; k < n; ++k) p *= 3;
    return ((static_cast<uint8_t>(q * p)) * 3) >> 8;
}
float tq1_0(const uint8_t* b, int i) {  // qs[48] @0 | qh[4] @48 | d @52
    int t;
    if (i < 160) t = trit(b[i % 32], i / 32);
    else if (i < 240) t = trit(b[32 + (i - 160) % 16], (i - 160) / 16);
    else t = trit(b[48 + (i - 240) % 4], (i - 240) / 4);
    return static_cast<float>((t - 1) * hd(b + 52));
}
float tq2_0(const uint8_t* b, int i) {  // qs[64] @0 | d @64
    const int q = (b[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
    return static_cast<float>((q - 1) * hd(b + 64));
}

struct Fmt {
    DType t;
    float (*elem)(const uint8_t*, int);
    int half_at;  // fp16 scale offset (-1: IQ1_M's spread scale)
};
const Fmt kFormats[] = {
    {DType::IQ4_NL, iq4_nl, 0}, {DType::IQ4_XS, iq4_xs, 0},   {DType::IQ2_XXS, iq2_xxs, 0},
    {DType::IQ2_XS, iq2_xs, 0}, {DType::IQ2_S, iq2_s, 0},     {DType::IQ3_XXS, iq3_xxs, 0},
    {DType::IQ3_S, iq3_s, 0},   {DType::IQ1_S, iq1_s, 0},     {DType::IQ1_M, iq1_m, -1},
    {DType::TQ1_0, tq1_0, 52},  {DType::TQ2_0, tq2_0, 64},
};

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// fp16 with exponent in [2^-10, 2^5), either sign: every product above stays exact in double.
uint16_t rand_half(Rng& rng) {
    const double v = std::ldexp(1.0 + rng.uniform(), static_cast<int>(rng.next() % 15) - 10) * ((rng.next() & 1) ? -1 : 1);
    return fp32_to_fp16(static_cast<float>(v));
}

TEST(DequantIQ, RandomBlocksMatchTheDefinitionsBitForBit) {
    Rng rng(0x1a2b);
    for (const Fmt& f : kFormats) {
        const DTypeInfo& info = dtype_info(f.t);
        const int nblk = 3;
        std::vector<uint8_t> data(info.bytes * nblk);
        for (int trial = 0; trial < 40; ++trial) {
            for (auto& b : data) b = static_cast<uint8_t>(rng.next());
            for (int k = 0; k < nblk; ++k) {
                uint8_t* blk = data.data() + k * info.bytes;
                const uint16_t h = rand_half(rng);
                if (f.half_at >= 0) {
                    std::memcpy(blk + f.half_at, &h, 2);
                } else {  // IQ1_M: nibble k of the scale -> top nibble of u16 word k
                    for (int w = 0; w < 4; ++w) blk[48 + 2 * w + 1] = static_cast<uint8_t>((blk[48 + 2 * w + 1] & 0x0F) | (((h >> (4 * w)) & 15) << 4));
                }
            }
            const int64_t n = static_cast<int64_t>(info.block) * nblk;
            std::vector<float> y(n), y2(n), y3(n);
            ASSERT_TRUE(ref::dequantize_row(f.t, data.data(), y.data(), n)) << dtype_name(f.t);
            ref::dequant_row(f.t, data.data(), y2.data(), n);
            cpu::dequant_row(f.t, data.data(), y3.data(), n);
            for (int k = 0; k < nblk; ++k)
                for (uint32_t i = 0; i < info.block; ++i) {
                    const int64_t e = k * info.block + i;
                    const float want = f.elem(data.data() + k * info.bytes, static_cast<int>(i));
                    ASSERT_TRUE(same_bits(y[e], want)) << dtype_name(f.t) << " block " << k << " element " << i
                                                       << ": got " << y[e] << " want " << want;
                    ASSERT_TRUE(same_bits(y2[e], want) && same_bits(y3[e], want)) << dtype_name(f.t);
                }
        }
        EXPECT_TRUE(ref::dequant_row_supported(f.t));
    }
}

// Hand-built blocks: values written from the format description alone.
TEST(DequantIQ, HandBuiltSpotValues) {
    // IQ4_NL: d = 0.5; byte 0 = 0xF0 -> element 0 level index 0 (-127), element 16 index 15 (113).
    uint8_t nl[18] = {};
    const uint16_t half = fp32_to_fp16(0.5f);
    std::memcpy(nl, &half, 2);
    nl[2] = 0xF0;
    nl[3] = 0x98;  // element 1: index 8 (+1), element 17: index 9 (+13)
    float y[256];
    ref::dequantize_row_iq4_nl(nl, y, 32);
    EXPECT_EQ(y[0], -63.5f);
    EXPECT_EQ(y[16], 56.5f);
    EXPECT_EQ(y[1], 0.5f);
    EXPECT_EQ(y[17], 6.5f);
    // TQ2_0: d = 2; byte 0 = 0b10'01'00'11 -> elements 0, 32, 64, 96 = (3-1), (0-1), (1-1), (2-1) times 2.
    uint8_t t2[66] = {};
    const uint16_t two = fp32_to_fp16(2.0f);
    std::memcpy(t2 + 64, &two, 2);
    t2[0] = 0b10010011;
    ref::dequantize_row_tq2_0(t2, y, 256);
    EXPECT_EQ(y[0], 4.0f);
    EXPECT_EQ(y[32], -2.0f);
    EXPECT_EQ(y[64], 0.0f);
    EXPECT_EQ(y[96], 2.0f);
    // TQ1_0: 5 trits t0..t4 (most significant first) of v = 2*81 + 0*27 + 1*9 + 2*3 + 1 = 178 are
    // stored as q = ceil(v * 256 / 243) = 188; elements 0, 32, 64, 96, 128 = (t - 1) * d.
    uint8_t t1[54] = {};
    std::memcpy(t1 + 52, &two, 2);
    t1[0] = 188;
    ref::dequantize_row_tq1_0(t1, y, 256);
    EXPECT_EQ(y[0], 2.0f);
    EXPECT_EQ(y[32], -2.0f);
    EXPECT_EQ(y[64], 0.0f);
    EXPECT_EQ(y[96], 2.0f);
    EXPECT_EQ(y[128], 0.0f);
    // IQ2_XXS: grid entry 0 (all 8), scale s = 3 -> db = d * 3.5 / 4; sign bits 0b0000001 -> element 0
    // negative and (odd count) element 7 negative too.
    uint8_t x2[66] = {};
    std::memcpy(x2, &two, 2);
    const uint32_t a1 = (3u << 28) | 1u;
    std::memcpy(x2 + 6, &a1, 4);
    ref::dequantize_row_iq2_xxs(x2, y, 256);
    EXPECT_EQ(y[0], -14.0f);  // 2 * 3.5 / 4 * 8
    EXPECT_EQ(y[1], 14.0f);
    EXPECT_EQ(y[7], -14.0f);
    EXPECT_EQ(y[8], 14.0f);
    // IQ1_S: grid entry 0 (all -1), scale bits 2 -> dl = d * 5, delta sign bit set -> -1/8.
    uint8_t s1[50] = {};
    std::memcpy(s1, &two, 2);
    const uint16_t qh = (2u << 12) | 0x8000u;
    std::memcpy(s1 + 34, &qh, 2);
    ref::dequantize_row_iq1_s(s1, y, 256);
    EXPECT_EQ(y[0], 10.0f * (-1.125f));
    EXPECT_EQ(y[31], 10.0f * (-1.125f));
    EXPECT_EQ(y[32], 2.0f * (-1.0f + 0.125f));  // group 1: qh 0 -> dl = d, delta +1/8
}

template <typename T, size_t N>
std::set<int> byte_values(const T (&grid)[N], int per) {
    std::set<int> v;
    for (T e : grid)
        for (int j = 0; j < per; ++j) v.insert(byte_of(static_cast<uint64_t>(e), j));
    return v;
}

TEST(IqTables, SizesValueSetsAndHandDerivedEntries) {
    // Sizes: 2^(index bits) of each format.
    EXPECT_EQ(std::size(ref::kIq2xxsGrid), 256u);
    EXPECT_EQ(std::size(ref::kIq2xsGrid), 512u);
    EXPECT_EQ(std::size(ref::kIq2sGrid), 1024u);
    EXPECT_EQ(std::size(ref::kIq3xxsGrid), 256u);
    EXPECT_EQ(std::size(ref::kIq3sGrid), 512u);
    EXPECT_EQ(std::size(ref::kIq1sGrid), 2048u);
    // Value sets: IQ2 magnitudes {8, 25, 43}; IQ3_XXS 8 levels 4, 12, ..., 52 and 62 (not 60);
    // IQ3_S odd 1..15; IQ1 {-1, 0, 1}.
    const std::set<int> iq2 = {8, 25, 43};
    EXPECT_EQ(byte_values(ref::kIq2xxsGrid, 8), iq2);
    EXPECT_EQ(byte_values(ref::kIq2xsGrid, 8), iq2);
    EXPECT_EQ(byte_values(ref::kIq2sGrid, 8), iq2);
    std::set<int> iq3xxs, iq3s;
    for (int k = 0; k < 8; ++k) iq3xxs.insert(k < 7 ? 8 * k + 4 : 62), iq3s.insert(2 * k + 1);
    EXPECT_EQ(byte_values(ref::kIq3xxsGrid, 4), iq3xxs);
    EXPECT_EQ(byte_values(ref::kIq3sGrid, 4), iq3s);
    EXPECT_EQ(byte_values(ref::kIq1sGrid, 8), (std::set<int>{0x00, 0x01, 0xFF}));
    // Entries distinct and in ascending order of the packed value (the published ordering).
    auto sorted_unique = [](const auto& g) {
        for (size_t i = 1; i < std::size(g); ++i)
            if (!(g[i - 1] < g[i])) return false;
        return true;
    };
    EXPECT_TRUE(sorted_unique(ref::kIq2xxsGrid));
    EXPECT_TRUE(sorted_unique(ref::kIq2xsGrid));
    EXPECT_TRUE(sorted_unique(ref::kIq2sGrid));
    EXPECT_TRUE(sorted_unique(ref::kIq3xxsGrid));
    EXPECT_TRUE(sorted_unique(ref::kIq3sGrid));
    // First points: every element at the smallest magnitude (IQ1: all -1, the grid's own order).
    EXPECT_EQ(ref::kIq2xxsGrid[0], 0x0808080808080808ull);
    EXPECT_EQ(ref::kIq2xxsGrid[1], 0x080808080808082bull);  // element 0 raised to 43
    EXPECT_EQ(ref::kIq3xxsGrid[0], 0x04040404u);
    EXPECT_EQ(ref::kIq3sGrid[0], 0x01010101u);
    EXPECT_EQ(ref::kIq1sGrid[0], 0xffffffffffffffffull);
    // Sign rule: even number of negatives; hand-derived entries of the published sign table.
    for (unsigned i = 0; i < 128; ++i) EXPECT_EQ(std::popcount(static_cast<unsigned>(ref::iq_signs8(i))) % 2, 0);
    EXPECT_EQ(ref::iq_signs8(0), 0);
    EXPECT_EQ(ref::iq_signs8(1), 129);  // one negative: the parity bit adds element 7
    EXPECT_EQ(ref::iq_signs8(3), 3);
    EXPECT_EQ(ref::iq_signs8(127), 255);
    // IQ4_NL levels: 16, strictly increasing, within int8, the ends -127 and 113.
    for (int i = 1; i < 16; ++i) EXPECT_LT(ref::kIq4nlValues[i - 1], ref::kIq4nlValues[i]);
    EXPECT_EQ(ref::kIq4nlValues[0], -127);
    EXPECT_EQ(ref::kIq4nlValues[15], 113);
    // TQ1_0 trit extraction inverts the packing q = ceil(v * 256 / 243) for every 5-trit v.
    for (int v = 0; v < 243; ++v) {
        const auto q = static_cast<uint8_t>((v * 256 + 242) / 243);
        int rest = v;
        for (int n = 4; n >= 0; --n, rest /= 3) EXPECT_EQ(ref::tq1_trit(q, n), rest % 3) << v << " " << n;
    }
}

TEST(DequantIQ, RandomBlocksAreFiniteWithTheAskedAmplitude) {
    Rng rng(0x5eed);
    for (uint32_t id = 0; id < 64; ++id) {
        const DTypeInfo* info = find_dtype(id);
        if (!info || !info->quantized || !ref::can_dequantize(info->type)) continue;
        const int64_t nb = 64;
        std::vector<uint8_t> q(info->bytes * nb);
        ASSERT_TRUE(ref::fill_random_blocks(info->type, rng, q.data(), nb, 0.1f)) << info->name;
        std::vector<float> y(info->block * nb);
        ref::dequant_row(info->type, q.data(), y.data(), static_cast<int64_t>(y.size()));
        float amax = 0;
        for (float v : y) {
            ASSERT_TRUE(std::isfinite(v)) << info->name;
            amax = std::max(amax, std::fabs(v));
        }
        EXPECT_GT(amax, 0.01f) << info->name;
        EXPECT_LT(amax, 0.5f) << info->name;
    }
}

}  // namespace
}  // namespace moe
