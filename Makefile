# The two set-up commands (README): `make run` and `make test`. Both install any missing Debian
# packages first (as root), configure and build. Extra targets are for development.
JOBS      ?= $(shell nproc)
BUILD     ?= build
ASAN_DIR  ?= build-asan
CMAKE_ARGS ?=

.PHONY: run test deps configure build test-unit test-asan clean format

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
	@$(MAKE) --no-print-directory test-unit test-asan

test-unit:
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The whole suite once more under AddressSanitizer + UndefinedBehaviorSanitizer, in a portable
# (-march=x86-64) build, so the portable configuration is built and tested too.
test-asan: deps
	@cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOE_SANITIZE=ON -DMOE_NATIVE=OFF > $(ASAN_DIR).configure.log 2>&1 || (cat $(ASAN_DIR).configure.log; exit 1)
	@cmake --build $(ASAN_DIR) -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --test-dir $(ASAN_DIR) --output-on-failure -j $(JOBS)

format:
	@clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_DIR) $(BUILD).configure.log $(ASAN_DIR).configure.log
