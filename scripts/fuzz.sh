#!/usr/bin/env bash
# Runs every fuzz target of fuzz/targets.def for SECONDS each (libFuzzer, one process per target,
# niced; FUZZ_JOBS of them at a time, default one per core), from its seed corpus + dictionary.
# Used by `make fuzz` (FUZZ_SECONDS) and by `make fuzz-ci` (the short pass of `make test`).
#   scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]
# New inputs go to BUILD_DIR/fuzz-work/<target>/ (the seed corpus in the repository is only read),
# crashes to BUILD_DIR/fuzz-artifacts/<target>/. A crash fails the run: fix it, then add the input
# to fuzz/regressions/<target>/ so the normal test suite replays it. Prints one summary line per
# target: executions, coverage (libFuzzer cov: edges, ft: features), corpus size.
set -u
dir=${1:?usage: scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]}
secs=${2:?usage: scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(sed -n 's/^MOE_FUZZ_TARGET(\([a-z0-9_]*\)).*/\1/p' \
        "$root/fuzz/targets.def")
fi
# One target: run it, then print its summary (and on failure what to do) in one write, so the
# lines of targets running side by side do not interleave. Exit status: the fuzzer's (0 = clean).
run_one() {
    local t=$1 bin="$dir/fuzz_$1"
    [ -x "$bin" ] || { echo "fuzz: $bin is missing (make fuzz-build)"; return 1; }
    local work="$dir/fuzz-work/$t" art="$dir/fuzz-artifacts/$t"
    mkdir -p "$work" "$art"
    local dict=()
    [ -f "$root/fuzz/dict/$t.dict" ] && dict=(-dict="$root/fuzz/dict/$t.dict")
    local log="$dir/fuzz-$t.log"
    # -rss_limit_mb: the ASan build's resident memory (the stated bound is checked precisely by
    # tests/fuzz/test_resource_bounds in the plain build); -timeout: seconds for one input.
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        nice "$bin" "$work" "$root/fuzz/corpus/$t" "${dict[@]}" -max_total_time="$secs" \
        -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 \
        -artifact_prefix="$art/" > "$log" 2>&1
    local rc=$?
    local last runs msg
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    msg="fuzz $t: ${secs}s, rc=$rc, runs=${runs:-?} | ${last:-no stats}"
    if [ $rc -ne 0 ]; then
        msg+=$'\n'$(grep -E 'ERROR|SUMMARY|internal error|Test unit written' "$log" | head -8)
        msg+=$'\n'"  full log: $log; reproduce: $bin $art/<file>;"
        msg+=" then add it to fuzz/regressions/$t/"
    fi
    printf '%s\n' "$msg"
    return $rc
}

# FUZZ_JOBS targets at a time (default: one per core), each one process.
jobs=${FUZZ_JOBS:-$(nproc)}
failed=0 running=0
for t in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n || failed=1
        running=$((running - 1))
    fi
    run_one "$t" &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
exit $failed
