#include "kernels/cpu/cpu_kernels.h"

#include <cstdlib>

#include "core/error.h"
#include "kernels/cpu/qmatmul.h"

namespace moe::kernels {

namespace {
// Kernel names: "<type>_<path>", e.g. "q4_k_avx512" (the path that actually runs: an AVX-512 CPU
// without VNNI runs the int8 kernels' AVX2 path and says so).
const char* kernel_name(DType t, Isa isa, bool int8_avx512) {
    static constexpr const char* names[][3] = {
        {"f32_scalar", "f32_avx2", "f32_avx512"},       {"f16_scalar", "f16_avx2", "f16_avx512"},
        {"bf16_scalar", "bf16_avx2", "bf16_avx512"},    {"q8_0_scalar", "q8_0_avx2", "q8_0_avx512vnni"},
        {"q4_0_scalar", "q4_0_avx2", "q4_0_avx512vnni"}, {"q4_k_scalar", "q4_k_avx2", "q4_k_avx512vnni"},
        {"q5_k_scalar", "q5_k_avx2", "q5_k_avx512vnni"}, {"q6_k_scalar", "q6_k_avx2", "q6_k_avx512vnni"},
    };
    size_t i = 0;
    while (CpuKernels::kMatmulTypes[i] != t) ++i;
    int p = static_cast<int>(isa);
    if (p == 2 && qmm_supported(t) && !int8_avx512) p = 1;
    return names[i][p];
}
}  // namespace

bool qmm_avx512_usable();

CpuKernels::CpuKernels(Isa isa) : isa_(isa) {
    if (!isa_supported(isa))
        throw_error("kernels", "this CPU cannot run the ", isa_name(isa), " kernels (best available: ",
                    isa_name(best_isa()), ")");
    for (size_t i = 0; i < std::size(kMatmulTypes); ++i) {
        const DType t = kMatmulTypes[i];
        MatmulKernel k;
        k.weight_type = t;
        k.isa = isa;
        k.name = kernel_name(t, isa, qmm_avx512_usable());
        if (t == DType::F32) {
            k.fn = isa == Isa::Scalar ? matmul_f32_ref : isa == Isa::Avx2 ? matmul_f32_avx2 : matmul_f32_avx512;
        } else if (t == DType::F16 || t == DType::BF16) {
            k.fn = half_kernel(t, isa);
        } else {
            k.fn = qmm_kernel(t, isa);
            k.act_q8 = true;
        }
        MOE_ASSERT(k.fn != nullptr, "no kernel for ", dtype_name(t));
        kernels_[i] = k;
    }
}

CpuKernels CpuKernels::from_env() {
    const char* v = std::getenv("MOE_FORCE_ISA");
    if (!v || !*v) return CpuKernels(best_isa());
    auto isa = isa_from_name(v);
    if (!isa) throw_error("kernels", "MOE_FORCE_ISA='", v, "' is not one of scalar, avx2, avx512");
    return CpuKernels(*isa);
}

bool CpuKernels::has_matmul(DType t) const {
    for (DType k : kMatmulTypes)
        if (k == t) return true;
    return false;
}

const MatmulKernel& CpuKernels::matmul(DType t, const std::string& tensor) const {
    for (size_t i = 0; i < std::size(kMatmulTypes); ++i)
        if (kMatmulTypes[i] == t) return kernels_[i];
    throw_error("kernels", "tensor ", tensor, " has type ", dtype_name(t),
                ", which has no matmul kernel (supported: f32, f16, bf16, q8_0, q4_0, q4_K, q5_K, q6_K); "
                "convert the model to one of these types");
}

}  // namespace moe::kernels
