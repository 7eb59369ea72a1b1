#!/usr/bin/env bash
# Regenerates tests/data/tokenizer/*.out: llama.cpp's token ids for tests/data/tokenizer/strings.inp
# on every vocabulary/pre-tokenizer the parity test checks. Run once by a developer; the test only
# reads the results. Needs a llama.cpp build (LLAMA=path to its checkout, built in $LLAMA/build)
# and this project's build/ (for the GGUF library used by set_pre).
#   scripts/tokenizer/gen-vectors.sh /path/to/llama.cpp [WORK_DIR]
set -euo pipefail
LLAMA=${1:?path to a built llama.cpp checkout}
WORK=${2:-/tmp/moe-tok-vectors}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DATA=$ROOT/tests/data
mkdir -p "$WORK"
g++ -std=c++20 -O1 -I"$ROOT/src" "$ROOT/scripts/tokenizer/set_pre.cpp" "$ROOT/build/libmoe_format.a" \
    "$ROOT/build/libmoe_core.a" -o "$WORK/set_pre"
g++ -std=c++17 -O1 -I"$LLAMA/include" -I"$LLAMA/ggml/include" "$ROOT/scripts/tokenizer/ref_tokenize.cpp" \
    -L"$LLAMA/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$LLAMA/build/bin" -o "$WORK/ref_tokenize"
STR=$DATA/tokenizer/strings.inp
# Real vocabularies, as shipped (name = file in tests/data/vocab without ggml-vocab- / .gguf).
for v in gpt-2 llama-spm gpt-neox deepseek-coder phi-3; do
  "$WORK/ref_tokenize" "$DATA/vocab/ggml-vocab-$v.gguf" "$STR" > "$DATA/tokenizer/$v.out"
  "$WORK/ref_tokenize" "$DATA/vocab/ggml-vocab-$v.gguf" "$STR" 1 > "$DATA/tokenizer/$v.special.out"
  "$WORK/ref_tokenize" "$DATA/vocab/ggml-vocab-$v.gguf" "$STR" d > "$DATA/tokenizer/$v.detok"
  # two long texts (64 KB of Shakespeare; all strings joined, three times): the word-cache paths
  "$WORK/ref_tokenize" "$DATA/vocab/ggml-vocab-$v.gguf" "$DATA/tokenizer/long.inp" > "$DATA/tokenizer/$v.long.out"
done
# Pre-tokenizers without a small real vocab: the gpt-2 vocabulary with tokenizer.ggml.pre replaced
# (named gpt-2@PRE), and the GPT-NeoX vocabulary (user-defined tokens) as OLMoE's "olmo".
for p in $(cat "$DATA/tokenizer/pre-names.txt"); do
  "$WORK/set_pre" "$DATA/vocab/ggml-vocab-gpt-2.gguf" "$p" "$WORK/gpt-2@$p.gguf"
  "$WORK/ref_tokenize" "$WORK/gpt-2@$p.gguf" "$STR" > "$DATA/tokenizer/gpt-2@$p.out"
done
"$WORK/ref_tokenize" "$WORK/gpt-2@qwen2.gguf" "$STR" d > "$DATA/tokenizer/gpt-2@qwen2.detok"
# Token-attribute rules: gpt-2 with gpt-oss / Qwen / FIM style special tokens appended (3 control,
# 4 user-defined); llama.cpp retypes some of them by their text.
"$WORK/set_pre" "$DATA/vocab/ggml-vocab-gpt-2.gguf" gpt-4o "$WORK/gpt-2+attrs.gguf" "<|channel|>:3" "<|message|>:3" \
    "<|start|>:3" "<|constrain|>:3" "<|end|>:3" "<|return|>:3" "<|call|>:3" "<|im_end|>:4" "<|fim_prefix|>:4" \
    "<|user_tok|>:4" "<unused_1>:3"
"$WORK/ref_tokenize" "$WORK/gpt-2+attrs.gguf" "$STR" > "$DATA/tokenizer/gpt-2+attrs.out"
"$WORK/ref_tokenize" "$WORK/gpt-2+attrs.gguf" "$STR" 1 > "$DATA/tokenizer/gpt-2+attrs.special.out"
"$WORK/set_pre" "$DATA/vocab/ggml-vocab-gpt-neox.gguf" olmo "$WORK/gpt-neox@olmo.gguf"
"$WORK/ref_tokenize" "$WORK/gpt-neox@olmo.gguf" "$STR" > "$DATA/tokenizer/gpt-neox@olmo.out"
# Piece boundaries of every regex set, from llama.cpp's own splitter (unicode_regex_split).
g++ -std=c++20 -O1 -I"$ROOT/src" "$ROOT/scripts/tokenizer/dump_sets.cpp" "$ROOT/build/libmoe_tokenizer.a" \
    "$ROOT/build/libmoe_format.a" "$ROOT/build/libmoe_core.a" $(pkg-config --libs libpcre2-8 libpcre2-32 icu-uc) \
    -o "$WORK/dump_sets"
g++ -std=c++17 -O1 "$ROOT/scripts/tokenizer/ref_split.cpp" -L"$LLAMA/build/bin" -lllama \
    -Wl,-rpath,"$LLAMA/build/bin" -o "$WORK/ref_split"
"$WORK/dump_sets" > "$WORK/sets.txt"
mkdir -p "$DATA/tokenizer/splits"
"$WORK/ref_split" "$WORK/sets.txt" "$STR" "$DATA/tokenizer/splits"
