#!/usr/bin/env bash
# moe serve vs llama-server, side by side on one GGUF, 2 threads, continuous batching in both:
# for each N, start the server with N slots (ctx per slot CTX), drive it with `moe bench-serve`
# (N streaming clients, REQ_PER_CLIENT x N requests, fixed prompt/output mix), stop it; then the
# same with llama-server --parallel N (-c N*CTX, so each slot has CTX). Prints one line per run
# with the load average next to it.
#
#   bench/serve_vs_llama.sh MODEL.gguf [N...]      (default N: 1 8 16)
# env: MOE (build/moe), LLAMA_SERVER (/work/peers/llama.cpp/build/bin/llama-server), CTX (1024),
#      THREADS (2), REQ_PER_CLIENT (2), PROMPT_WORDS (32,96), MAX_TOKENS (32,64), PORT (18080; llama-server gets PORT+1),
#      LLAMA_EXTRA (extra llama-server flags, e.g. --no-repack)
set -euo pipefail
MODEL=${1:?usage: bench/serve_vs_llama.sh MODEL.gguf [N...]}
shift
NS=("$@")
[ ${#NS[@]} -eq 0 ] && NS=(1 8 16)
MOE=${MOE:-build/moe}
LLAMA_SERVER=${LLAMA_SERVER:-/work/peers/llama.cpp/build/bin/llama-server}
CTX=${CTX:-1024}
THREADS=${THREADS:-2}
RPC=${REQ_PER_CLIENT:-2}
PW=${PROMPT_WORDS:-32,96}
MT=${MAX_TOKENS:-32,64}
PORT=${PORT:-18080}
LOG=$(mktemp -d)
# A server left running (the script killed by a timeout) would skew the next benchmark.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT

wait_ready() {  # port, pid
  for _ in $(seq 1 600); do
    if curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1; then return 0; fi
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

run_one() {  # label, pid, N, port
  local label=$1 pid=$2 n=$3 port=$4
  if ! wait_ready "$port" "$pid"; then echo "$label: server did not start (log in $LOG)"; return 1; fi
  # one short warm-up request (page in the weights), not counted
  "$MOE" bench-serve --port "$port" -c 1 -n 1 --prompt-words 8 --max-tokens 4 --label warmup >/dev/null || true
  local load; load=$(cut -d' ' -f1-3 /proc/loadavg)
  local line; line=$("$MOE" bench-serve --port "$port" -c "$n" -n $((RPC * n)) --prompt-words "$PW" --max-tokens "$MT" --label "$label") || true
  echo "$line  load $load"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

echo "model $MODEL, $THREADS threads, ctx/slot $CTX, prompt words $PW, max tokens $MT, $RPC requests per client"
for n in "${NS[@]}"; do
  "$MOE" serve -m "$MODEL" -t "$THREADS" --parallel "$n" --ctx "$CTX" --port "$PORT" --queue $((2 * n)) \
    >"$LOG/moe-$n.log" 2>&1 &
  run_one "moe serve N=$n" $! "$n" "$PORT"
  # shellcheck disable=SC2086
  "$LLAMA_SERVER" -m "$MODEL" -t "$THREADS" -tb "$THREADS" --parallel "$n" -c $((n * CTX)) --port $((PORT + 1)) \
    --no-webui ${LLAMA_EXTRA:-} >"$LOG/llama-$n.log" 2>&1 &
  run_one "llama-server N=$n" $! "$n" $((PORT + 1))
done
