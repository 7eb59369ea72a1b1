#!/usr/bin/env bash
# Training tokens/s of `moe train` and of PyTorch on CPU (bench/train_torch.py), side by side in one
# run: same model shape (`--preset shakespeare`, the default Shakespeare MoE: vocab 1024, 4 layers,
# embd 128, 4/2 heads x 32, 16 experts top-2, ff 128), batch 16 x ctx 128, same threads. Outside
# the test suite; run it under `cpu bench` on the shared machine.
# Needs python3-torch (apt-get install python3-torch), run with Debian's /usr/bin/python3.
# Debian's torch calls the system libblas.so.3, which is the netlib reference BLAS unless another is
# selected; TORCH_BLAS=openblas runs PyTorch on OpenBLAS instead (apt-get install
# libopenblas0-openmp; only this process is pointed at it, the system default is left alone).
# usage: [TORCH_BLAS=netlib|openblas] bench/train_vs_torch.sh [BUILD_DIR] [STEPS] [ROUNDS] [THREADS]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-20}
ROUNDS=${3:-2}
THREADS=${4:-2}
DATA=tests/data/text/tinyshakespeare.txt
TORCH_ENV=()
case "${TORCH_BLAS:-netlib}" in
  netlib) ;;
  openblas) TORCH_ENV=(env LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp) ;;
  *) echo "TORCH_BLAS must be netlib or openblas" >&2; exit 2 ;;
esac
# On a loaded machine wall-clock tok/s mostly measures the scheduler, so each side also reports its
# CPU seconds (bash `time`: user + sys of the whole process, including vocabulary learning and the
# final evaluation for moe train, startup and warm-up steps for PyTorch).
TIMEFORMAT='  cpu: %U s user + %S s sys, %R s wall'
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r, $THREADS threads, torch BLAS ${TORCH_BLAS:-netlib}  ($(uptime | sed 's/.*load/load/'))"
  time ( "$BUILD/moe" train --data "$DATA" --preset shakespeare --steps "$STEPS" --log-every "$STEPS" --eval-every 0 \
    --eval-windows 1 --threads "$THREADS" 2>&1 | grep -E "^final" | sed 's/^/moe train: /' )
  time "${TORCH_ENV[@]}" /usr/bin/python3 bench/train_torch.py --steps "$STEPS" --threads "$THREADS"
done
