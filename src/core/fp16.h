#pragma once
// IEEE half and bfloat16 <-> float conversions (scalar, exact; round-to-nearest-even on the way down).
#include <cstdint>
#include <cstring>

namespace moe {

inline float fp32_from_bits(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
inline uint32_t fp32_to_bits(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }

inline float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) return fp32_from_bits(sign | 0x7f800000u | (mant << 13));  // inf / nan
    if (exp == 0) {
        if (mant == 0) return fp32_from_bits(sign);
        // subnormal: value = mant * 2^-24
        float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return fp32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t fp32_to_fp16(float f) {
    const uint32_t x = fp32_to_bits(f);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0);  // inf / nan
    if (ax >= 0x477ff000u) return sign | 0x7c00;  // rounds to >= 65520 -> inf
    if (ax < 0x38800000u) {
        // result is subnormal (or zero): round(|f| * 2^24) with ties to even
        const float af = fp32_from_bits(ax);
        const float scaled = af * 16777216.0f;  // exact (power of two)
        uint32_t r = static_cast<uint32_t>(scaled);
        const float frac = scaled - static_cast<float>(r);
        if (frac > 0.5f || (frac == 0.5f && (r & 1))) ++r;
        return sign | static_cast<uint16_t>(r);
    }
    // normal: rebias exponent, round mantissa from 23 to 10 bits, ties to even
    uint32_t m = ax + 0xC8000000u;  // exponent - 112
    m += 0xfff + ((m >> 13) & 1);
    return sign | static_cast<uint16_t>(m >> 13);
}

inline float bf16_to_fp32(uint16_t h) { return fp32_from_bits(static_cast<uint32_t>(h) << 16); }

inline uint16_t fp32_to_bf16(float f) {
    uint32_t x = fp32_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet nan
    x += 0x7fff + ((x >> 16) & 1);
    return static_cast<uint16_t>(x >> 16);
}

}  // namespace moe
