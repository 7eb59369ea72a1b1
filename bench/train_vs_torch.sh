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
# On a loaded machine wall-clock tok/s mostly measures the scheduler, so each side also reports its
# CPU seconds (bash `time`: user + sys of the whole process, including vocabulary learning and the
# final evaluation for moe train, startup and warm-up steps for PyTorch).
TIMEFORMAT='  cpu: %U s user + %S s sys, %R s wall'
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r  ($(uptime | sed 's/.*load/load/'))"
  time ( "$BUILD/moe" train --data "$DATA" --experts 16 --top-k 2 --steps "$STEPS" --log-every "$STEPS" --eval-every 0 \
    --eval-windows 1 --threads 2 2>&1 | grep -E "^step|^final" | sed 's/^/moe train: /' )
  time /usr/bin/python3 bench/train_torch.py --steps "$STEPS" --threads 2
done
