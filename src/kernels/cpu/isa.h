#pragma once
// Instruction-set paths of the CPU kernels. The SIMD kernels are compiled with per-function
// target attributes, so even the portable (-march=x86-64) build contains them and picks one at
// run time; MOE_FORCE_ISA=scalar|avx2|avx512|amx forces a path (read once, by CpuKernels::from_env).
// AMX is not an Isa of its own: it is the avx512 path whose panel GEMMs (prefill over --repack /
// --repack-experts panels) run on AMX tiles (CpuKernels::amx, qmatmul_panel_amx.h).
#include <optional>
#include <string_view>
#include <vector>

namespace moe::kernels {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

const char* isa_name(Isa isa);
std::optional<Isa> isa_from_name(std::string_view name);  // "scalar", "avx2", "avx512"
bool isa_supported(Isa isa);                               // this CPU can run the path
Isa best_isa();
std::vector<Isa> supported_isas();                         // every path this CPU can run
// F16C (CPUID.1:ECX bit 29), read with <cpuid.h>: clang's __builtin_cpu_supports has no "f16c",
// and the fuzz build (fuzz/fuzz.cmake) compiles the kernels with clang.
bool cpu_has_f16c();
// AMX-INT8 usable by this process: CPUID.(7,0):EDX AMX-TILE (bit 24) and AMX-INT8 (bit 25), the OS
// enabling the tile state in XCR0 (bits 17, 18: XTILECFG, XTILEDATA) and, on Linux, the kernel
// granting the permission (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0). Computed once
// (thread-safe); amx_absent_reason() says which condition failed ("" when usable).
bool amx_usable();
const char* amx_absent_reason();
// AMX-BF16 usable (TDPBF16PS, matmul_bf16_amx.h): amx_usable() and CPUID.(7,0):EDX AMX-BF16
// (bit 22). Every CPU with AMX so far has both; a CPU with AMX-BF16 but not AMX-INT8 would be
// refused (amx_usable's reason). Computed once; amx_bf16_absent_reason() is "" when usable.
bool amx_bf16_usable();
const char* amx_bf16_absent_reason();

}  // namespace moe::kernels
