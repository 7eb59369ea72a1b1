#!/usr/bin/env bash
# Issue 15's AMX measurements in one short run on a machine with AMX (Sapphire Rapids or later),
# e.g. a lent device machine that has only minutes: everything is built beforehand on a machine
# without AMX, and the run makes its own models.
#
#   bench/amx_device_check.sh stage LLAMA_BIN_DIR    (here: a portable Release build of the
#       binaries below into build-portable/, then copies of them and of llama.cpp's llama-bench,
#       llama-quantize and their .so files, built AMX off as in docs/PERFORMANCE.md, into
#       build-device/; ~25 MB)
#   bench/amx_device_check.sh run                    (there, from the repository root, with
#       build-device/ beside it; ~7 min on 16 cores: the models take ~2.5 of them)
#
# The run prints, with the seconds since its start: the CPU's AMX flags; test_panel_amx and
# test_amx_bf16 on real tiles (they say so when the tiles are absent); panel_gemm_bench for each
# AMX int8 type, VNNI against AMX in one process (one thread, GMAC/s and % of the measured peaks);
# `moe bench` pp512 (2 threads) of OLMoE-1B-7B Q4_K_M, Q5_K_M and Q8_0 on the default path, on VNNI
# (MOE_FORCE_ISA=avx512) and with every AMX kernel (MOE_FORCE_ISA=amx); a 4-block BF16 file with
# and without MOE_AMX_BF16=1; llama-bench pp512 of the same files. With $OUT set (the device tool)
# the log is also written to $OUT/amx_check.log.
set -euo pipefail
cd "$(dirname "$0")/.."
DEV=build-device

stage() {
  local llama=${1:?usage: bench/amx_device_check.sh stage LLAMA_BIN_DIR}
  [ -x "$llama/llama-bench" ] && [ -x "$llama/llama-quantize" ] ||
    { echo "amx_device_check: no llama-bench / llama-quantize in $llama" >&2; exit 2; }
  # Portable: the kernels are picked at run time (a -march=native build from an AMD host may use
  # instructions the Xeon lacks).
  cmake -S . -B build-portable -DCMAKE_BUILD_TYPE=Release -DMOE_NATIVE=OFF > /dev/null
  cmake --build build-portable -j "$(nproc)" --target moe panel_gemm_bench test_panel_amx test_amx_bf16
  rm -rf "$DEV"
  mkdir -p "$DEV/bin" "$DEV/llama"
  cp build-portable/{moe,panel_gemm_bench,test_panel_amx,test_amx_bf16} "$DEV/bin/"
  cp "$llama/llama-bench" "$llama/llama-quantize" "$DEV/llama/"
  cp -P "$llama"/*.so* "$DEV/llama/"
  du -sh "$DEV"
  echo "then: run(command=\"bash bench/amx_device_check.sh run\", carry=[\"$DEV\"], timeout_s=540)"
}

run() {
  [ -x "$DEV/bin/moe" ] || { echo "amx_device_check: no $DEV/bin/moe (run the stage step first and carry $DEV)" >&2; exit 2; }
  set +e +o pipefail  # a failing step is reported (try) and the run goes on
  local log=/dev/null
  [ -n "${OUT:-}" ] && log="$OUT/amx_check.log"
  exec > >(tee "$log") 2>&1
  local t0=$SECONDS M=/tmp/amx_check_models B="$DEV/bin" L="$DEV/llama"
  export LD_LIBRARY_PATH="$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  step() { echo; echo "[+$((SECONDS - t0)) s] $*"; }
  # A step that fails or runs over its time is reported and the run goes on.
  try() { local s=$1; shift; timeout "$s" "$@" || echo "(exit $? after at most $s s: $*)"; }
  mkdir -p "$M"

  step "start $(date -u +%FT%TZ)"
  grep -m1 'model name' /proc/cpuinfo || true
  echo "cores: $(nproc); AMX flags: $(grep -m1 -o 'amx[a-z0-9_]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"

  step "tests on real tiles"
  try 60 "$B/test_panel_amx" --gtest_brief=1
  try 60 "$B/test_amx_bf16" --gtest_brief=1

  step "panel GEMM kernels, one thread, m = 64: VNNI against AMX"
  for t in Q4_K Q5_K Q6_K Q4_0; do  # the types panel_gemm_bench takes (Q8_0: in the model below)
    for isa in avx512 amx amx-nopf; do try 60 "$B/panel_gemm_bench" "$t" 16 1024 2048 64 2 "$isa" | grep -v '^alt 0'; done
  done

  step "models: OLMoE-1B-7B Q8_0 (moe gen), then Q4_K_M and Q5_K_M (llama-quantize)"
  try 120 "$B/moe" gen olmoe-1b-7b -o "$M/q8_0.gguf" --type q8_0 --seed 42 2>&1 | tail -1
  # A file whose quantization failed or ran over is removed (the benches below then skip it).
  quant() {
    if timeout 200 "$L/llama-quantize" --allow-requantize "$M/q8_0.gguf" "$M/$1.gguf" "$2" "$(nproc)" > "$M/$1.log" 2>&1; then
      tail -1 "$M/$1.log"
    else
      echo "(llama-quantize $2: exit $? after at most 200 s; $1.gguf removed)"
      rm -f "$M/$1.gguf"
    fi
  }
  # both at once; wait for these two only (a bare `wait` would also wait for the log's tee)
  quant q4km Q4_K_M &
  local q1=$!
  quant q5km Q5_K_M &
  local q2=$!
  wait "$q1" "$q2"
  try 120 "$B/moe" gen olmoe-1b-7b -o "$M/bf16.gguf" --layers 4 --type bf16 --seed 42 2>&1 | tail -1

  local bench=(bench -p 512 -n 0 -t 2 -r 2)
  for f in q4km q5km q8_0; do
    [ -r "$M/$f.gguf" ] || { echo "(no $f.gguf)"; continue; }
    for isa in default avx512 amx; do
      step "$f pp512: $isa"
      if [ "$isa" = default ]; then try 90 "$B/moe" "${bench[@]}" -m "$M/$f.gguf" 2>&1 | grep -E -i 'pp512|backend|error|exit'
      else MOE_FORCE_ISA=$isa try 90 "$B/moe" "${bench[@]}" -m "$M/$f.gguf" 2>&1 | grep -E -i 'pp512|backend|error|exit'; fi
    done
  done
  for a in 0 1; do
    step "bf16 (4 blocks) pp512: MOE_AMX_BF16=$a"
    MOE_AMX_BF16=$a try 90 "$B/moe" "${bench[@]}" -m "$M/bf16.gguf" 2>&1 | grep -E -i 'pp512|backend|amx-bf16|error|exit'
  done
  for f in q4km q5km q8_0 bf16; do
    [ -r "$M/$f.gguf" ] || continue
    step "$f pp512: llama.cpp"
    try 120 "$L/llama-bench" -m "$M/$f.gguf" -p 512 -n 0 -t 2 -r 2 2>&1 | grep -E -i 'pp512|error|exit'
  done
  step "end"
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  run) run ;;
  *) echo "usage: bench/amx_device_check.sh stage LLAMA_BIN_DIR | run" >&2; exit 2 ;;
esac
