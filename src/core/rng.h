#pragma once
// Small deterministic PRNG (splitmix64 seeding + xoshiro256**). Used for reproducible random
// weights (`moe gen --seed`) and test inputs; identical streams on every platform and compiler,
// unlike std::normal_distribution.
#include <cmath>
#include <cstdint>

namespace moe {

class Rng {
public:
    explicit Rng(uint64_t seed) {
        for (auto& s : s_) {
            seed += 0x9e3779b97f4a7c15ull;
            uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            s = z ^ (z >> 31);
        }
    }
    uint64_t next() {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }
    // Uniform in [0, 1).
    double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
    // Uniform in [lo, hi).
    float uniform(float lo, float hi) { return lo + static_cast<float>(uniform()) * (hi - lo); }
    // Uniform integer in [0, n).
    uint64_t below(uint64_t n) { return next() % n; }
    // Standard normal (Box-Muller; one value per call, the pair partner is discarded for simplicity).
    float normal() {
        double u1 = uniform();
        if (u1 < 1e-300) u1 = 1e-300;
        const double u2 = uniform();
        return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t s_[4];
};

}  // namespace moe
