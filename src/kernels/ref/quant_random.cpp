#include "kernels/ref/quant_random.h"

#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/ref/quant_formats.h"

namespace moe::ref {

namespace {
struct Fields {
    int half[2];   // byte offsets of fp16 scale fields (-1: none)
    float levels;  // largest |weight| / d for the largest sub-scale (order of magnitude)
};

// Offsets from the block structs in quant_formats.h.
bool fields(DType t, Fields* f) {
    switch (t) {
        case DType::Q8_0: *f = {{0, -1}, 127}; return true;
        case DType::Q4_0: *f = {{0, -1}, 8}; return true;
        case DType::Q4_1: *f = {{0, 2}, 15}; return true;
        case DType::Q5_0: *f = {{0, -1}, 16}; return true;
        case DType::Q5_1: *f = {{0, 2}, 31}; return true;
        case DType::Q2_K: *f = {{80, 82}, 45}; return true;
        case DType::Q3_K: *f = {{108, -1}, 128}; return true;
        case DType::Q4_K: *f = {{0, 2}, 945}; return true;
        case DType::Q5_K: *f = {{0, 2}, 1953}; return true;
        case DType::Q6_K: *f = {{208, -1}, 4096}; return true;
        case DType::IQ4_NL: *f = {{0, -1}, 127}; return true;
        case DType::IQ4_XS: *f = {{0, -1}, 4064}; return true;
        case DType::IQ2_XXS:
        case DType::IQ2_XS:
        case DType::IQ2_S: *f = {{0, -1}, 167}; return true;
        case DType::IQ3_XXS: *f = {{0, -1}, 480}; return true;
        case DType::IQ3_S: *f = {{0, -1}, 465}; return true;
        case DType::IQ1_S: *f = {{0, -1}, 17}; return true;
        case DType::IQ1_M: *f = {{-1, -1}, 17}; return true;  // super-scale spread, set below
        case DType::TQ1_0: *f = {{52, -1}, 1}; return true;
        case DType::TQ2_0: *f = {{64, -1}, 1}; return true;
        case DType::MXFP4: *f = {{-1, -1}, 6}; return true;  // E8M0 exponent byte 0, set below
        default: return false;
    }
}

void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
}  // namespace

bool fill_random_blocks(DType t, Rng& rng, void* out, int64_t nblocks, float amp) {
    Fields f;
    if (!fields(t, &f) || !can_dequantize(t)) return false;
    const DTypeInfo& info = dtype_info(t);
    auto* p = static_cast<uint8_t*>(out);
    for (int64_t b = 0; b < nblocks; ++b) {
        uint8_t* blk = p + b * info.bytes;
        for (uint32_t i = 0; i < info.bytes; ++i) blk[i] = static_cast<uint8_t>(rng.next());
        const float d = amp / f.levels * static_cast<float>(0.25 + 0.75 * rng.uniform());
        for (int k = 0; k < 2; ++k) {
            if (f.half[k] < 0) continue;
            const bool neg_min = k == 1 && (t == DType::Q4_1 || t == DType::Q5_1) && (rng.next() & 1);
            // Q4_1 / Q5_1 min: about -amp/2 .. +amp/2; K-quant dmin: a fraction of d's range.
            const float v = k == 0 ? d : (t == DType::Q4_1 || t == DType::Q5_1) ? 0.5f * amp * static_cast<float>(rng.uniform())
                                                                              : d * 0.05f;
            put16(blk + f.half[k], fp32_to_fp16(neg_min ? -v : v));
        }
        if (t == DType::MXFP4) {
            // 2^(e-128) * 12 ~ amp: e = 128 + log2(amp / 12), +- a little.
            const int e = 128 + static_cast<int>(std::floor(std::log2(amp / 12.0f))) - static_cast<int>(rng.next() % 2);
            blk[0] = static_cast<uint8_t>(e < 1 ? 1 : e > 254 ? 254 : e);
        }
        if (t == DType::IQ1_M) {
            // The fp16 super-scale's 4 nibbles go to the top nibble of the 4 u16 scale words.
            const uint16_t h = fp32_to_fp16(d);
            for (int k = 0; k < 4; ++k) {
                uint16_t w;
                std::memcpy(&w, blk + 48 + 2 * k, 2);
                w = static_cast<uint16_t>((w & 0x0FFF) | (((h >> (4 * k)) & 0xF) << 12));
                put16(blk + 48 + 2 * k, w);
            }
        }
    }
    return true;
}

}  // namespace moe::ref
