#!/usr/bin/env bash
# `make run`: the main job on the built-in default model, the Shakespeare MoE trained with
# `moe train` (models/shakespeare-moe.gguf; how it was made: docs/TRAINING.md). Inspect it, then
# generate text without -m: the text reads like the corpus, and the statistics end with the
# expert-load summary of its trained router.
set -euo pipefail
BUILD=${1:-build}
MODEL=models/shakespeare-moe.gguf
"$BUILD/moe" version
echo "== moe inspect $MODEL"
"$BUILD/moe" inspect "$MODEL"
echo "== moe run -p \"ROMEO:\" -n 120 --seed 1   (no -m: the built-in default model)"
"$BUILD/moe" run -p "ROMEO:" -n 120 --seed 1
