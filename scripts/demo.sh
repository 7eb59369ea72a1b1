#!/usr/bin/env bash
# `make run`: the main job on the built-in default model. For now: generate the demo model
# (tiny qwen3moe preset, random weights), inspect it, then generate text with the built-in default model.
set -euo pipefail
BUILD=${1:-build}
mkdir -p "$BUILD/models"
MODEL="$BUILD/models/demo-tiny-qwen3moe.gguf"
"$BUILD/moe" version
echo "== moe gen tiny-qwen3moe -> $MODEL"
"$BUILD/moe" gen tiny-qwen3moe -o "$MODEL" --seed 1
echo "== moe inspect $MODEL"
"$BUILD/moe" inspect "$MODEL"
echo "== moe run -p \"Once upon a time\" -n 32   (no -m: the built-in default model, generated on first use)"
"$BUILD/moe" run -p "Once upon a time" -n 32
