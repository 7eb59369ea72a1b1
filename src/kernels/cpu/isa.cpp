#include "kernels/cpu/isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace moe::kernels {

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::Scalar: return "scalar";
        case Isa::Avx2: return "avx2";
        case Isa::Avx512: return "avx512";
    }
    return "?";
}

std::optional<Isa> isa_from_name(std::string_view name) {
    if (name == "scalar") return Isa::Scalar;
    if (name == "avx2") return Isa::Avx2;
    if (name == "avx512") return Isa::Avx512;
    return std::nullopt;
}

bool isa_supported(Isa isa) {
    switch (isa) {
        case Isa::Scalar: return true;
#if defined(__x86_64__) || defined(__i386__)
        case Isa::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        case Isa::Avx512: return __builtin_cpu_supports("avx512f");
#else
        default: return false;
#endif
    }
    return false;
}

bool cpu_has_f16c() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
#else
    return false;
#endif
}

Isa best_isa() {
    if (isa_supported(Isa::Avx512)) return Isa::Avx512;
    if (isa_supported(Isa::Avx2)) return Isa::Avx2;
    return Isa::Scalar;
}

std::vector<Isa> supported_isas() {
    std::vector<Isa> v;
    for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
        if (isa_supported(i)) v.push_back(i);
    return v;
}

}  // namespace moe::kernels
