#!/usr/bin/env bash
# Decode on the H200 after the pool writes joined the rope packs, the pack and the decode
# attention became programmatic dependents and the fused norms' 1/rms loads went wide; from
# the repository root:
#   bench/results/cuda/h200-2026-12-04-decode-pdl/run.sh KVFORGE
# e2e.txt: decode tokens/s of `kvforge batch` (N requests of 128 prompt tokens and 128 greedy
# ones, TinyLlama-1.1B-shaped F16), with the steady decode's seconds and the executor's share;
# tg128 of F16 and Q8_0 and tg128 at depth 32768 (F16).
# kernels-batch64.txt: ncu's kernel times of the 64-row decode step (bench/cuda/kernel_times.py;
# caches not flushed, clocks not fixed; about 3 steps).
set -uo pipefail
KVFORGE=${1:-build/src/kvforge}
export LD_LIBRARY_PATH=${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
M=${KVF_BENCH_MODELS:-/tmp/kvf-tinyllama}; mkdir -p "$M"
for t in f16 q8_0; do
  [ -f "$M/tinyllama-$t.gguf" ] || "$KVFORGE" convert -m synthetic:llama-1.1b --outtype $t -o "$M/tinyllama-$t.gguf"
done
for n in 8 32 64; do
  python3 -c "import json, random
r = random.Random($n)
for i in range($n): print(json.dumps({'id': f'r{i}', 'ids': [r.randrange(1, 32000) for _ in range(128)], 'max_tokens': 128, 'temperature': 0}))" > "$M/batch$n.jsonl"
  echo "== batch $n"
  "$KVFORGE" batch -m "$M/tinyllama-f16.gguf" --device cuda --kv-type f16 --requests "$M/batch$n.jsonl" --max-rows $n \
    --max-batch-tokens 8192 --json | tail -n 1 |
    python3 -c "import json, sys; j = json.load(sys.stdin); print({k: j[k] for k in ('decode_tokens_per_s', 'decode_s', 'decode_executor_s')})"
done
for t in f16 q8_0; do "$KVFORGE" bench e2e --device cuda --repeats 3 -m "$M/tinyllama-$t.gguf" --pp 0 --tg 128 | tail -n 1; done
"$KVFORGE" bench e2e --device cuda --repeats 3 -m "$M/tinyllama-f16.gguf" --pp 0 --tg 128 --depth 32768 | tail -n 1
ncu --metrics gpu__time_duration.sum --csv --cache-control none --clock-control none --log-file /tmp/b64.csv \
  --launch-skip 1200 --launch-count 1200 "$KVFORGE" batch -m "$M/tinyllama-f16.gguf" --device cuda --kv-type f16 \
  --requests "$M/batch64.jsonl" --max-rows 64 --max-batch-tokens 8192 > /dev/null 2>&1
echo "== kernels, batch 64 (1200 launches)"
python3 bench/cuda/kernel_times.py /tmp/b64.csv 1
