#!/usr/bin/env bash
# Builds of kvforge on the GPU machine in one call, so that all see the same card and clocks:
# the last build's GPU suites (test_gpu and test_cuda, where its folder has them; the tests
# matching KVF_AB_FILTER, all without it; none with "-"),
# then the decode speed of each build alternated twice: tg128 (`kvforge bench e2e`, median of
# 3 repeats a run) of the TinyLlama-shaped models KVF_AB_TG names (default "f16 q8_0
# f16@32768": F16, Q8_0, F16 at depth 32768), with KVF_AB_PP (e.g. 512) a prefill of that
# many tokens measured beside each, and with KVF_AB_BATCH (e.g. "8 64") batched decode of that
# many sequences of 128 random prompt ids and 128 greedy tokens (`kvforge batch`, its
# decode_tokens_per_s); last, each build's greedy ids in every batch against the first
# build's. Run from the repository root; each BIN_DIR holds kvforge and its libraries (the
# last one its suites too).
#   bench/cuda/ab_tg.sh BIN_DIR...
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: ab_tg.sh BIN_DIR..." >&2; exit 2; }
LAST=${!#}
M=/tmp/kvf-tinyllama
mkdir -p "$M"
export LD_LIBRARY_PATH=$LAST:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
TG=${KVF_AB_TG-f16 q8_0 f16@32768}
for t in f16 $TG; do
  t=${t%@*}
  [ -f "$M/$t.gguf" ] || "$LAST/kvforge" convert -m synthetic:llama-1.1b --outtype $t -o "$M/$t.gguf" > /dev/null 2>&1
done
for suite in test_gpu test_cuda; do
  [ -x "$LAST/$suite" ] && [ "${KVF_AB_FILTER:-*}" != - ] || continue
  echo "== $suite"
  KVF_SOURCE_DIR=$(pwd) KVF_REQUIRE_GPU=1 "$LAST/$suite" --gtest_filter="${KVF_AB_FILTER:-*}" |
    grep -E "^\[ +(FAILED|PASSED) |^\[==========\]|Failure|Expected|Which is|rel "
done
for n in ${KVF_AB_BATCH:-}; do
  python3 -c "import json, random
r = random.Random($n)
for i in range($n): print(json.dumps({'id': f'r{i}', 'ids': [r.randrange(1, 32000) for _ in range(128)], 'max_tokens': 128, 'temperature': 0}))" \
    > "$M/batch$n.jsonl"
done
tg() {  # build, model@depth: the result line of one bench e2e
  local depth=0
  [[ $2 == *@* ]] && depth=${2#*@}
  echo "$1 $2 $("$1/kvforge" bench e2e --device cuda --repeats 3 -m "$M/${2%@*}.gguf" --pp "${KVF_AB_PP:-0}" --tg 128 \
    --depth "$depth" | tail -n 1 | sed 's/.*KV [a-z0-9]*: //')"
}
batch() {  # build, its index, sequences: decode tokens per second; the ids kept for the comparison
  "$1/kvforge" batch -m "$M/f16.gguf" --device cuda --kv-type f16 --requests "$M/batch$3.jsonl" --max-rows "$3" \
    --max-batch-tokens 8192 --json 2> /dev/null > "$M/out_$2_$3.jsonl"
  echo "$1 batch $3 $(tail -n 1 "$M/out_$2_$3.jsonl" | python3 -c 'import json, sys; print(round(json.load(sys.stdin)["decode_tokens_per_s"]))')"
}
for round in 1 2; do
  i=0
  for bin in "$@"; do
    i=$((i + 1))
    for t in $TG; do tg "$bin" "$t"; done
    for n in ${KVF_AB_BATCH:-}; do batch "$bin" $i "$n"; done
  done
done
for n in ${KVF_AB_BATCH:-}; do
  for i in $(seq 2 $#); do
    echo "greedy ids ${!i} vs $1, $n sequences: $(python3 -c "import json, sys
ids = lambda f: [json.loads(l)['ids'] for l in open(f).read().splitlines()[:-1]]
a, b = ids(sys.argv[1]), ids(sys.argv[2]); print(sum(x == y for x, y in zip(a, b)), 'of', len(a))" "$M/out_${i}_$n.jsonl" "$M/out_1_$n.jsonl")"
  done
done
