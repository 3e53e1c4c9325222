#!/usr/bin/env bash
# tg128 of builds alternated in one call on the GPU machine (tg.txt): TinyLlama-shaped F16 and
# Q8_0 GGUFs at depth 0 and F16 at depth 32768, `kvforge bench e2e --repeats 3`, two rounds.
# From the repository root, each argument a folder holding a kvforge build (the first one's
# libraries on LD_LIBRARY_PATH):
#   bench/results/cuda/h100-2026-12-06-qkv-epilogue/run.sh BIN_DIR...
set -uo pipefail
M=/tmp/kvf-tinyllama
mkdir -p "$M"
export LD_LIBRARY_PATH=$1:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for t in f16 q8_0; do
  [ -f "$M/$t.gguf" ] || "$1/kvforge" convert -m synthetic:llama-1.1b --outtype $t -o "$M/$t.gguf" > /dev/null
done
tg() { echo "$1 $2 ${3:-} $("$1/kvforge" bench e2e --device cuda --repeats 3 -m "$M/$2.gguf" --pp 0 --tg 128 ${3:-} | tail -n 1 | sed 's/.*tg128/tg128/')"; }
for round in 1 2; do
  for bin in "$@"; do
    tg "$bin" f16
    tg "$bin" q8_0
    tg "$bin" f16 "--depth 32768"
  done
done
