#!/usr/bin/env bash
# Two kvforge builds on the GPU machine in one call, so that both see the same card and
# clocks: the new build's GPU tests (those matching FILTER, all without one), then decode
# speed of each build alternated twice, tg128 of the TinyLlama-shaped F16 and Q8_0 models
# and F16 at depth 32768 (`kvforge bench e2e`, median of 3 repeats a run). Run from the
# repository root; each BIN_DIR holds kvforge (NEW_BIN_DIR test_gpu too) and their libraries.
#   bench/cuda/ab_tg.sh OLD_BIN_DIR NEW_BIN_DIR [FILTER]
set -uo pipefail
OLD=${1:?usage: ab_tg.sh OLD_BIN_DIR NEW_BIN_DIR [FILTER]}
NEW=${2:?usage: ab_tg.sh OLD_BIN_DIR NEW_BIN_DIR [FILTER]}
FILTER=${3:-*}
M=/tmp/kvf-tinyllama
mkdir -p "$M"
export LD_LIBRARY_PATH=$NEW:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for t in f16 q8_0; do
  [ -f "$M/$t.gguf" ] || "$NEW/kvforge" convert -m synthetic:llama-1.1b --outtype $t -o "$M/$t.gguf" > /dev/null
done
if [ -x "$NEW/test_gpu" ]; then
  KVF_SOURCE_DIR=$(pwd) KVF_REQUIRE_GPU=1 "$NEW/test_gpu" --gtest_filter="$FILTER" |
    grep -E "^\[ +(FAILED|PASSED) |^\[==========\]|Failure|Expected|Which is|rel "
fi
tg() {  # build, model, extra flags: the result line of one bench e2e
  echo "$1 $2 ${3:-} $("$1/kvforge" bench e2e --device cuda --repeats 3 -m "$M/$2.gguf" --pp 0 --tg 128 ${3:-} | tail -n 1)"
}
for round in 1 2; do
  for bin in "$OLD" "$NEW"; do
    tg "$bin" f16
    tg "$bin" q8_0
    tg "$bin" f16 "--depth 32768"
  done
done
