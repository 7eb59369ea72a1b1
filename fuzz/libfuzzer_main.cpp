// libFuzzer entry: one executable per target, MOE_FUZZ_ENTRY set by fuzz/fuzz.cmake.
#include "fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    moe::fuzz::MOE_FUZZ_ENTRY(data, size);
    return 0;
}
