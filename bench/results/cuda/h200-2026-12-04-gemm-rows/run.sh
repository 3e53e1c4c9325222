#!/usr/bin/env bash
# The batched-decode linears on the H200, from the repository root on the GPU machine:
#   bench/results/cuda/h200-2026-12-04-gemm-rows/run.sh KVFORGE BENCH_CUDA_GEMV
# gemv8/16/64.txt: bench_cuda_gemv at 8, 16 and 64 rows: "dispatch, before" is the step
# without the gemm_rows kernel (the bulk-copy gemv at 8 rows, cuBLASLt from 9), "rows ..."
# the kernel's shapes (x tiles as the rows need; tiles a warp, warps, stages in flight, splits
# against the schedule's), "kernel alone" and "x16 alone" its two launches apart; gemv4.txt
# at 4 rows, where every group's x was rounded by the one-block-a-row norm kernel (the
# norm-less groups' rounding is the cast's now: 5 us a layer less at 8 rows);
# e2e.txt (with gemv4.txt's rounding of x): decode tokens/s of `kvforge batch` (N requests of 128 prompt tokens and 128 greedy
# ones, TinyLlama-1.1B-shaped F16) and tg128 of F16 and Q8_0; kernels-batch*.txt: ncu's
# kernel times (bench/cuda/kernel_times.py) of the 8- and 64-row decode steps.
set -uo pipefail
KVFORGE=${1:-build/src/kvforge}
GEMV=${2:-build/bench/bench_cuda_gemv}
export LD_LIBRARY_PATH=${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
M=${KVF_BENCH_MODELS:-/tmp/kvf-tinyllama}; mkdir -p "$M"
for r in 4 8 16 64; do "$GEMV" $r; done
for t in f16 q8_0; do
  [ -f "$M/tinyllama-$t.gguf" ] || "$KVFORGE" convert -m synthetic:llama-1.1b --outtype $t -o "$M/tinyllama-$t.gguf"
done
for n in 4 8 16 32 64; do
  python3 -c "import json, random
r = random.Random($n)
for i in range($n): print(json.dumps({'id': f'r{i}', 'ids': [r.randrange(1, 32000) for _ in range(128)], 'max_tokens': 128, 'temperature': 0}))" > "$M/batch$n.jsonl"
  echo "== batch $n"
  "$KVFORGE" batch -m "$M/tinyllama-f16.gguf" --device cuda --kv-type f16 --requests "$M/batch$n.jsonl" --max-rows $n \
    --max-batch-tokens 8192 --json | tail -n 1 | grep -o '"decode_tokens_per_s":[0-9.]*'
done
for t in f16 q8_0; do "$KVFORGE" bench e2e --device cuda --repeats 3 -m "$M/tinyllama-$t.gguf" --pp 0 --tg 128 | tail -n 1; done
for n in 8 64; do  # 24 new tokens each; past the prefill
  ncu --metrics gpu__time_duration.sum --csv --log-file "/tmp/b$n.csv" --launch-skip 1200 --launch-count 760 \
    "$KVFORGE" batch -m "$M/tinyllama-f16.gguf" --device cuda --kv-type f16 --requests "$M/batch$n.jsonl" --max-rows $n \
    --max-batch-tokens 8192 > /dev/null 2>&1
  python3 bench/cuda/kernel_times.py "/tmp/b$n.csv" 1
done
