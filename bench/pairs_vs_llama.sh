#!/usr/bin/env bash
# moe bench vs llama-bench on one GGUF, in alternating pairs: each pair runs `moe bench` then
# `llama-bench` with the same -p / -n / -t / -r, back to back, then one `moe bench --membw`
# sample. On a shared VM the read bandwidth swings 2x within minutes, so one pair says little;
# the per-pair ratios and their median (and min / max) are what to compare against a target.
#
#   bench/pairs_vs_llama.sh MODEL.gguf [PAIRS]        (default PAIRS: 3)
# env: MOE (build/moe), LLAMA_BENCH (/work/peers/llama.cpp/build/bin/llama-bench), THREADS (2),
#      P (512; 0 = skip prefill), N (128; 0 = skip decode), REPS (2), MOE_EXTRA (extra moe bench flags)
# Output: one line per pair and test (moe t/s and, for tg, moe bench's "of BW ceiling", llama.cpp
# t/s, ratio, bandwidth sample over a buffer the file's size), then per test the median, min and
# max ratio over the pairs.
set -euo pipefail
MODEL=${1:?usage: bench/pairs_vs_llama.sh MODEL.gguf [PAIRS]}
PAIRS=${2:-3}
MOE=${MOE:-build/moe}
LLAMA_BENCH=${LLAMA_BENCH:-/work/peers/llama.cpp/build/bin/llama-bench}
THREADS=${THREADS:-2}
P=${P:-512}
N=${N:-128}
REPS=${REPS:-2}
[ -x "$MOE" ] || { echo "pairs_vs_llama: $MOE is not an executable (set MOE=path/to/moe)" >&2; exit 2; }
[ -x "$LLAMA_BENCH" ] || { echo "pairs_vs_llama: $LLAMA_BENCH is not an executable (set LLAMA_BENCH)" >&2; exit 2; }
[ -r "$MODEL" ] || { echo "pairs_vs_llama: cannot read $MODEL" >&2; exit 2; }
TESTS=()
[ "$P" -gt 0 ] && TESTS+=("pp$P")
[ "$N" -gt 0 ] && TESTS+=("tg$N")
RATIOS=$(mktemp)
trap 'rm -f "$RATIOS"' EXIT

# Cell $3 (awk column; 8 = t/s, moe's 9 = "of BW ceiling") of test $2's row in the markdown table $1,
# the number before any ± or %: the first row naming the test (the result row, before moe's stage split).
cell() { grep -E "\| +$2 \|" <<<"$1" | head -1 | awk -F'|' -v c="$3" '{print $c}' | awk '{print $1}'; }

echo "# $(basename "$MODEL"), $THREADS threads, -p $P -n $N -r $REPS, $PAIRS pairs ($(date -u +%FT%TZ))"
for i in $(seq 1 "$PAIRS"); do
  m=$("$MOE" bench -m "$MODEL" -p "$P" -n "$N" -t "$THREADS" -r "$REPS" ${MOE_EXTRA:-} 2>&1)
  l=$("$LLAMA_BENCH" -m "$MODEL" -p "$P" -n "$N" -t "$THREADS" -r "$REPS" 2>&1)
  # with -m: a buffer the model file's size, as moe bench's own samples (cmd_bench.cpp footprint_mib);
  # on this project's VMs a smaller buffer reads much faster
  bw=$("$MOE" bench --membw -m "$MODEL" -t "$THREADS" 2>&1 | grep -o '[0-9.]* GB/s' | head -1)
  for t in "${TESTS[@]}"; do
    a=$(cell "$m" "$t" 8); b=$(cell "$l" "$t" 8)
    if [ -z "$a" ] || [ -z "$b" ]; then
      echo "pair $i $t: no result (moe: '${a}', llama.cpp: '${b}')" >&2
      echo "$m" | tail -5 >&2; echo "$l" | tail -5 >&2
      exit 1
    fi
    r=$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.2f", a / b}')
    c=$(cell "$m" "$t" 9)
    echo "pair $i $t: moe $a t/s${c:+ (${c} % of its read-bandwidth ceiling)}, llama.cpp $b t/s, ratio ${r}x, read bandwidth after the pair $bw"
    echo "$t $r" >>"$RATIOS"
  done
done
for t in "${TESTS[@]}"; do
  grep "^$t " "$RATIOS" | awk '{print $2}' | sort -g |
    awk -v t="$t" '{v[NR]=$1} END{m = NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2;
                   printf "%s: median ratio %.2fx (min %.2fx, max %.2fx, %d pairs)\n", t, m, v[1], v[NR], NR}'
done
