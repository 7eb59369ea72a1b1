#include "kernels/cpu/isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cstdint>

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
    // Computed once (thread-safe): callers ask per call (dequant_row per kv_b row), and CPUID traps
    // to the hypervisor in a VM -- asked every time it took 57 % of DeepSeek-V2-Lite decode on Zen 3.
    static const bool has = [] {
#if defined(__x86_64__) || defined(__i386__)
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
#else
        return false;
#endif
    }();
    return has;
}

namespace {
// The first failed AMX condition, or "" (see amx_usable).
const char* amx_check() {
#if defined(__x86_64__) && defined(__linux__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 24)) || !(edx & (1u << 25)))
        return "the CPU reports no AMX-TILE / AMX-INT8 (CPUID.(7,0):EDX bits 24, 25)";
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE)) return "the OS has not enabled XSAVE (no XGETBV)";
    uint32_t lo = 0, hi = 0;
    asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return "the OS has not enabled the AMX tile state (XCR0 bits 17, 18)";
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0)
        return "the kernel refused the AMX tile permission (arch_prctl(ARCH_REQ_XCOMP_PERM); Linux >= 5.16)";
    return "";
#else
    return "AMX needs x86-64 Linux";
#endif
}
}  // namespace

const char* amx_absent_reason() {
    static const char* const reason = amx_check();  // once, thread-safe
    return reason;
}

bool amx_usable() { return amx_absent_reason()[0] == '\0'; }

namespace {
const char* amx_bf16_check() {
    if (!amx_usable()) return amx_absent_reason();
#if defined(__x86_64__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 22)))
        return "the CPU reports no AMX-BF16 (CPUID.(7,0):EDX bit 22)";
#endif
    return "";
}
}  // namespace

const char* amx_bf16_absent_reason() {
    static const char* const reason = amx_bf16_check();  // once, thread-safe
    return reason;
}

bool amx_bf16_usable() { return amx_bf16_absent_reason()[0] == '\0'; }

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
