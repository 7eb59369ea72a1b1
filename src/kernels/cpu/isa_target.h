#pragma once
// MOE_TARGET_PUSH("avx512f,...") ... MOE_TARGET_POP: compile the functions between them for the named
// instruction sets, whatever -march the build uses (the kernel table picks them at run time, isa.h).
// GCC takes `#pragma GCC target`; clang ignores that pragma and needs `#pragma clang attribute`
// instead, which it applies to every function (lambdas and templates included) declared in between.
// Without this a clang build at -march=x86-64 fails to inline the AVX-512 intrinsics.
#define MOE_TARGET_PRAGMA_(x) _Pragma(#x)
#if defined(__clang__)
#define MOE_TARGET_PUSH(features) \
    MOE_TARGET_PRAGMA_(clang attribute push(__attribute__((target(features))), apply_to = function))
#define MOE_TARGET_POP MOE_TARGET_PRAGMA_(clang attribute pop)
#else
#define MOE_TARGET_PUSH(features) \
    MOE_TARGET_PRAGMA_(GCC push_options) MOE_TARGET_PRAGMA_(GCC target(features))
#define MOE_TARGET_POP MOE_TARGET_PRAGMA_(GCC pop_options)
#endif
