#pragma once
// Kernel dispatcher: an object chosen once (ISA from the CPU or MOE_FORCE_ISA) that hands out
// matmul kernels keyed by the weight DType. Callers hold a `const CpuKernels&`; there is no global
// kernel table. Weight types with kernels: F32 (matmul_f32.cpp), F16 and BF16 (matmul_half.cpp),
// and every quantized type of qmatmul.h's kQmmTypes (int8 kernels: the legacy types, the K-quants,
// the IQ family, TQ1_0/TQ2_0, MXFP4). A file mixing types binds each tensor to its own kernel.
// Every kernel receives f32 activations and weight rows of its own format (w_row_stride bytes apart); the int8 ones quantize the
// activations per row themselves, or read MatmulArgs::xq if the caller prepared them
// (MatmulKernel::act_q8, kernels::quantize_act_rows).
//
// Determinism contract of every MatmulKernel: each output y[r][n] is one dot product computed by
// one fixed sequence of operations that depends only on K (and the ISA), never on m, on [n0, n1),
// on where the row sits in the batch or on the thread that runs it.
#include <iterator>
#include <string>

#include "core/dtype.h"
#include "kernels/cpu/isa.h"
#include "kernels/ref/matmul_ref.h"
#include "kernels/ref/quantize_act.h"

namespace moe::kernels {

using MatmulFn = void (*)(const MatmulArgs&);

struct MatmulKernel {
    DType weight_type = DType::F32;
    Isa isa = Isa::Scalar;
    const char* name = "";
    MatmulFn fn = nullptr;
    // int8 kernel: its activation quantization (kActNone otherwise); MatmulArgs::xq (ActQ8 rows of
    // this kind, kernels::quantize_act_rows) may be given instead of x. Kernels with equal act_q8
    // can share one prepared input.
    ref::ActQuant act_q8 = ref::kActNone;
    // The prefill GEMM over this type's repacked panels runs on AMX tiles (panel_gemm_amx): set by
    // CpuKernels on the avx512 path with AMX for the types where the tiles measured faster than
    // VNNI (panel_amx_default: Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q5_0, MXFP4), or for every type with an AMX kernel
    // (MOE_FORCE_ISA=amx: also Q3_K, Q2_K).
    bool amx = false;
    void operator()(const MatmulArgs& a) const { fn(a); }
};

// SIMD f32 kernels (cpu/matmul_f32.cpp); only call a path isa_supported() says this CPU has.
void matmul_f32_avx2(const MatmulArgs& a);
void matmul_f32_avx512(const MatmulArgs& a);

class CpuKernels {
public:
    // Throws moe::Error if this CPU cannot run `isa` (amx: the avx512 path with the panel GEMMs of
    // the panel_amx_default types on AMX tiles, of every type with an AMX kernel with
    // amx_all_types; throws unless isa is Avx512 and amx_usable(); amx_bf16: the opt-in AMX-BF16
    // prefill of dense F16 / BF16 projections, matmul_bf16_amx.h; throws unless isa is Avx512 and
    // amx_bf16_usable()).
    explicit CpuKernels(Isa isa, bool amx = false, bool amx_bf16 = false, bool amx_all_types = false);
    // Weight types that have a matmul kernel (on every path).
    static constexpr DType kMatmulTypes[] = {
        DType::F32,    DType::F16,    DType::BF16,    DType::Q8_0,  DType::Q4_0,    DType::Q4_1,
        DType::Q5_0,   DType::Q5_1,   DType::Q2_K,    DType::Q3_K,  DType::Q4_K,    DType::Q5_K,
        DType::Q6_K,   DType::IQ4_NL, DType::IQ4_XS,  DType::IQ3_S, DType::IQ3_XXS, DType::IQ2_S,
        DType::IQ2_XS, DType::IQ2_XXS, DType::IQ1_M,  DType::IQ1_S, DType::TQ1_0,   DType::TQ2_0,
        DType::MXFP4,
    };
    // best_isa() (with AMX for the panel_amx_default types where amx_usable()), or the path named by
    // MOE_FORCE_ISA (scalar|avx2|avx512|amx; avx512 turns AMX off, amx puts every type with an AMX
    // kernel on tiles and throws naming what is missing; read here, once).
    // MOE_AMX_BF16=1 (read here, once) turns on the AMX-BF16 prefill of dense F16 / BF16 projections
    // (it rounds activations to bf16: the output changes, hence opt-in); unset or 0: off; 1 where
    // AMX-BF16 is not usable, or on a path other than avx512, throws naming what is missing.
    static CpuKernels from_env();

    Isa isa() const { return isa_; }
    bool amx() const { return amx_; }
    bool amx_bf16() const { return amx_bf16_; }
    bool has_matmul(DType t) const;
    // The matmul for weights of type t; throws moe::Error naming `tensor` and the type if none.
    const MatmulKernel& matmul(DType t, const std::string& tensor) const;

private:
    Isa isa_;
    bool amx_ = false;
    bool amx_bf16_ = false;
    MatmulKernel kernels_[std::size(kMatmulTypes)];
};

}  // namespace moe::kernels
