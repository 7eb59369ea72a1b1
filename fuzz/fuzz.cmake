# Fuzzing (docs/SECURITY.md). Included once from the top-level CMakeLists.txt, after the layers.
#  - moe_fuzz: the entry functions listed in fuzz/targets.def, built in every configuration so the
#    normal suite (tests/fuzz/) replays the checked-in corpora through them with GCC too.
#  - MOE_FUZZ=ON (clang only): every moe_* library gets -fsanitize=fuzzer-no-link,address,undefined
#    and each target becomes an executable build/fuzz_<name> (libFuzzer + ASan + UBSan).
#    cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DMOE_FUZZ=ON -DMOE_BUILD_TESTS=OFF
option(MOE_FUZZ "Build libFuzzer executables fuzz_<target> (needs clang)" OFF)

file(GLOB MOE_FUZZ_SRCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/fuzz/targets/*.cpp)
add_library(moe_fuzz STATIC ${CMAKE_SOURCE_DIR}/fuzz/fuzz_common.cpp ${MOE_FUZZ_SRCS})
target_include_directories(moe_fuzz PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(moe_fuzz PUBLIC moe_tools)
target_compile_definitions(moe_fuzz PRIVATE MOE_FUZZ_DATA_DIR="${CMAKE_SOURCE_DIR}/tests/data")

if(MOE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MOE_FUZZ=ON needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  # -O1 -gline-tables-only (after the build type's flags, so they win): the usual libFuzzer
  # trade-off, and it halves the build on a 2-core machine.
  set(MOE_FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer -O1 -gline-tables-only -Wno-unknown-warning-option)
  foreach(lib core format kernels dist moe tokenizer model runtime train server tools fuzz)
    target_compile_options(moe_${lib} PRIVATE ${MOE_FUZZ_FLAGS})
  endforeach()
  file(STRINGS ${CMAKE_SOURCE_DIR}/fuzz/targets.def MOE_FUZZ_LINES REGEX "^MOE_FUZZ_TARGET\\(")
  foreach(line ${MOE_FUZZ_LINES})
    string(REGEX REPLACE "^MOE_FUZZ_TARGET\\(([a-z0-9_]+)\\).*" "\\1" name "${line}")
    add_executable(fuzz_${name} ${CMAKE_SOURCE_DIR}/fuzz/libfuzzer_main.cpp)
    target_compile_definitions(fuzz_${name} PRIVATE MOE_FUZZ_ENTRY=${name})
    target_compile_options(fuzz_${name} PRIVATE ${MOE_FUZZ_FLAGS})
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_${name} PRIVATE moe_fuzz)
  endforeach()
endif()
if(MOE_FUZZ)
  # The libraries carry ASan/UBSan instrumentation now, so anything else linking them needs the runtimes.
  target_compile_options(moe PRIVATE -fsanitize=address,undefined)
  target_link_options(moe PRIVATE -fsanitize=address,undefined)
endif()
