#pragma once
// exp of a float, for the SiLU / GLU activations: evaluated in double and rounded once to float,
// so it is the correctly rounded exp except within ~1e-11 (relative) of a rounding boundary (the
// same results as glibc's expf in all but rare cases). One fixed operation sequence, shared by this
// scalar reference and the AVX-512 path (kernels/cpu/glu.cpp): both give the same bits.
//   x clamped to [-104, 89] (exp(-104) rounds to +0 in float, exp(89) to +inf; NaN is kept),
//   n = nearbyint(x log2 e), r = x - n ln2 (one FMA; |r| <= ln2 / 2 + 1e-16),
//   p = sum_{k<=9} r^k / k! (Horner, FMAs; truncation error r^10 / 10! < 7e-12 relative),
//   exp(x) = float(p 2^n).
#include <algorithm>
#include <cmath>

namespace moe::ref {

inline constexpr double kExpLog2e = 1.4426950408889634074;
inline constexpr double kExpLn2 = 0.69314718055994530942;
inline constexpr double kExpLo = -104.0, kExpHi = 89.0;
// 1 / k!, k = 9 .. 0 (Horner order)
inline constexpr double kExpPoly[10] = {1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120,
                                        1.0 / 24,     1.0 / 6,     1.0 / 2,    1.0,       1.0};

inline float exp_f32(float xf) {
    if (std::isnan(xf)) return xf;
    const double x = std::min(kExpHi, std::max(kExpLo, static_cast<double>(xf)));
    const double n = std::nearbyint(x * kExpLog2e);
    const double r = std::fma(-n, kExpLn2, x);
    double p = kExpPoly[0];
    for (int k = 1; k < 10; ++k) p = std::fma(p, r, kExpPoly[k]);
    return static_cast<float>(std::ldexp(p, static_cast<int>(n)));
}

}  // namespace moe::ref
