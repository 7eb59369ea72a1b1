// libFuzzer entry: one executable per target, MOE_FUZZ_ENTRY set by fuzz/fuzz.cmake.
#include "fuzz/fuzz_target.h"

#define MOE_FUZZ_STR2(x) #x
#define MOE_FUZZ_STR(x) MOE_FUZZ_STR2(x)

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    moe::fuzz::prepare(MOE_FUZZ_STR(MOE_FUZZ_ENTRY));
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    moe::fuzz::MOE_FUZZ_ENTRY(data, size);
    return 0;
}
