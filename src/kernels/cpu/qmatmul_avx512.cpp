// AVX-512 + VNNI int8 weight kernels: the CPU check and the one
// kernel table keyed by weight type, which hands each type to its family's file (the engine and
// the list of families: qmatmul_avx512.h). Compiled with a target pragma so the portable build
// carries it; used only when the CPU has AVX512F/BW/VL/DQ + VNNI (qmm_avx512_usable()).
#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/fp16.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_decode.h"
#include "kernels/ref/iq_tables.h"
#include "kernels/ref/quant_formats.h"
#include "kernels/ref/quantize_act.h"
#include "kernels/cpu/isa_target.h"

namespace moe::kernels {

bool qmm_avx512_usable() {
#if defined(__x86_64__) && defined(__GNUC__)
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") &&
                           cpu_has_f16c() && __builtin_cpu_supports("bmi2");
    return ok;
#else
    return false;
#endif
}

}  // namespace moe::kernels

MOE_TARGET_PUSH("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2,bmi2")
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm*_undefined_* helpers (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/qmatmul_avx512.h"

namespace moe::kernels {

MatmulFn qmm_avx512_kernel(DType t) {
    if (MatmulFn f = qmm512_q8k_kernel(t)) return f;
    if (MatmulFn f = qmm512_legacy_k_kernel(t)) return f;
    return qmm512_iq_kernel(t);
}

MatmulFn qmm_avx512_baseline_kernel(DType t) {
    if (!qmm_has_avx512(t)) return nullptr;
    if (MatmulFn f = qmm512_legacy_k_baseline(t)) return f;
    return qmm512_iq_baseline(t);
}

}  // namespace moe::kernels

#pragma GCC diagnostic pop
MOE_TARGET_POP
