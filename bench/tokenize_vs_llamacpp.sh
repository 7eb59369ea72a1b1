#!/usr/bin/env bash
# Tokenization speed and parity against llama.cpp's llama-tokenize, side by side on the same
# vocab files and text: whole commands (load vocab + tokenize + print ids), N alternating runs,
# best wall time and best CPU time (user + sys; the fairer number on a loaded machine), and
# whether the ids are equal. Single-threaded in both engines.
#   bench/tokenize_vs_llamacpp.sh LLAMA_BIN_DIR TEXT VOCAB.gguf [VOCAB.gguf ...]
# Env: N (runs per engine, default 3), MOE (moe binary, default build/moe).
set -euo pipefail
LB=${1:?llama.cpp bin dir}; TEXT=${2:?text file}; shift 2
MOE=${MOE:-build/moe}; N=${N:-3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a < b) ? a : b }'; }
# run NAME CMD...: appends "wall cpu" of the command to $tmp/NAME.t
run() {
  local name=$1; shift
  /usr/bin/time -f '%e %U %S' -o "$tmp/t" "$@"
  awk '{ print $1, $2 + $3 }' "$tmp/t" >> "$tmp/$name.t"
}
printf '%-26s %8s %8s %8s %8s %7s %7s %8s  %s\n' vocab moe_wall llm_wall moe_cpu llm_cpu x_wall x_cpu tokens ids
for v in "$@"; do
  rm -f "$tmp"/*.t
  for ((i = 0; i < N; i++)); do
    run moe "$MOE" tokenize -m "$v" -f "$TEXT" --no-bos > "$tmp/m.out"
    run llm "$LB/llama-tokenize" -m "$v" -f "$TEXT" --ids --log-disable --no-bos --no-escape > "$tmp/l.out" 2> /dev/null
  done
  read -r mw mc < <(awk 'NR == 1 || $1 < w { w = $1 } NR == 1 || $2 < c { c = $2 } END { print w, c }' "$tmp/moe.t")
  read -r lw lc < <(awk 'NR == 1 || $1 < w { w = $1 } NR == 1 || $2 < c { c = $2 } END { print w, c }' "$tmp/llm.t")
  tr -d '[] \n' < "$tmp/l.out" > "$tmp/l.ids"; tr -d '\n' < "$tmp/m.out" > "$tmp/m.ids"
  same=$(cmp -s "$tmp/l.ids" "$tmp/m.ids" && echo equal || echo DIFFER)
  ntok=$(tr ',' '\n' < "$tmp/m.ids" | wc -l)
  printf '%-26s %8.2f %8.2f %8.2f %8.2f %7.2f %7.2f %8d  %s\n' "$(basename "$v" .gguf)" "$mw" "$lw" "$mc" "$lc" \
    "$(awk -v a="$lw" -v b="$mw" 'BEGIN { print a / b }')" "$(awk -v a="$lc" -v b="$mc" 'BEGIN { print a / (b > 0 ? b : 0.01) }')" \
    "$ntok" "$same"
done
