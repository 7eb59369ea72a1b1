#!/usr/bin/env bash
# Training tokens/s of `moe train` and of PyTorch on CPU (bench/train_torch.py), side by side in one
# run: same model shape (the default Shakespeare MoE: vocab 1024, 4 layers, embd 128, 4/2 heads x 32,
# 16 experts top-2, ff 128), batch 16 x ctx 128, 2 threads. Outside the test suite.
# Needs python3-torch (apt-get install python3-torch), run with Debian's /usr/bin/python3.
# usage: bench/train_vs_torch.sh [BUILD_DIR] [STEPS] [ROUNDS]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-20}
ROUNDS=${3:-2}
DATA=tests/data/text/tinyshakespeare.txt
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r  ($(uptime | sed 's/.*load/load/'))"
  "$BUILD/moe" train --data "$DATA" --experts 16 --top-k 2 --steps "$STEPS" --log-every "$STEPS" --eval-every 0 \
    --eval-windows 1 --threads 2 2>&1 | grep -E "^step" | sed 's/^/moe train: /'
  /usr/bin/python3 bench/train_torch.py --steps "$STEPS" --threads 2
done
