#include "kernels/cpu/cpu_kernels.h"

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_amx.h"

namespace moe::kernels {

namespace {
// Kernel names: "<type>_<path>", e.g. "q4_k_avx512vnni" (the path that actually runs: an AVX-512
// CPU without VNNI, or a type without an AVX-512 kernel, runs the int8 kernels' AVX2 path and says so).
struct Names {
    DType t;
    const char* n[3];
};
#define MOE_KNAME(T, s) {DType::T, {s "_scalar", s "_avx2", s "_avx512vnni"}}
constexpr Names kNames[] = {
    {DType::F32, {"f32_scalar", "f32_avx2", "f32_avx512"}}, {DType::F16, {"f16_scalar", "f16_avx2", "f16_avx512"}},
    {DType::BF16, {"bf16_scalar", "bf16_avx2", "bf16_avx512"}},
    MOE_KNAME(Q8_0, "q8_0"),     MOE_KNAME(Q4_0, "q4_0"),     MOE_KNAME(Q4_1, "q4_1"),       MOE_KNAME(Q5_0, "q5_0"),
    MOE_KNAME(Q5_1, "q5_1"),     MOE_KNAME(Q2_K, "q2_k"),     MOE_KNAME(Q3_K, "q3_k"),       MOE_KNAME(Q4_K, "q4_k"),
    MOE_KNAME(Q5_K, "q5_k"),     MOE_KNAME(Q6_K, "q6_k"),     MOE_KNAME(IQ4_NL, "iq4_nl"),   MOE_KNAME(IQ4_XS, "iq4_xs"),
    MOE_KNAME(IQ3_S, "iq3_s"),   MOE_KNAME(IQ3_XXS, "iq3_xxs"), MOE_KNAME(IQ2_S, "iq2_s"),   MOE_KNAME(IQ2_XS, "iq2_xs"),
    MOE_KNAME(IQ2_XXS, "iq2_xxs"), MOE_KNAME(IQ1_M, "iq1_m"), MOE_KNAME(IQ1_S, "iq1_s"),     MOE_KNAME(TQ1_0, "tq1_0"),
    MOE_KNAME(TQ2_0, "tq2_0"),   MOE_KNAME(MXFP4, "mxfp4"),
};
#undef MOE_KNAME
static_assert(std::size(kNames) == std::size(CpuKernels::kMatmulTypes));

const char* kernel_name(DType t, Isa isa) {
    size_t i = 0;
    while (kNames[i].t != t) ++i;
    int p = static_cast<int>(isa);
    if (p == 2 && qmm_supported(t) && !qmm_has_avx512(t)) p = 1;
    return kNames[i].n[p];
}

std::string supported_list() {
    std::string s;
    for (DType t : CpuKernels::kMatmulTypes) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
    return s;
}
}  // namespace

CpuKernels::CpuKernels(Isa isa, bool amx, bool amx_bf16, bool amx_all_types) : isa_(isa), amx_(amx), amx_bf16_(amx_bf16) {
    if (!isa_supported(isa))
        throw_error("kernels", "this CPU cannot run the ", isa_name(isa), " kernels (best available: ",
                    isa_name(best_isa()), ")");
    if (amx && isa != Isa::Avx512) throw_error("kernels", "the AMX panel GEMM runs on the avx512 path, not ", isa_name(isa));
    if (amx && !amx_usable()) throw_error("kernels", "AMX requested but not usable here: ", amx_absent_reason());
    if (amx_bf16 && isa != Isa::Avx512) throw_error("kernels", "the AMX-BF16 GEMM runs on the avx512 path, not ", isa_name(isa));
    if (amx_bf16 && !amx_bf16_usable()) throw_error("kernels", "AMX-BF16 requested but not usable here: ", amx_bf16_absent_reason());
    for (size_t i = 0; i < std::size(kMatmulTypes); ++i) {
        const DType t = kMatmulTypes[i];
        MatmulKernel k;
        k.weight_type = t;
        k.isa = isa;
        k.name = kernel_name(t, isa);
        if (t == DType::F32) {
            k.fn = isa == Isa::Scalar ? matmul_f32_ref : isa == Isa::Avx2 ? matmul_f32_avx2 : matmul_f32_avx512;
        } else if (t == DType::F16 || t == DType::BF16) {
            k.fn = half_kernel(t, isa);
        } else {
            k.fn = qmm_kernel(t, isa);
            k.act_q8 = act_quant(t);
        }
        k.amx = amx && (amx_all_types || panel::panel_amx_default(t));
        MOE_ASSERT(k.fn != nullptr, "no kernel for ", dtype_name(t));
        kernels_[i] = k;
    }
}

CpuKernels CpuKernels::from_env() {
    const char* b = std::getenv("MOE_AMX_BF16");
    const std::string_view bv = b ? b : "";
    if (!bv.empty() && bv != "0" && bv != "1") throw_error("kernels", "MOE_AMX_BF16='", bv, "' is not 0 or 1");
    const bool bf16 = bv == "1";
    if (bf16 && !amx_bf16_usable()) throw_error("kernels", "MOE_AMX_BF16=1: AMX-BF16 is not usable here: ", amx_bf16_absent_reason());
    const char* v = std::getenv("MOE_FORCE_ISA");
    if (!v || !*v) return CpuKernels(best_isa(), best_isa() == Isa::Avx512 && amx_usable(), bf16);
    if (std::string_view(v) == "amx") {
        if (!amx_usable()) throw_error("kernels", "MOE_FORCE_ISA=amx: AMX is not usable here: ", amx_absent_reason());
        return CpuKernels(Isa::Avx512, true, bf16, true);
    }
    auto isa = isa_from_name(v);
    if (!isa) throw_error("kernels", "MOE_FORCE_ISA='", v, "' is not one of scalar, avx2, avx512, amx");
    if (bf16 && *isa != Isa::Avx512) throw_error("kernels", "MOE_AMX_BF16=1 runs on the avx512 path, not MOE_FORCE_ISA=", v);
    return CpuKernels(*isa, false, bf16);
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
                ", which has no matmul kernel (supported: ", supported_list(), "); convert the model to one of these types");
}

}  // namespace moe::kernels
