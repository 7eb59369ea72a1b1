#pragma once
// ISA plumbing for the dense ops in src/kernels/cpu (rmsnorm, attention, dequant_row). They take the
// engine-wide kernels::Isa (kernels/cpu/isa.h; chosen once by CpuKernels, MOE_FORCE_ISA) and run
// their AVX-512 path for Isa::Avx512 on a CPU that has it. Attention and dequant_row also have AVX2
// paths (target attributes, for Isa::Avx2 or a CPU without AVX-512); the others run the scalar path
// for Scalar and Avx2 (a small share of a token's time next to the matmuls).
//
// MOE_DENSE_AVX512_BEGIN / _END bracket AVX-512 code in a .cpp file, so the portable -march=x86-64
// build carries it too. Include every header BEFORE the BEGIN marker: inline functions defined
// inside the region would be compiled for AVX-512 and could be picked by the linker for callers on
// other CPUs.
#include "kernels/cpu/isa.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MOE_DENSE_HAS_AVX512 1
// (GCC 12's avx512fintrin.h trips -Wuninitialized on its own "undefined vector" idiom; silenced here.)
#define MOE_DENSE_AVX512_BEGIN                                                                    \
    _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,fma\")") _Pragma("GCC diagnostic push") \
        _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")                                      \
            _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define MOE_DENSE_AVX512_END _Pragma("GCC diagnostic pop") _Pragma("GCC pop_options")
#elif defined(__AVX512F__)
#define MOE_DENSE_HAS_AVX512 1
#define MOE_DENSE_AVX512_BEGIN
#define MOE_DENSE_AVX512_END
#else
#define MOE_DENSE_HAS_AVX512 0
#define MOE_DENSE_AVX512_BEGIN
#define MOE_DENSE_AVX512_END
#endif

namespace moe::cpu {

// True when `isa` asks for the AVX-512 path and this build and CPU can run it.
inline bool dense_use_avx512(kernels::Isa isa) {
#if MOE_DENSE_HAS_AVX512
    return isa == kernels::Isa::Avx512 && kernels::isa_supported(kernels::Isa::Avx512) &&
           __builtin_cpu_supports("fma");
#else
    (void)isa;
    return false;
#endif
}

}  // namespace moe::cpu
