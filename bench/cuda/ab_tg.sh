#!/usr/bin/env bash
# Builds of kvforge on the GPU machine in one call, so that all see the same card and clocks:
# the last build's GPU tests (those matching KVF_AB_FILTER, all without it; none with "-"),
# then the decode speed of each build alternated twice: tg128 of the TinyLlama-shaped F16 and
# Q8_0 models and F16 at depth 32768 (`kvforge bench e2e`, median of 3 repeats a run), and
# with KVF_AB_BATCH (e.g. "8 64") batched decode of that many sequences of 128 prompt and 128
# generated tokens (`kvforge batch`, its decode_tokens_per_s). Run from the repository root;
# each BIN_DIR holds kvforge and its libraries (the last one test_gpu too).
#   bench/cuda/ab_tg.sh BIN_DIR...
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: ab_tg.sh BIN_DIR..." >&2; exit 2; }
LAST=${!#}
M=/tmp/kvf-tinyllama
mkdir -p "$M"
export LD_LIBRARY_PATH=$LAST:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for t in f16 q8_0; do
  [ -f "$M/$t.gguf" ] || "$LAST/kvforge" convert -m synthetic:llama-1.1b --outtype $t -o "$M/$t.gguf" > /dev/null 2>&1
done
if [ -x "$LAST/test_gpu" ] && [ "${KVF_AB_FILTER:-*}" != - ]; then
  KVF_SOURCE_DIR=$(pwd) KVF_REQUIRE_GPU=1 "$LAST/test_gpu" --gtest_filter="${KVF_AB_FILTER:-*}" |
    grep -E "^\[ +(FAILED|PASSED) |^\[==========\]|Failure|Expected|Which is|rel "
fi
for n in ${KVF_AB_BATCH:-}; do
  python3 -c "import json, random
r = random.Random($n)
for i in range($n): print(json.dumps({'id': f'r{i}', 'ids': [r.randrange(1, 32000) for _ in range(128)], 'max_tokens': 128, 'temperature': 0}))" \
    > "$M/batch$n.jsonl"
done
tg() {  # build, model, extra flags: the result line of one bench e2e
  echo "$1 $2 ${3:-} $("$1/kvforge" bench e2e --device cuda --repeats 3 -m "$M/$2.gguf" --pp 0 --tg 128 ${3:-} | tail -n 1 | sed 's/.*tg128/tg128/')"
}
batch() {  # build, sequences: decode tokens per second
  echo "$1 batch $2 $("$1/kvforge" batch -m "$M/f16.gguf" --device cuda --kv-type f16 --requests "$M/batch$2.jsonl" \
    --max-rows "$2" --max-batch-tokens 8192 --json | tail -n 1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["decode_tokens_per_s"])')"
}
for round in 1 2; do
  for bin in "$@"; do
    tg "$bin" f16
    tg "$bin" q8_0
    tg "$bin" f16 "--depth 32768"
    for n in ${KVF_AB_BATCH:-}; do batch "$bin" "$n"; done
  done
done
