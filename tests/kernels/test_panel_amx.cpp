// AMX selection (kernels/cpu/isa.h amx_usable, CpuKernels::amx): MOE_FORCE_ISA=amx is one clear
// error where AMX is not usable, avx512 turns AMX off, the default takes it where usable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa.h"

namespace moe {
namespace {

using kernels::Isa;

// ---------------------------------------------------------------- selection

TEST(PanelAmx, ForceIsaAmx) {
    const char* old = std::getenv("MOE_FORCE_ISA");
    const std::string saved = old ? old : "";
    setenv("MOE_FORCE_ISA", "amx", 1);
    if (kernels::amx_usable()) {
        const kernels::CpuKernels k = kernels::CpuKernels::from_env();
        EXPECT_TRUE(k.amx());
        EXPECT_EQ(k.isa(), Isa::Avx512);
        EXPECT_TRUE(k.matmul(DType::Q8_0, "w").amx);
    } else {
        std::cout << "[ absent ] AMX not usable here (" << kernels::amx_absent_reason() << "): MOE_FORCE_ISA=amx must be one clear error" << std::endl;
        try {
            kernels::CpuKernels::from_env();
            ADD_FAILURE() << "MOE_FORCE_ISA=amx accepted without AMX";
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find("[kernels]"), std::string::npos) << msg;
            EXPECT_NE(msg.find("MOE_FORCE_ISA=amx"), std::string::npos) << msg;
            EXPECT_NE(msg.find(kernels::amx_absent_reason()), std::string::npos) << msg;
        }
        EXPECT_THROW(kernels::CpuKernels(Isa::Avx512, true), Error);
    }
    if (kernels::isa_supported(Isa::Avx512)) {
        setenv("MOE_FORCE_ISA", "avx512", 1);
        const kernels::CpuKernels k = kernels::CpuKernels::from_env();
        EXPECT_FALSE(k.amx());
        EXPECT_FALSE(k.matmul(DType::Q8_0, "w").amx);
    }
    EXPECT_THROW(kernels::CpuKernels(Isa::Scalar, true), Error);
    unsetenv("MOE_FORCE_ISA");
    const kernels::CpuKernels d = kernels::CpuKernels::from_env();
    EXPECT_EQ(d.amx(), d.isa() == Isa::Avx512 && kernels::amx_usable());
    EXPECT_EQ(d.matmul(DType::Q4_K, "w").amx, d.amx());
    if (old) setenv("MOE_FORCE_ISA", saved.c_str(), 1);
    EXPECT_EQ(kernels::amx_usable(), kernels::amx_absent_reason()[0] == '\0');
}

}  // namespace
}  // namespace moe
