#include "kernels/cpu/cpu_kernels.h"

#include <cstdlib>

#include "core/error.h"

namespace moe::kernels {

CpuKernels::CpuKernels(Isa isa) : isa_(isa) {
    if (!isa_supported(isa))
        throw_error("kernels", "this CPU cannot run the ", isa_name(isa), " kernels (best available: ",
                    isa_name(best_isa()), ")");
    switch (isa) {
        case Isa::Scalar: f32_ = {DType::F32, isa, "f32_scalar", matmul_f32_ref}; break;
        case Isa::Avx2: f32_ = {DType::F32, isa, "f32_avx2", matmul_f32_avx2}; break;
        case Isa::Avx512: f32_ = {DType::F32, isa, "f32_avx512", matmul_f32_avx512}; break;
    }
}

CpuKernels CpuKernels::from_env() {
    const char* v = std::getenv("MOE_FORCE_ISA");
    if (!v || !*v) return CpuKernels(best_isa());
    auto isa = isa_from_name(v);
    if (!isa) throw_error("kernels", "MOE_FORCE_ISA='", v, "' is not one of scalar, avx2, avx512");
    return CpuKernels(*isa);
}

bool CpuKernels::has_matmul(DType t) const { return t == DType::F32; }

const MatmulKernel& CpuKernels::matmul(DType t, const std::string& tensor) const {
    if (t == DType::F32) return f32_;
    throw_error("kernels", "tensor ", tensor, " has type ", dtype_name(t),
                ", which has no matmul kernel yet (supported: f32); convert the model's expert weights to f32");
}

}  // namespace moe::kernels
