#!/usr/bin/env bash
# The Qwen3-MoE 0.5B shape on the H200, the routed experts as one moe eqn (moe.cu) against
# the traced chain that computes every expert for every token (--skip-pass moe), Q8_0 and
# F16, two rounds back to back. Run on the GPU machine with a kvforge built for sm_90.
#   usage: run.sh [KVFORGE]   (output: bench.txt here)
set -u
KVFORGE=${1:-build/src/kvforge}
OUT=$(cd "$(dirname "$0")" && pwd)
: > "$OUT/bench.txt"
for t in q8_0 f16; do
  "$KVFORGE" convert -m synthetic:qwen3moe-0.5b --outtype $t -o /tmp/moe-$t.gguf > /dev/null 2>&1
done
for round in 1 2; do
  for t in q8_0 f16; do
    for skip in "" "--skip-pass moe"; do
      echo "round $round $t ${skip:-moe eqn}" | tee -a "$OUT/bench.txt"
      "$KVFORGE" bench e2e --device cuda --repeats 5 -m /tmp/moe-$t.gguf --pp 512 --tg 128 $skip 2>&1 | tee -a "$OUT/bench.txt"
    done
  done
  for skip in "" "--skip-pass moe"; do
    echo "round $round f16 pp4096 ${skip:-moe eqn}" | tee -a "$OUT/bench.txt"
    "$KVFORGE" bench e2e --device cuda --repeats 5 -m /tmp/moe-f16.gguf --pp 4096 --tg 0 $skip 2>&1 | tee -a "$OUT/bench.txt"
  done
done
