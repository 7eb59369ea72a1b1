#pragma once
// Codebooks and sign tables of the IQ formats (ggml "i-quants"). The grids are data published with
// the format (see the provenance note in iq{1,2,3}_grid*.cpp); the sign table and the IQ4 values
// are defined here. Entry e of a grid packs the values of one group of 4 or 8 weights, value j in
// byte j (little-endian), so grid_byte(kIq2xxsGrid[e], j) is the magnitude of element j.
#include <cstdint>

namespace moe::ref {

extern const uint64_t kIq2xxsGrid[256];  // IQ2_XXS: 8 magnitudes in {8, 25, 43}
extern const uint64_t kIq2xsGrid[512];   // IQ2_XS:  8 magnitudes in {8, 25, 43}
extern const uint64_t kIq2sGrid[1024];   // IQ2_S:   8 magnitudes in {8, 25, 43}
extern const uint32_t kIq3xxsGrid[256];  // IQ3_XXS: 4 magnitudes in {4, 12, ..., 52, 62}
extern const uint32_t kIq3sGrid[512];    // IQ3_S:   4 magnitudes in {1, 3, ..., 15} (odd)
extern const uint64_t kIq1sGrid[2048];   // IQ1_S / IQ1_M: 8 int8 values in {-1, 0, +1}
// IQ4_NL / IQ4_XS: the 16 non-uniform int8 levels a nibble selects.
extern const int8_t kIq4nlValues[16];
// IQ1_S / IQ1_M: the shift added to every grid value of a group of 8, +-1/8 (sign from a flag).
constexpr float kIq1Delta = 0.125f;

inline uint8_t grid_byte(uint64_t entry, int j) { return static_cast<uint8_t>(entry >> (8 * j)); }

// The IQ2/IQ3 sign scheme: 7 stored bits s select the signs of elements 0..6 of a group of 8 (bit
// j set = element j negative); element 7's sign makes the number of negatives even (parity bit).
// Returns the 8-bit mask (bit j = element j negative).
constexpr uint8_t iq_signs8(unsigned s7) {
    unsigned p = s7 & 127u, par = 0;
    for (int j = 0; j < 7; ++j) par ^= (p >> j) & 1u;
    return static_cast<uint8_t>(p | (par << 7));
}
// iq_signs8 of 4 or 8 fields at once (U = uint32_t or uint64_t; SWAR, for the SIMD decoders): f
// holds one 7-bit field per byte (bit 7 clear); byte g of the result = iq_signs8(byte g of f).
// (The AVX-512 decoders call it on 8 fields; the AVX2 kernels run the same chain in vector lanes.)
template <class U>
constexpr U iq_signs8_bytes(U f) {
    U t = f ^ (f >> 4);  // bit 0 of byte g: parity of its bits 0, 4 (bits 0-3 stay in-byte)
    t ^= t >> 2;
    t ^= t >> 1;
    return f | ((t & static_cast<U>(0x0101010101010101ull)) << 7);
}

}  // namespace moe::ref
