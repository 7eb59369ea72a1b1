#!/usr/bin/env bash
# Side-by-side check (run by hand, not part of the test suite): every `moe gen` tiny preset in
# every gen type loads and generates in llama.cpp unchanged. Needs a llama.cpp build outside this
# repository; pass its bin folder (default ../peers/llama.cpp/build/bin).
#   bash bench/llamacpp_load_check.sh [LLAMA_BIN_DIR] [MOE_BINARY]
# --no-repack: that llama.cpp build's CPU repack path dies with SIGILL on this machine for any
# Q8_0 model, including llama-quantize's own output (docs/MODELS.md).
set -uo pipefail
BIN=${1:-$(dirname "$0")/../../peers/llama.cpp/build/bin}
MOE=${2:-$(dirname "$0")/../build/moe}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
for preset in tiny-mixtral tiny-qwen2moe tiny-qwen3moe tiny-olmoe; do
  for type in f32 f16 bf16 q8_0; do
    f="$TMP/$preset-$type.gguf"
    "$MOE" gen "$preset" -o "$f" --type "$type" --seed 11 >/dev/null 2>&1 || { echo "FAIL gen $preset $type"; fail=1; continue; }
    out=$(LD_LIBRARY_PATH="$BIN" "$BIN/llama-completion" -m "$f" -p 'hello world' -n 4 -no-cnv --temp 0 -t 1 -c 128 \
          --no-repack 2>"$TMP/log" </dev/null)
    rc=$?
    if [ $rc -ne 0 ] || grep -q "error loading model" "$TMP/log"; then
      echo "FAIL $preset $type (exit $rc)"; tail -5 "$TMP/log"; fail=1
    else
      echo "ok   $preset $type: ${out:0:60}"
    fi
  done
done
exit $fail
