#!/usr/bin/env bash
# Run on the GPU machine from the repository root, with build-gpu/carry/s37d.tar.xz holding the
# builds (kvforge and bench_cuda_gemv each; base also the libraries; v2 test_gpu).
# The streaming kernel's schedule: base (splits from SMs x blocks an SM), v1 (splits from the
# driver's cluster residency), v2 (v1 + 64-row tiles where 128-row ones leave the device idle),
# v3 (v2 + every group streamed up to 64 rows). v2's whole GPU suite, the 64/32-row layer
# linears of each, then batched decode of 64 and 32 alternated twice, with greedy ids compared.
set -uo pipefail
mkdir -p /tmp/kvf && tar -C /tmp/kvf -xJf build-gpu/carry/s37d.tar.xz
export LD_LIBRARY_PATH=/tmp/kvf/base:/usr/local/cuda/lib64 KVF_SOURCE_DIR=$(pwd)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
start=$SECONDS
KVF_REQUIRE_GPU=1 timeout 280 /tmp/kvf/v2/test_gpu > $OUT/test_gpu_v2.log 2>&1
echo "v2 test_gpu rc=$? in $((SECONDS-start)) s"
grep -E "^\[ +(FAILED|PASSED) |^\[==========\]" $OUT/test_gpu_v2.log | tail -12
for rows in 64 32; do for v in base v1 v2 v3; do echo "== $v $rows"; /tmp/kvf/$v/bench_cuda_gemv $rows "stream|dispatch"; done; done 2>&1 | tee $OUT/gemv.txt
M=/tmp/kvf-tinyllama; mkdir -p $M
/tmp/kvf/base/kvforge convert -m synthetic:llama-1.1b --outtype f16 -o $M/f16.gguf > /dev/null 2>&1
for n in 32 64; do
python3 -c "import json, random
r = random.Random($n)
for i in range($n): print(json.dumps({'id': f'r{i}', 'ids': [r.randrange(1, 32000) for _ in range(128)], 'max_tokens': 128, 'temperature': 0}))" > $M/batch$n.jsonl
done
for round in 1 2; do for n in 64 32; do for v in base v1 v2 v3; do
  /tmp/kvf/$v/kvforge batch -m $M/f16.gguf --device cuda --kv-type f16 --requests $M/batch$n.jsonl --max-rows $n --max-batch-tokens 8192 --json > $OUT/batch_${v}_$n.txt 2>&1
  echo "$v batch $n $(tail -n 1 $OUT/batch_${v}_$n.txt | python3 -c 'import json, sys; d = json.load(sys.stdin); print(round(d["decode_tokens_per_s"]), round(d["decode_executor_s"] / d["decode_s"], 3))') same ids as base: $(python3 -c "import json, sys
ids = lambda f: [json.loads(l)['ids'] for l in open(f).read().splitlines()[:-1]]
a, b = ids(sys.argv[1]), ids(sys.argv[2]); print(sum(x == y for x, y in zip(a, b)), 'of', len(a))" $OUT/batch_${v}_$n.txt $OUT/batch_base_$n.txt)"
done; done; done
echo "all done in $((SECONDS-start)) s"
