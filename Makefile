# The two set-up commands (README): `make run` and `make test`. Both install any missing Debian
# packages first (as root), configure and build. Extra targets are for development.
JOBS      ?= $(shell nproc)
BUILD     ?= build
ASAN_DIR  ?= build-asan
TSAN_DIR  ?= build-tsan
FUZZ_DIR  ?= build-fuzz
FUZZ_SECONDS    ?= 1800
FUZZ_CI_SECONDS ?= 20
# The multi-threaded tests run under ThreadSanitizer (only these are built in TSAN_DIR).
TSAN_TESTS ?= test_thread_pool test_grouped_ffn_schedule test_moe_block test_moe_ops test_moe_quant test_moe_router test_attention \
              test_matmul_dense test_kv_cache test_decode_alloc test_forward
FUZZ_TARGETS := $(shell sed -n 's/^MOE_FUZZ_TARGET(\([a-z0-9_]*\)).*/fuzz_\1/p' fuzz/targets.def)
empty :=
space := $(empty) $(empty)
CMAKE_ARGS ?=

.PHONY: run test deps configure build test-unit test-asan test-tsan fuzz-build fuzz fuzz-ci clean format

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS) > $(BUILD).configure.log 2>&1 || (cat $(BUILD).configure.log; exit 1)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The main job on the built-in default model (see scripts/demo.sh).
run: build
	@bash scripts/demo.sh $(BUILD)

test: build
	@$(MAKE) --no-print-directory test-unit test-asan test-tsan fuzz-ci

test-unit:
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The whole suite once more under AddressSanitizer + UndefinedBehaviorSanitizer, in a portable
# (-march=x86-64) build, so the portable configuration is built and tested too.
test-asan: deps
	@cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOE_SANITIZE=ON -DMOE_NATIVE=OFF > $(ASAN_DIR).configure.log 2>&1 || (cat $(ASAN_DIR).configure.log; exit 1)
	@cmake --build $(ASAN_DIR) -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --test-dir $(ASAN_DIR) --output-on-failure -j $(JOBS)

# The multi-threaded tests under ThreadSanitizer (portable build; docs/SECURITY.md). MOE_TEST_SEEDS=2:
# test_grouped_ffn_schedule runs 2 of its random seeds per case here (all of them in the other runs).
test-tsan: deps
	@cmake -S . -B $(TSAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOE_TSAN=ON -DMOE_NATIVE=OFF > $(TSAN_DIR).configure.log 2>&1 || (cat $(TSAN_DIR).configure.log; exit 1)
	@cmake --build $(TSAN_DIR) -j $(JOBS) --target $(TSAN_TESTS)
	@MOE_TEST_SEEDS=2 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
		ctest --test-dir $(TSAN_DIR) --output-on-failure -j $(JOBS) -R '\.($(subst $(space),|,$(TSAN_TESTS)))$$'

# libFuzzer executables (clang, ASan + UBSan): build-fuzz/fuzz_<target>; fuzz/README.md.
fuzz-build: deps
	@cmake -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DMOE_NATIVE=OFF -DMOE_FUZZ=ON -DMOE_BUILD_TESTS=OFF > $(FUZZ_DIR).configure.log 2>&1 || (cat $(FUZZ_DIR).configure.log; exit 1)
	@cmake --build $(FUZZ_DIR) -j $(JOBS) --target $(FUZZ_TARGETS)

# Every target for FUZZ_SECONDS each (default 30 min), one per core at a time (FUZZ_JOBS).
fuzz: fuzz-build
	@bash scripts/fuzz.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

# The short pass `make test` runs: FUZZ_CI_SECONDS (20 s) per target.
fuzz-ci: fuzz-build
	@bash scripts/fuzz.sh $(FUZZ_DIR) $(FUZZ_CI_SECONDS)

format:
	@clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_DIR) $(BUILD).configure.log $(ASAN_DIR).configure.log
	rm -rf $(TSAN_DIR) $(FUZZ_DIR) $(TSAN_DIR).configure.log $(FUZZ_DIR).configure.log
