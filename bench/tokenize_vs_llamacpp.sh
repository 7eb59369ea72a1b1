#!/usr/bin/env bash
# Tokenization speed and parity against llama.cpp's llama-tokenize, side by side on the same
# vocab files and text (whole commands: load + tokenize + print ids; best of N alternating runs).
#   bench/tokenize_vs_llamacpp.sh LLAMA_BIN_DIR TEXT VOCAB.gguf [VOCAB.gguf ...]
# Env: N (runs per engine, default 3), MOE (moe binary, default build/moe).
set -euo pipefail
LB=${1:?llama.cpp bin dir}; TEXT=${2:?text file}; shift 2
MOE=${MOE:-build/moe}; N=${N:-3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
printf '%-28s %9s %9s %7s %9s  %s\n' vocab "moe_s" "llama_s" ratio tokens ids
for v in "$@"; do
  best_m=1e9; best_l=1e9
  for ((i = 0; i < N; i++)); do
    t0=$(now); "$MOE" tokenize -m "$v" -f "$TEXT" --no-bos > "$tmp/m.out"; t1=$(now)
    "$LB/llama-tokenize" -m "$v" -f "$TEXT" --ids --log-disable --no-bos --no-escape > "$tmp/l.out" 2> /dev/null; t2=$(now)
    best_m=$(echo "$t1 - $t0" | bc -l | awk -v b="$best_m" '{print ($1 < b) ? $1 : b}')
    best_l=$(echo "$t2 - $t1" | bc -l | awk -v b="$best_l" '{print ($1 < b) ? $1 : b}')
  done
  tr -d '[] \n' < "$tmp/l.out" > "$tmp/l.ids"; tr -d '\n' < "$tmp/m.out" > "$tmp/m.ids"
  same=$(cmp -s "$tmp/l.ids" "$tmp/m.ids" && echo equal || echo DIFFER)
  ntok=$(tr ',' '\n' < "$tmp/m.ids" | wc -l)
  printf '%-28s %9.3f %9.3f %7.2f %9d  %s\n' "$(basename "$v" .gguf)" "$best_m" "$best_l" \
    "$(echo "$best_l / $best_m" | bc -l)" "$ntok" "$same"
done
