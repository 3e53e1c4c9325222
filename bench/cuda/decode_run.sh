#!/usr/bin/env bash
# kvforge's decode speeds on the GPU machine, TinyLlama-1.1B-shaped with random weights
# (F16 and Q8_0 GGUFs converted once into $KVF_BENCH_MODELS), from the repository root:
#   bench/cuda/decode_run.sh KVFORGE "BATCHES" "PROFILED"
# For each N of BATCHES: `kvforge batch` over N requests of 128 prompt tokens and 128 greedy
# ones (decode tokens/s, the steady decode's seconds and the executor's share of them). Then
# tg128 of F16 and Q8_0 and tg128 at depth 32768 (F16). For each N of PROFILED: ncu's kernel
# times of the N-row decode step (bench/cuda/kernel_times.py; 1200 launches past the prefill,
# caches not flushed, clocks not fixed).
set -uo pipefail
KVFORGE=${1:-build/src/kvforge}
BATCHES=${2:-"8 32 64"}
PROFILED=${3:-64}
export LD_LIBRARY_PATH=${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
M=${KVF_BENCH_MODELS:-/tmp/kvf-tinyllama}; mkdir -p "$M"
for t in f16 q8_0; do
  [ -f "$M/tinyllama-$t.gguf" ] || "$KVFORGE" convert -m synthetic:llama-1.1b --outtype $t -o "$M/tinyllama-$t.gguf"
done
requests() {
  python3 -c "import json, random
r = random.Random($1)
for i in range($1): print(json.dumps({'id': f'r{i}', 'ids': [r.randrange(1, 32000) for _ in range(128)], 'max_tokens': 128, 'temperature': 0}))" > "$M/batch$1.jsonl"
}
batch() {  # N, then any more options
  local n=$1; shift
  "$KVFORGE" batch -m "$M/tinyllama-f16.gguf" --device cuda --kv-type f16 --requests "$M/batch$n.jsonl" --max-rows "$n" \
    --max-batch-tokens 8192 "$@"
}
for n in $BATCHES; do
  requests "$n"
  echo "== batch $n"
  batch "$n" --json | tail -n 1 |
    python3 -c "import json, sys; j = json.load(sys.stdin); print({k: j[k] for k in ('decode_tokens_per_s', 'decode_s', 'decode_executor_s')})"
done
for t in f16 q8_0; do "$KVFORGE" bench e2e --device cuda --repeats 3 -m "$M/tinyllama-$t.gguf" --pp 0 --tg 128 | tail -n 1; done
"$KVFORGE" bench e2e --device cuda --repeats 3 -m "$M/tinyllama-f16.gguf" --pp 0 --tg 128 --depth 32768 | tail -n 1
for n in $PROFILED; do
  [ -f "$M/batch$n.jsonl" ] || requests "$n"
  ncu --metrics gpu__time_duration.sum --csv --cache-control none --clock-control none --log-file "/tmp/b$n.csv" \
    --launch-skip 1200 --launch-count 1200 "$KVFORGE" batch -m "$M/tinyllama-f16.gguf" --device cuda --kv-type f16 \
    --requests "$M/batch$n.jsonl" --max-rows "$n" --max-batch-tokens 8192 > /dev/null 2>&1
  echo "== kernels, batch $n (1200 launches)"
  python3 bench/cuda/kernel_times.py "/tmp/b$n.csv" 1
done
